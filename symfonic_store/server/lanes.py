"""How the service calls the synchronous store: in worker threads, a bounded number at a
time, in the order the requests asked, and on SQLite one answer at a time.

Every store call of a request goes through :class:`Lanes`. Requests beyond the bound wait
on the event loop -- holding no thread and no database connection -- in a first-come
queue (anyio's ``CapacityLimiter`` and ``Lock`` hand over in arrival order), so under a
burst each request waits about as long as the others, and none waits on a connection
pool's timeout or on SQLite's busy handler. The bound is sized to the store's connection
pool (SQLAlchemy's default is 5 kept plus 10 overflow): a thread never waits inside for
a connection.

On SQLite one writer commits at a time whatever happens (``BEGIN IMMEDIATE``): answers
that meet at the lock are put to sleep by SQLite's busy handler, which backs off up to
100 ms at a time while the lock may already be free, so a few unlucky answers take
seconds. The answers of this process therefore take turns in a queue of their own before
they take a thread; a writer in another process (the CLI, an agent) still meets them at
SQLite's lock, with its busy timeout, as before. On PostgreSQL answers run side by side,
and the database queues what must wait.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")

DEFAULT_STORE_THREADS = 8
"""Store calls running at once. Two cores are busy with 2-4; the rest overlap the waits
(a commit's fsync, a PostgreSQL round trip). Keep it within the engine's pool."""


class Lanes:
    """The worker threads the store's calls run in (see the module doc).

    Args:
        threads: store calls running at once (each in a worker thread, on a connection
            of its own from the store's pool).
        one_writer: answers take turns (SQLite, whose writers exclude each other).
    """

    def __init__(self, *, threads: int = DEFAULT_STORE_THREADS, one_writer: bool = False) -> None:
        if threads < 1:
            raise ValueError("the service needs at least one thread for the store")
        self.threads = threads
        self._limiter = anyio.CapacityLimiter(threads)
        self._writer = anyio.Lock() if one_writer else None

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread, when one of the lane's is free."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=self._limiter)

    async def write(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """:meth:`run` for an answer: on SQLite after the answers queued before it."""
        if self._writer is None:
            return await self.run(fn, *args, **kwargs)
        async with self._writer:
            return await self.run(fn, *args, **kwargs)
