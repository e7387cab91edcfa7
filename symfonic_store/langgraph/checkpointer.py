"""``store.checkpointer()``: LangGraph's checkpoints in the store's database, one
transaction per step for the graph's state and the events the step caused.

The checkpoints live in the tables of LangGraph's own savers, written by their SQL and
serialised by their ``JsonPlusSerializer`` (JSON and msgpack; its pickle fallback off):
``SqliteSaver``'s on SQLite (also under the asyncio store, through
``AsyncConnection.run_sync``), ``PostgresSaver``'s and ``AsyncPostgresSaver``'s on
PostgreSQL. Each of those savers is *bound* to one of the store's own connections for
the length of one call: its SQL runs inside a transaction the store opens, on the same
SQLite file or PostgreSQL schema as the event table, so one COMMIT covers both.

What commits with a step (SPEC §8; docs/reliability.md):

- ``put_writes`` (a task's writes): the writes the task's node and router deferred
  into it (the router's ``route.decided``, the node's mint; see
  :mod:`symfonic_store.store.steps`), and what the recording checkpointer records
  from the writes themselves: a mint per ``__interrupt__``, the answer of a
  ``__resume__`` write (a gateway claim confirmed as ``interrupt.resumed``, a direct
  answer recorded ``via: "direct"``, an answer beside ``__error__`` as ``not_taken``).
- ``put`` (a new checkpoint): whatever deferred writes of the thread are still
  waiting (LangGraph may save the step's checkpoint before the task's writes, and with
  ``durability="exit"`` it saves only the last one), and the superseded interrupts of
  the checkpoint it replaces.

Admissions do not wait for a step: ``store.resume`` and the gateway's claim commit
before the graph runs, so two racing answers are decided by the database at once.

The savers lack ``copy_thread`` and ``delete_for_runs`` (and ``prune`` on SQLite);
they are implemented on the same tables (:mod:`symfonic_store.db.checkpoints`). None of
them, nor ``delete_thread``, deletes an event: the audit and replay of a thread outlive
its checkpoints.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from sqlalchemy import event
from sqlalchemy.engine import Connection

from .. import native, validation
from ..db import checkpoints as tables
from ..db.statements import lock_thread_steps
from ..db.translate import translate_errors
from ..errors import InvalidInputError
from ..store import admission, execute
from ..store.plan import Op
from ..store.steps import Step, StepWrites, deferring
from .loopcall import LoopCall
from .recording import moved, needs_saved, observed, saved_answers

if TYPE_CHECKING:
    from ..store import AsyncInterruptStore, InterruptStore

try:  # private; tests/test_langgraph_private.py fails loudly if they move
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINT_MAP as CHECKPOINT_MAP_KEY
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER as CHECKPOINTER_KEY
    from langgraph._internal._constants import CONFIG_KEY_TASK_ID as TASK_ID_KEY
    from langgraph._internal._constants import INTERRUPT
except ImportError:  # pragma: no cover
    CHECKPOINTER_KEY, TASK_ID_KEY = "__pregel_checkpointer", "__pregel_task_id"
    CHECKPOINT_MAP_KEY, INTERRUPT = "checkpoint_map", "__interrupt__"

GRAPH_KEY = "symfonic_graph"
"""The configurable key the gateway names its graph under, for the mints to record."""


def serializer() -> JsonPlusSerializer:
    """LangGraph's JSON-plus serialiser, never falling back to pickle."""
    return JsonPlusSerializer(pickle_fallback=False)


def _await(awaitable: Any) -> Any:
    """Await from the synchronous code ``AsyncConnection.run_sync`` runs (a greenlet)."""
    from sqlalchemy.util import concurrency

    wait = getattr(concurrency, "await_", None) or concurrency.await_only
    return wait(awaitable)


# --- LangGraph's savers, bound to one of the store's connections --------------------


class _SqliteSql(SqliteSaver):
    """``SqliteSaver``'s SQL on the connection it is bound to, in the caller's transaction.

    ``cursor()`` is the one place ``SqliteSaver`` takes its lock, runs ``setup()`` and
    COMMITs; bound, it does none of that: the store opened the transaction and commits it.
    """

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[Any]:
        cur = self.conn.cursor()
        try:
            yield cur
        finally:
            cur.close()


class _AwaitingSqlite:
    """The two calls ``SqliteSaver.setup()`` makes, on aiosqlite from a greenlet."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def executescript(self, script: str) -> Any:
        return _await(self._connection.executescript(script))

    def execute(self, sql: str, *parameters: Any) -> Any:
        return _await(self._connection.execute(sql, *parameters))


def _postgres_classes() -> tuple[type[Any], type[Any]]:
    """PostgresSaver and AsyncPostgresSaver (psycopg loaded on demand).

    Used as they are: bound to the store's connection (``conn``), their ``_cursor`` runs
    their SQL in the store's open transaction (its pipeline, or its ``conn.transaction()``
    savepoint where pipelines are unsupported), under the bound copy's own ``lock``.
    """
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError as exc:  # pragma: no cover - the postgres extra names it
        raise ImportError(
            "store.checkpointer() on PostgreSQL needs langgraph-checkpoint-postgres and "
            "psycopg: pip install 'symfonic-store[postgres]'"
        ) from exc
    return PostgresSaver, AsyncPostgresSaver


class _Sql:
    """LangGraph's saver for the store's backend, bound to a connection call by call.

    Chosen once, when the checkpointer is made: ``SqliteSaver`` on SQLite (the asyncio
    store drives it through ``run_sync``, on SQLAlchemy's greenlet-adapted aiosqlite
    connection), ``PostgresSaver`` on PostgreSQL, ``AsyncPostgresSaver`` under the
    asyncio store (its coroutines awaited from inside ``run_sync``).
    """

    def __init__(self, dialect: str, *, asynchronous: bool) -> None:
        self.serde = serializer()
        self.postgres = dialect == "postgresql"
        self.layout = tables.POSTGRES if self.postgres else tables.SQLITE
        self.awaits = self.postgres and asynchronous
        if self.postgres:
            sync_class, self._async_class = _postgres_classes()
            self._template: Any = sync_class(None, serde=self.serde)
        else:
            self._template = _SqliteSql(None, serde=self.serde)  # type: ignore[arg-type]
            self._template.is_setup = True  # setup() is the store's to call, once
        self._async_template: Any = None

    def bind(self, conn: Connection) -> Any:
        """The saver, on ``conn``'s driver connection.

        One shallow copy per DBAPI connection, kept in its ``info`` (a connection is
        used by one caller at a time, and the copy's only state is that connection).
        """
        info = conn.info
        saver = info.get(self)
        if saver is not None:
            return saver
        if self.awaits:
            if self._async_template is None:
                # AsyncPostgresSaver notes the running loop when made: make it in the loop.
                self._async_template = self._async_class(None, serde=self.serde)
            saver = copy.copy(self._async_template)
            saver.conn = conn.connection.driver_connection
            saver.lock = asyncio.Lock()  # the copy's own: one connection, one lock
        else:
            saver = copy.copy(self._template)
            saver.conn = conn.connection.dbapi_connection
            if self.postgres:
                saver.lock = threading.Lock()
        info[self] = saver
        return saver

    def call(self, conn: Connection, method: str, *args: Any, **kwargs: Any) -> Any:
        """``saver.method(...)`` bound to ``conn`` (``saver.amethod`` awaited, when async)."""
        saver = self.bind(conn)
        if self.awaits:
            return _await(getattr(saver, "a" + method)(*args, **kwargs))
        return getattr(saver, method)(*args, **kwargs)

    def tuples(self, conn: Connection, config: Any, **kwargs: Any) -> list[CheckpointTuple]:
        """Every tuple ``saver.list`` yields, read on the call's connection."""
        saver = self.bind(conn)
        if self.awaits:

            async def collect() -> list[CheckpointTuple]:
                return [t async for t in saver.alist(config, **kwargs)]

            return _await(collect())  # type: ignore[no-any-return]
        return list(saver.list(config, **kwargs))

    def setup(self, conn: Connection) -> None:
        """Create (or migrate) the saver's tables: its own ``setup()``, outside a transaction."""
        if not self.postgres:
            saver = copy.copy(self._template)
            dbapi = conn.connection.dbapi_connection
            driver = conn.connection.driver_connection
            saver.conn = dbapi if driver is dbapi else _AwaitingSqlite(driver)
            saver.is_setup = False
            SqliteSaver.setup(saver)
            return
        pause = 0.01
        while not conn.execute(tables.setup_lock()).scalar_one():
            time.sleep(pause)  # another process is creating the tables (db/checkpoints.py)
            pause = min(pause * 2, 0.5)
        try:
            saver = self.bind(conn)
            if self.awaits:
                _await(saver.setup())
            else:
                saver.setup()
        finally:
            conn.execute(tables.setup_unlock())

    def prune(self, conn: Connection, thread_ids: list[str], strategy: str) -> None:
        """PostgreSQL: the saver's own ``prune``, which runs its own transactions."""
        self.call(conn, "prune", thread_ids, strategy=strategy)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self._template.get_next_version(current, channel)


# --- what a call records ----------------------------------------------------------------


def _thread_id(config: Any) -> str:
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise InvalidInputError(
            'config["configurable"]["thread_id"]',
            'the checkpointer saves per thread; invoke with config={"configurable": {"thread_id": ...}}',
        )
    return str(thread_id)


def _thread_ids(thread_ids: Any) -> list[str]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    return [str(t) for t in thread_ids]


def _strategy(strategy: str) -> str:
    if strategy not in tables.PRUNE_STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    return strategy


def _task_record(
    config: Any, writes: Sequence[tuple[str, Any]], task_id: str, saved: int
) -> tuple[Any, Any]:
    """The writes to save, and what the store records of them (or None)."""
    forwarded, record = observed(config, writes, task_id, saved)
    if record is not None:
        graph = ((config or {}).get("configurable") or {}).get(GRAPH_KEY)
        record["graph"] = None if graph is None else str(graph)
    return forwarded, record


def _waits_of(head: CheckpointTuple | None) -> list[dict[str, Any]]:
    """Records of the interrupts a checkpoint's tasks raised (LangGraph's own, not markers)."""
    if head is None:
        return []
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in head.pending_writes or ():
        if channel == INTERRUPT:
            by_task.setdefault(task_id, []).append((channel, value))
    records = []
    for task_id, writes in by_task.items():
        _, record = observed(head.config, writes, task_id)
        if record is None:
            continue
        record["interrupts"] = [i for i in record["interrupts"] if not native.is_marker_value(i["value"])]
        record["actor"] = None
        if record["interrupts"]:
            records.append(record)
    return records


def _read(conn: Connection, op: Op[Any]) -> Any:
    """A read outside a transaction (each statement atomic), as LangGraph's savers read."""
    try:
        return op.fn(conn)
    finally:
        if conn.in_transaction():  # a statement that went through SQLAlchemy began one
            conn.commit()


@dataclass(slots=True)
class _Job:
    """One write waiting for the writer: its step, and once run, its result or error."""

    op: Op[Any]
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class _SqliteWriter:
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
        event.listen(engine, "engine_disposed", lambda _engine: self.close())

    def run(self, store: Any, op: Op[Any]) -> Any:
        """``op`` on the writer's connection: a write in a (group's) transaction; a read
        of LangGraph's tables outside one, as ``SqliteSaver`` reads (each statement atomic)."""
        if not op.write:
            with self.lock:
                return self._on_connection(store, partial(_read, op=op))
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
                    self._on_connection(store, partial(self._commit, group=group))
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

    def _on_connection(self, store: Any, fn: Callable[[Connection], Any]) -> Any:
        conn = self.conn
        if conn is None or conn.closed or conn.invalidated:
            with translate_errors():  # connecting fails like any statement
                conn = self.conn = store.engine.connect()
        try:
            with translate_errors():
                store.runner.ensure_schema(conn)
                return fn(conn)
        except BaseException:
            self.conn = None  # a fresh connection next time, whatever this one saw
            conn.close()
            raise

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None


_WRITERS: weakref.WeakKeyDictionary[Any, _SqliteWriter] = weakref.WeakKeyDictionary()
_WRITERS_LOCK = threading.Lock()
_ASYNC_QUEUES: weakref.WeakKeyDictionary[Any, dict[Any, asyncio.Lock]] = weakref.WeakKeyDictionary()


def _sqlite_writer(engine: Any) -> _SqliteWriter:
    """The writer of ``engine``'s database (one per engine, shared by its checkpointers)."""
    with _WRITERS_LOCK:
        writer = _WRITERS.get(engine)
        if writer is None:
            writer = _WRITERS[engine] = _SqliteWriter(engine)
        return writer


def _async_writer_queue(engine: Any) -> asyncio.Lock:
    """As :class:`_SqliteWriter`'s lock, for the coroutines of one event loop."""
    loops = _ASYNC_QUEUES.setdefault(engine, {})
    loop = asyncio.get_running_loop()
    lock = loops.get(loop)
    if lock is None:
        lock = loops[loop] = asyncio.Lock()
    return lock


class _Checkpointer(BaseCheckpointSaver[str]):
    """What both twins share: the bound SQL, the deferred writes, the transactions."""

    store: Any

    def __init__(self, store: InterruptStore | AsyncInterruptStore, sql: _Sql) -> None:
        super().__init__(serde=sql.serde)
        self.store = store
        self._sql = sql
        self._steps = StepWrites()
        self._is_setup = False
        self._queue_writers = not sql.postgres

    def defer_writes(self, config: Any) -> AbstractContextManager[None]:
        """Let the store writes made inside commit with this task's step (node, router).

        ``config`` is the task's: its thread, LangGraph task id, namespace and the
        checkpoint its step started from name the step. Outside a LangGraph task
        (``update_state``'s router) the writes run at once.
        """
        configurable = (config or {}).get("configurable") or {}
        thread_id, task_id = configurable.get("thread_id"), configurable.get(TASK_ID_KEY)
        if thread_id is None or task_id is None:
            return nullcontext()
        # The task's namespace is its parent's plus "<node>:<task id>" (NS_SEP "|").
        task_ns = str(configurable.get("checkpoint_ns") or "")
        parent_ns = task_ns.rsplit("|", 1)[0] if "|" in task_ns else ""
        started = (configurable.get(CHECKPOINT_MAP_KEY) or {}).get(parent_ns)
        step = Step(str(thread_id), parent_ns, None if started is None else str(started), str(task_id))
        return deferring(self._steps.sink(step))

    def get_next_version(self, current: str | None, channel: None) -> str:
        return self._sql.get_next_version(current, channel)  # type: ignore[no-any-return]

    def _collect(self, method: str, *args: Any, **kwargs: Any) -> list[Op[Any]]:
        """The write steps of the store's operation ``method``, for this checkpointer's
        transaction: the plan both stores run (its validation included), not run here."""
        return self.store.runner.writes(method, *args, **kwargs)  # type: ignore[no-any-return]

    # --- the operations, as steps for the store's runner ------------------------------

    def _step(
        self,
        sql_work: Callable[[Connection], Any],
        records: list[Op[Any]],
        waiting: tuple[str, Callable[[], list[Op[Any]]]] | None = None,
        flight: list[str] | None = None,
    ) -> Op[Any]:
        """One write transaction: LangGraph's SQL, then the store's writes, one COMMIT.

        ``waiting`` is ``(thread_id, take)``: the deferred writes to commit here are
        taken inside the transaction, once the thread's writers are shut out (SQLite's
        BEGIN IMMEDIATE; on PostgreSQL a transaction lock on the thread id), so that the
        transactions of one thread take and commit them in the same order. When it took
        any, the thread's id is added to ``flight``: the caller hands it to
        :meth:`StepWrites.landed` once the transaction ended, and until then the thread's
        other step transactions wait for this one (the lock), never commit beside it.
        """
        taken: list[Op[Any]] | None = None

        def work(conn: Connection) -> Any:
            nonlocal taken
            if taken is None:  # once: a retried transaction runs the same writes again
                taken = []
                if waiting is not None and self._steps.has(waiting[0]):
                    if self._sql.postgres:
                        # A lock on the thread id, not its projection row: a new thread
                        # has no row yet, and its first steps would take in any order.
                        lock_thread_steps(conn, waiting[0])
                    taken = waiting[1]()
                    if taken and flight is not None:
                        flight.append(waiting[0])
            elif taken and waiting is not None and self._sql.postgres:
                lock_thread_steps(conn, waiting[0])  # a retry holds the same records
            # Taken first: if LangGraph's SQL fails, they go with the transaction.
            result = sql_work(conn)
            for op in (*taken, *records):
                # The read-only check first: most steps leave nothing to close or mint.
                if op.settled is None or not op.settled(conn)[0]:
                    op.fn(conn)
            return result

        return Op(work, write=True)

    def _put(
        self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any, recorded: list[Op[Any]], flight: list[str]
    ) -> Op[Any]:
        thread_id = _thread_id(config)
        ns = str(config["configurable"].get("checkpoint_ns") or "")
        return self._step(
            lambda conn: self._sql.call(conn, "put", config, checkpoint, metadata, new_versions),
            recorded,
            (
                thread_id,
                lambda: self._steps.for_checkpoint(
                    thread_id, ns, config["configurable"].get("checkpoint_id"), str(checkpoint["id"])
                ),
            ),
            flight,
        )

    def _put_writes(
        self, config: Any, forwarded: Any, task_id: str, task_path: str, recorded: list[Op[Any]], flight: list[str]
    ) -> Op[Any]:
        thread_id = _thread_id(config)
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns") or "")
        started = configurable.get("checkpoint_id")
        return self._step(
            lambda conn: self._sql.call(conn, "put_writes", config, forwarded, task_id, task_path),
            recorded,
            (thread_id, lambda: self._steps.for_writes(thread_id, ns, started, task_id)),
            flight,
        )

    def _get_tuple(self, config: Any) -> Op[Any]:
        return Op(lambda conn: self._sql.call(conn, "get_tuple", config), write=False)

    def _list(self, config: Any, kwargs: dict[str, Any]) -> Op[Any]:
        return Op(lambda conn: self._sql.tuples(conn, config, **kwargs), write=False)

    def _delete_thread(self, thread_id: str, recorded: list[Op[Any]]) -> Op[Any]:
        return self._step(lambda conn: self._sql.call(conn, "delete_thread", thread_id), recorded)

    def _copy_thread(self, source: str, target: str) -> Op[Any]:
        layout = self._sql.layout

        def copy_and_record(conn: Connection) -> None:
            tables.copy_thread(conn, layout, source, target)
            # The copy waits on what the source waited on: recorded on the target, as
            # any thread's interrupts are (the source's answers stay the source's).
            head = self._sql.call(conn, "get_tuple", {"configurable": {"thread_id": target, "checkpoint_ns": ""}})
            for record in _waits_of(head):
                admission.record_task_writes(conn, record)

        return self._step(copy_and_record, [])

    def _delete_for_runs(self, run_ids: list[str]) -> Op[Any]:
        layout = self._sql.layout
        return self._step(lambda conn: tables.delete_for_runs(conn, layout, run_ids), [])

    def _prune_sqlite(self, thread_ids: list[str], strategy: str, recorded: list[Op[Any]]) -> list[Op[Any]]:
        """SQLite's prune, as ``PostgresSaver.prune`` does it: ``delete`` in one transaction;
        ``keep_latest`` refuses a thread with a ``DeltaChannel``, then one per thread."""
        layout = self._sql.layout
        if strategy == "delete":
            return [self._step(lambda conn: tables.prune_delete(conn, layout, thread_ids), recorded)]

        def one(thread_id: str) -> Callable[[Connection], None]:
            def prune(conn: Connection) -> None:
                tables.refuse_delta(conn, layout, [thread_id])
                tables.prune_keep_latest(conn, layout, thread_id)

            return prune

        check = Op(lambda conn: tables.refuse_delta(conn, layout, thread_ids), write=False)
        return [check, *(self._step(one(t), []) for t in thread_ids)]


class StoreCheckpointer(_Checkpointer):
    """The checkpointer of an :class:`~symfonic_store.InterruptStore` (``store.checkpointer()``).

    A LangGraph checkpoint saver whose checkpoints live in the store's database, in
    the tables (and with the serialiser) of LangGraph's own SQLite or PostgreSQL saver,
    and whose every step commits together with the events it caused (see the module
    docstring). Its async methods run the sync ones in a worker thread, so a graph
    compiled with it also runs with ``ainvoke``/``astream``.
    """

    def __init__(self, store: InterruptStore) -> None:
        super().__init__(store, _Sql(store.engine.dialect.name, asynchronous=False))

    def _run(self, op: Op[Any]) -> Any:
        self._ready()
        if self._queue_writers:
            return _sqlite_writer(self.store.engine).run(self.store, op)
        if op.write:
            return self.store.runner.run(op)
        # PostgreSQL reads of LangGraph's tables: one statement each, outside a
        # transaction, as PostgresSaver reads (no BEGIN and COMMIT round trips).
        with translate_errors(), self.store.engine.connect() as conn:
            return _read(conn.execution_options(isolation_level="AUTOCOMMIT"), op)

    def setup(self) -> None:
        """Create LangGraph's checkpoint tables in the store's database (idempotent).

        The first call of any other method runs it too. The store itself must be set up
        (``store.setup()``) first.
        """
        with translate_errors(), self.store.engine.connect() as conn:
            if self._sql.postgres:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            self._sql.setup(conn)
        self._is_setup = True

    def _ready(self) -> None:
        if not self._is_setup:
            self.setup()

    # --- the saver's methods ------------------------------------------------------

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        return self._run(self._get_tuple(config))  # type: ignore[no-any-return]

    def list(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        kwargs = {"filter": filter, "before": before, "limit": limit}
        yield from self._run(self._list(config, kwargs))

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        recorded = []
        args = moved(config, metadata)
        if args is not None:
            t, c, ns, source, actor = args
            recorded = self._collect("record_checkpoint_moved", t, c, ns, source=source, actor=actor)
        flight: list[str] = []
        try:
            return self._run(self._put(config, checkpoint, metadata, new_versions, recorded, flight))
        finally:
            self._steps.landed(flight)

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        saved = saved_answers(self.get_tuple(config), task_id) if needs_saved(writes) else 0
        forwarded, record = _task_record(config, writes, task_id, saved)
        recorded = [] if record is None else self._collect("record_task_writes", record)
        flight: list[str] = []
        try:
            self._run(self._put_writes(config, forwarded, task_id, task_path, recorded, flight))
        finally:
            self._steps.landed(flight)

    def delete_thread(self, thread_id: str) -> None:
        t = str(thread_id)
        self._run(self._delete_thread(t, self._collect("record_waiting", t, [])))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        target = validation.required_id(str(target_thread_id), "target_thread_id")
        self._run(self._copy_thread(str(source_thread_id), target))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        ids = _thread_ids(run_ids)
        if ids:
            self._run(self._delete_for_runs(ids))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        ids, how = _thread_ids(thread_ids), _strategy(strategy)
        if not ids:
            return
        # Deleted, a thread waits on nothing: its open interrupts are closed (superseded).
        recorded = [op for t in ids for op in self._collect("record_waiting", t, [])] if how == "delete" else []
        if not self._sql.postgres:
            for op in self._prune_sqlite(ids, how, recorded):
                self._run(op)
            return
        self._ready()
        with translate_errors(), self.store.engine.connect() as conn:
            self._sql.prune(conn.execution_options(isolation_level="AUTOCOMMIT"), ids, how)
        if recorded:
            self._run(self._step(lambda conn: None, recorded))

    # --- async: the sync methods in a worker thread -------------------------------

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        kwargs = {"filter": filter, "before": before, "limit": limit}
        for item in await asyncio.to_thread(lambda: list(self.list(config, **kwargs))):
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))


_SYNC_REFUSED = (
    "this checkpointer belongs to an AsyncInterruptStore: on its event loop's thread use "
    "the async API (ainvoke/astream/aget_state); sync calls are served from other threads "
    "while that loop runs, or use InterruptStore(...).checkpointer()"
)


class AsyncStoreCheckpointer(_Checkpointer):
    """The checkpointer of an :class:`~symfonic_store.AsyncInterruptStore`.

    The async twin of :class:`StoreCheckpointer`: the same tables, serialiser and
    transactions, through the store's asyncio engine. Its sync methods, as those of
    LangGraph's async savers, run the async ones on the event loop the store runs on
    when called from another thread (a sync node calling ``subgraph.invoke()``,
    ``asyncio.to_thread(graph.get_state, ...)``), and refuse on that loop's own thread.
    """

    def __init__(self, store: AsyncInterruptStore) -> None:
        super().__init__(store, _Sql(store.engine.dialect.name, asynchronous=True))
        self._loop = LoopCall(_SYNC_REFUSED)

    async def _run(self, op: Op[Any]) -> Any:
        await self._ready()
        if not op.write:
            # Reads of LangGraph's tables, outside a transaction as its savers read.
            with translate_errors():
                async with self.store.engine.connect() as aconn:
                    if self._sql.postgres:
                        aconn = await aconn.execution_options(isolation_level="AUTOCOMMIT")
                    return await aconn.run_sync(_read, op)
        if not self._queue_writers:
            return await self.store.runner.run(op)
        async with _async_writer_queue(self.store.engine.sync_engine):
            return await self.store.runner.run(op)

    async def setup(self) -> None:
        """Create LangGraph's checkpoint tables in the store's database (idempotent).

        The first call of any other method runs it too. The store itself must be set up
        (``await store.setup()``) first.
        """
        with translate_errors():
            async with self.store.engine.connect() as aconn:
                if self._sql.postgres:
                    aconn = await aconn.execution_options(isolation_level="AUTOCOMMIT")
                await aconn.run_sync(self._sql.setup)
        self._is_setup = True

    async def _ready(self) -> None:
        self._loop.note()
        if not self._is_setup:
            await self.setup()

    # --- the saver's methods ------------------------------------------------------

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        return await self._run(self._get_tuple(config))  # type: ignore[no-any-return]

    async def alist(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        kwargs = {"filter": filter, "before": before, "limit": limit}
        for item in await self._run(self._list(config, kwargs)):
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        recorded = []
        args = moved(config, metadata)
        if args is not None:
            t, c, ns, source, actor = args
            recorded = self._collect("record_checkpoint_moved", t, c, ns, source=source, actor=actor)
        flight: list[str] = []
        try:
            return await self._run(self._put(config, checkpoint, metadata, new_versions, recorded, flight))
        finally:
            self._steps.landed(flight)

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        saved = 0
        if needs_saved(writes):
            saved = saved_answers(await self.aget_tuple(config), task_id)
        forwarded, record = _task_record(config, writes, task_id, saved)
        recorded = [] if record is None else self._collect("record_task_writes", record)
        flight: list[str] = []
        try:
            await self._run(self._put_writes(config, forwarded, task_id, task_path, recorded, flight))
        finally:
            self._steps.landed(flight)

    async def adelete_thread(self, thread_id: str) -> None:
        t = str(thread_id)
        await self._run(self._delete_thread(t, self._collect("record_waiting", t, [])))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        target = validation.required_id(str(target_thread_id), "target_thread_id")
        await self._run(self._copy_thread(str(source_thread_id), target))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        ids = _thread_ids(run_ids)
        if ids:
            await self._run(self._delete_for_runs(ids))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        ids, how = _thread_ids(thread_ids), _strategy(strategy)
        if not ids:
            return
        recorded = []
        if how == "delete":
            for t in ids:
                recorded += self._collect("record_waiting", t, [])
        if not self._sql.postgres:
            for op in self._prune_sqlite(ids, how, recorded):
                await self._run(op)
            return
        await self._ready()
        with translate_errors():
            async with self.store.engine.connect() as aconn:
                aconn = await aconn.execution_options(isolation_level="AUTOCOMMIT")
                await aconn.run_sync(self._sql.prune, ids, how)
        if recorded:
            await self._run(self._step(lambda conn: None, recorded))

    # --- sync: the async methods on the store's loop, from another thread --------

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        return self._loop.run(lambda: self.aget_tuple(config))  # type: ignore[no-any-return]

    def list(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._loop.run(collect)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self._loop.run(lambda: self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._loop.run(lambda: self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._loop.run(lambda: self.adelete_thread(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._loop.run(lambda: self.acopy_thread(source_thread_id, target_thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._loop.run(lambda: self.adelete_for_runs(run_ids))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._loop.run(lambda: self.aprune(thread_ids, strategy=strategy))


def checkpointer_for(store: InterruptStore | AsyncInterruptStore) -> StoreCheckpointer | AsyncStoreCheckpointer:
    """The twin for ``store``'s kind."""
    from ..store import AsyncInterruptStore

    if isinstance(store, AsyncInterruptStore):
        return AsyncStoreCheckpointer(store)
    return StoreCheckpointer(store)


def is_own(store: Any, saver: Any) -> bool:
    """Is ``saver`` a checkpointer of ``store`` (``store.checkpointer()``)?"""
    return isinstance(saver, _Checkpointer) and saver.store is store


def own_checkpointer(store: Any, config: Any) -> Any:
    """The running task's checkpointer when it is ``store``'s own, else None."""
    saver = ((config or {}).get("configurable") or {}).get(CHECKPOINTER_KEY)
    return saver if is_own(store, saver) else None


__all__ = [
    "AsyncStoreCheckpointer",
    "StoreCheckpointer",
    "checkpointer_for",
    "is_own",
    "own_checkpointer",
    "serializer",
]
