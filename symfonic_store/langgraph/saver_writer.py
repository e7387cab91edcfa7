"""The checkpointer's write queue on SQLite, and its reads outside a transaction.

SQLite lets one writer in; :class:`SqliteWriter` queues the checkpointer's write
transactions of one database and commits what arrived together as a group, on one held
connection (see its docstring). :func:`async_writer_queue` is its asyncio counterpart.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection

from ..db.translate import translate_errors
from ..store import execute
from ..store.plan import Op


def read_op(conn: Connection, op: Op[Any]) -> Any:
    """A read outside a transaction (each statement atomic), as LangGraph's savers read."""
    try:
        return op.fn(conn)
    finally:
        if conn.in_transaction():  # a statement that went through SQLAlchemy began one
            conn.commit()


class Settled:
    """The checkpoints nothing can have waited at, as the SQLite writer's connection knows.

    A put asks whether the thread waited at the checkpoint it replaces (an open
    interrupt raised there, its breakpoint minted: :func:`~..db.statements.native.waits_at`).
    Nothing can wait at a checkpoint before it exists, and afterwards only a commit can
    make it wait: one on another connection changes this connection's ``PRAGMA
    data_version`` (another process's included), and one of the writer's own steps that
    wrote a record is seen here. So a checkpoint the writer itself created, with no such
    commit since, needs no read: :meth:`known` answers it, inside the step's transaction
    (BEGIN IMMEDIATE: nobody commits between the answer and the COMMIT).
    """

    __slots__ = ("_blind", "_latest", "_tainted", "_version")
    LIMIT = 4096

    def __init__(self) -> None:
        self._version: int | None = None
        self._latest: dict[tuple[str, str], str] = {}
        # Checkpoints the writer's own records named before (or whether) their put came:
        # LangGraph may save a step's writes before the checkpoint they belong to.
        self._tainted: set[tuple[str, str]] = set()
        self._blind = False

    def _current(self, conn: Connection) -> dict[tuple[str, str], str]:
        version = conn.connection.driver_connection.execute("PRAGMA data_version").fetchone()[0]  # type: ignore[union-attr]
        if version != self._version:
            self._version, self._latest = version, {}
        return self._latest

    def known(self, conn: Connection, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        """Is ``checkpoint_id`` (of ``thread_id``, ``ns``) one nothing can have waited at?"""
        return self._current(conn).get((thread_id, ns)) == checkpoint_id

    def after(
        self, conn: Connection, wrote: bool, created: tuple[str, str, str] | None, named: tuple[str, str] | None
    ) -> None:
        """A step's transaction ran: ``wrote`` any record (then nothing is known any
        more; ``named``, ``(thread_id, checkpoint_id)`` of a ``put_writes``, stays
        unknown for good), ``created`` ``(thread_id, ns, checkpoint_id)``, a checkpoint
        it put."""
        latest = self._current(conn)
        if wrote:
            latest.clear()
            if named is not None:
                self._tainted.add(named)
                if len(self._tainted) > self.LIMIT:
                    self._blind = True  # never forget a taint: know nothing new instead
        if len(latest) >= self.LIMIT:
            latest.clear()
        if created is not None and not self._blind and (created[0], created[2]) not in self._tainted:
            latest[created[:2]] = created[2]


_ACTIVE = threading.local()


def active_settled() -> Settled | None:
    """The :class:`Settled` of the writer whose transaction this thread runs, or None
    (any other connection: PostgreSQL's, the async twin's pooled ones)."""
    return getattr(_ACTIVE, "settled", None)


@dataclass(slots=True)
class _Job:
    """One write waiting for the writer: its step, and once run, its result or error."""

    op: Op[Any]
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class SqliteWriter:
    """The checkpointer's write transactions on one SQLite database: queued, grouped,
    on one connection.

    LangGraph saves a step's writes and its checkpoint from two threads at once, and
    SQLite lets one writer in: the other would wait in SQLite's busy handler, which
    sleeps 1, 2, 5, 10 ... ms between tries. Here writers queue instead, and whoever
    holds the lock commits everything queued in one transaction (a group commit: one
    fsync for the writes that arrived together, each still whole, none split from its
    records). A group that fails is retried write by write, so one bad write fails
    alone. All of it runs on one held connection: no pool checkout and reset per step.
    Another process's writers (or the store's own calls) still meet the busy timeout.
    """

    def __init__(self, engine: Any) -> None:
        self.lock = threading.Lock()
        self._queued: list[_Job] = []
        self._queue_lock = threading.Lock()
        self.conn: Connection | None = None
        self.settled = Settled()
        event.listen(engine, "engine_disposed", lambda _engine: self.close())

    def run(self, store: Any, op: Op[Any]) -> Any:
        """``op`` on the writer's connection: a write in a (group's) transaction; a read
        of LangGraph's tables outside one, as ``SqliteSaver`` reads (each statement atomic)."""
        if not op.write:
            with self.lock:
                return self._on_connection(store, partial(read_op, op=op))
        job = _Job(op)
        with self._queue_lock:
            self._queued.append(job)
        while not job.done:
            with self.lock:
                if job.done:  # committed by the writer before us
                    break
                with self._queue_lock:
                    group, self._queued = self._queued, []
                try:
                    self._on_connection(store, partial(self._commit, group=group), writes=True)
                except BaseException as exc:
                    for waiting in group:  # nobody is left waiting on a write that never ran
                        if not waiting.done:
                            waiting.error, waiting.done = exc, True
                    if not isinstance(exc, Exception):
                        raise
        if job.error is not None:
            raise job.error
        return job.result


    @staticmethod
    def _commit(conn: Connection, *, group: list[_Job]) -> None:
        def work(c: Connection) -> list[Any]:
            return [job.op.fn(c) for job in group]

        try:
            results = execute.execute(conn, Op(work, write=True))
        except Exception as exc:
            if len(group) == 1 or getattr(exc, "outcome_unknown", False):
                raise  # lost at COMMIT: the group may have committed, so none is retried
            for job in group:  # find the one that failed; the others commit on their own
                try:
                    job.result = execute.execute(conn, job.op)
                except Exception as exc:
                    job.error = exc
                job.done = True
            return
        for job, result in zip(group, results, strict=True):
            job.result, job.done = result, True

    def _on_connection(self, store: Any, fn: Callable[[Connection], Any], writes: bool = False) -> Any:
        conn = self.conn
        if conn is None or conn.closed or conn.invalidated:
            self.settled = Settled()  # what one connection knew is not another's
            with translate_errors():  # connecting fails like any statement
                conn = self.conn = store.engine.connect()
        try:
            with translate_errors():
                store.runner.ensure_schema(conn)
                if not writes:
                    return fn(conn)
                _ACTIVE.settled = self.settled  # this connection's, for the group's steps
                try:
                    return fn(conn)
                finally:
                    _ACTIVE.settled = None
        except BaseException:
            self.conn = None  # a fresh connection next time, whatever this one saw
            conn.close()
            raise

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            self.settled = Settled()


_WRITERS: weakref.WeakKeyDictionary[Any, SqliteWriter] = weakref.WeakKeyDictionary()
_WRITERS_LOCK = threading.Lock()
_ASYNC_QUEUES: weakref.WeakKeyDictionary[Any, dict[Any, asyncio.Lock]] = weakref.WeakKeyDictionary()


def sqlite_writer(engine: Any) -> SqliteWriter:
    """The writer of ``engine``'s database (one per engine, shared by its checkpointers)."""
    with _WRITERS_LOCK:
        writer = _WRITERS.get(engine)
        if writer is None:
            writer = _WRITERS[engine] = SqliteWriter(engine)
        return writer


def async_writer_queue(engine: Any) -> asyncio.Lock:
    """As :class:`SqliteWriter`'s lock, for the coroutines of one event loop.

    Kept per loop (a lock belongs to the loop that first waits on it); a new loop's
    lock is made after the closed loops' are dropped, so a store used from one
    ``asyncio.run`` after another keeps no finished loop alive."""
    loops = _ASYNC_QUEUES.setdefault(engine, {})
    loop = asyncio.get_running_loop()
    lock = loops.get(loop)
    if lock is None:
        with _WRITERS_LOCK:  # loops of other threads may be added meanwhile
            for closed in [old for old in loops if old.is_closed()]:
                del loops[closed]
            lock = loops.setdefault(loop, asyncio.Lock())
    return lock
