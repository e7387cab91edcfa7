"""How the service calls the synchronous store: in worker threads, a bounded number at a
time, in the order the requests asked; answers in a lane of their own.

Every store call of a request goes through :class:`Lanes`. Requests beyond the bound wait
on the event loop -- holding no thread and no database connection -- in a first-come
queue (anyio's ``CapacityLimiter`` hands its tokens over in arrival order), so under a
burst each request waits about as long as the others, and none waits on a connection
pool's timeout or on SQLite's busy handler.

Answers have threads of their own, so an answer never queues behind a crowd of inbox
reads (and reads never behind slow commits). On SQLite one writer commits at a time
whatever happens (``BEGIN IMMEDIATE``), and answers that meet at that lock are put to
sleep by SQLite's busy handler, which backs off up to 100 ms at a time while the lock
may already be free: so there the answers of this process take turns, one thread, in
arrival order. A writer in another process (the CLI, an agent) still meets them at
SQLite's lock, with its busy timeout, as before. On PostgreSQL answers run side by side
and the database queues what must wait.

Both lanes together stay within the store's connection pool (SQLAlchemy's default: 5
kept plus 10 overflow), so a thread never waits inside for a connection. How many
threads each lane has is :func:`default_threads` unless ``create_app(store_threads=)``
says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from ..db.backends import Backend

T = TypeVar("T")

DEFAULT_STORE_THREADS = 6
"""Reads of the store running at once on PostgreSQL, and answers: each waits mostly on
round trips to the server, so a few more than the cores keep them overlapping. Twice
this stays within the engine's default pool of 15."""

SQLITE_READ_THREADS = 2
"""Reads running at once on SQLite: they wait on nothing but the CPU (the pages are in
memory), so more threads than cores only queue at the GIL -- where the one answer
committing would wait too, after each call into SQLite, for its turn."""


def default_threads(backend: Backend) -> int:
    """The readers' threads for a store on ``backend``: few for a database in this
    process (SQLite), more for one behind round trips (PostgreSQL)."""
    return SQLITE_READ_THREADS if backend.in_process else DEFAULT_STORE_THREADS


class Lanes:
    """The worker threads the store's calls run in (see the module doc).

    Args:
        threads: reads running at once, and answers running at once (each in a worker
            thread, on a connection of its own from the store's pool).
        one_writer: answers take turns in one thread (SQLite, whose writers exclude
            each other).
    """

    def __init__(self, *, threads: int = DEFAULT_STORE_THREADS, one_writer: bool = False) -> None:
        if threads < 1:
            raise ValueError("the service needs at least one thread for the store")
        self.threads = threads
        self._readers = anyio.CapacityLimiter(threads)
        self._writers = anyio.CapacityLimiter(1 if one_writer else threads)

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread of the readers' lane, in turn."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=self._readers)

    async def write(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` -- an answer -- in a worker thread of the answers' lane."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=self._writers)
