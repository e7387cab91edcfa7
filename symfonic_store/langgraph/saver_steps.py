"""What both checkpointer twins share: a step's writes and the store's records, one COMMIT.

:class:`BaseStoreCheckpointer` builds each saver call as one store :class:`~symfonic_store.store.plan.Op`:
LangGraph's SQL (:mod:`.saver_sql`), the writes the task's node and router deferred into
its step (:class:`~symfonic_store.store.steps.StepWrites`) and what the recording
checkpointer records of them, in one write transaction. The twins
(:mod:`.checkpointer`, :mod:`.async_checkpointer`) only run those steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from sqlalchemy.engine import Connection

from .. import native
from ..compat import CONFIG_KEY_CHECKPOINT_MAP as CHECKPOINT_MAP_KEY
from ..compat import CONFIG_KEY_CHECKPOINTER as CHECKPOINTER_KEY
from ..compat import CONFIG_KEY_TASK_ID as TASK_ID_KEY
from ..compat import INTERRUPT, NS_SEP
from ..db import checkpoints as tables
from ..db.executor import state_of
from ..db.statements.native import WAITED_SQLSTATE, fail_if_waited
from ..errors import DatabaseError, InvalidInputError
from ..store import admission, lifecycle
from ..store.plan import Op
from ..store.steps import Step, StepWrites, deferring
from . import served_records as served
from .recording import observed
from .saver_sql import SaverSql
from .saver_writer import active_settled

if TYPE_CHECKING:
    from ..db.backends.base import Backend
    from ..store import AsyncInterruptStore, InterruptStore


GRAPH_KEY = "symfonic_graph"
"""The configurable key the gateway names its graph under, for the mints to record."""


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


def thread_id_list(thread_ids: Any) -> list[str]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    return [str(t) for t in thread_ids]


def prune_strategy(strategy: str) -> str:
    if strategy not in tables.PRUNE_STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    return strategy


def task_record(
    config: Any, writes: Sequence[tuple[str, Any]], task_id: str, saved: int
) -> tuple[Any, Any]:
    """The writes to save, and what the store records of them (or None)."""
    forwarded, record = observed(config, writes, task_id, saved)
    if record is not None:
        configurable = (config or {}).get("configurable") or {}
        # A graph the Agent Server runs names itself by its graph id (SPEC §13).
        graph = configurable.get(GRAPH_KEY) or configurable.get(served.GRAPH_ID_KEY)
        record["graph"] = None if graph is None else str(graph)
        record["served"] = served.served_ids(configurable)
    return forwarded, record


_NEVER_WAIT = frozenset({
    lifecycle.mint, lifecycle.record_router_decision, lifecycle.resume, admission.record_checkpoint_moved,
})
"""Store writes that never make a thread wait at a checkpoint: the marker protocol's (its
mints are not LangGraph's interrupts) and what a new checkpoint closes. Any other write may
(a LangGraph interrupt's mint names its checkpoint)."""


def _may_wait(op: Op[Any]) -> bool:
    return getattr(op.fn, "func", op.fn) not in _NEVER_WAIT


def _id_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


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



def waited(exc: BaseException, backend: Backend) -> bool:
    """Did a step's transaction fail on :func:`fail_if_waited` (run it again in full)?
    Read from the driver's error code (the store's error keeps the driver's as its cause)."""
    if not isinstance(exc, DatabaseError) or exc.outcome_unknown:
        return False
    orig = getattr(exc.__cause__, "orig", None)
    code = backend.driver_code(orig) if orig is not None else None
    return code is not None and code.code == WAITED_SQLSTATE


class BaseStoreCheckpointer(BaseCheckpointSaver[str]):
    """What both twins share: the bound SQL, the deferred writes, the transactions."""

    store: Any

    def __init__(self, store: InterruptStore | AsyncInterruptStore, sql: SaverSql) -> None:
        super().__init__(serde=sql.serde)
        self.store = store
        self._sql = sql
        self._steps = StepWrites()
        self._is_setup = False
        self._queue_writers = sql.backend.single_writer

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
        parent_ns = task_ns.rsplit(NS_SEP, 1)[0] if NS_SEP in task_ns else ""
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
        replaced: tuple[str, str] | None = None,
        step: tuple[str, str, str | None, str | None] | None = None,
    ) -> Op[Any]:
        """One write transaction: LangGraph's SQL, then the store's writes, one COMMIT.

        ``waiting`` is ``(thread_id, take)``: the deferred writes to commit here are
        taken inside the transaction, once the thread's writers are shut out (SQLite's
        BEGIN IMMEDIATE; on PostgreSQL a transaction lock on the thread id), so that the
        transactions of one thread take and commit them in the same order. When it took
        any, the thread's id is added to ``flight``: the caller hands it to
        :meth:`StepWrites.landed` once the transaction ended, and until then the thread's
        other step transactions wait for this one (the lock), never commit beside it.

        ``replaced`` is ``(thread_id, checkpoint_id)`` when ``records`` are what a new
        checkpoint records of the one it replaces (``record_checkpoint_moved``). In a
        pipelined transaction (PostgreSQL's) that takes no deferred writes their
        read-only check becomes :func:`fail_if_waited`, sent with the COMMIT: the step
        is one round trip, and when the thread did wait there the transaction fails
        with :func:`waited` and the caller runs it again without ``replaced``.

        ``step`` is ``(thread_id, ns, replaced checkpoint id, new checkpoint id)`` of a
        ``put`` (the new id None for ``put_writes``): on the SQLite writer's connection a
        replaced checkpoint nothing can have waited at (:class:`.saver_writer.Settled`)
        skips ``records``' check read, and a new one is remembered as such. Any other
        step, or one that wrote a record, forgets what was known.
        """
        taken: list[Op[Any]] | None = None

        def work(conn: Connection) -> Any:
            nonlocal taken
            if taken is None:  # once: a retried transaction runs the same writes again
                taken = []
                if waiting is not None and self._steps.has(waiting[0]):
                    # A lock on the thread id, not its projection row: a new thread has
                    # no row yet, and its first steps would take in any order (the
                    # backend's: SQLite's writers take turns already).
                    self._sql.backend.lock_thread_steps(conn, waiting[0])
                    taken = waiting[1]()
                    if taken and flight is not None:
                        flight.append(waiting[0])
            elif taken and waiting is not None:
                self._sql.backend.lock_thread_steps(conn, waiting[0])  # a retry holds the same records
            # Taken first: if LangGraph's SQL fails, they go with the transaction.
            result = sql_work(conn)
            if replaced is not None and not taken and state_of(conn).pipeline is not None:
                # Nothing is read: the records' check fails the transaction instead.
                thread_id, checkpoint_id = replaced
                fail_if_waited(conn, thread_id, checkpoint_id, native.BREAKPOINT_PREFIX + checkpoint_id)
                return result
            settled = active_settled()
            pending = records
            if (settled is not None and step is not None and step[2] is not None and step[3] is not None
                    and not any(_may_wait(op) for op in taken) and settled.known(conn, step[0], step[1], step[2])):
                pending = []  # a checkpoint this writer made, nothing committed since: no waits there
            wrote = step is None
            for op in (*taken, *pending):
                # The read-only check first: most steps leave nothing to close or mint.
                if op.settled is None or not op.settled(conn)[0]:
                    op.fn(conn)
                    wrote = wrote or _may_wait(op)
            if settled is not None:
                made = None if step is None or step[3] is None else (step[0], step[1], step[3])
                named = None if step is None or step[3] is not None or step[2] is None else (step[0], step[2])
                settled.after(conn, wrote, made, named)
            return result

        return Op(work, write=True)

    def _put(
        self,
        config: Any,
        checkpoint: Any,
        metadata: Any,
        new_versions: Any,
        recorded: list[Op[Any]],
        flight: list[str],
        replaced: tuple[str, str] | None = None,
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
            replaced if recorded else None,
            (thread_id, ns, _id_or_none(config["configurable"].get("checkpoint_id")), str(checkpoint["id"])),
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
            step=(thread_id, ns, _id_or_none(started), None),
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


__all__ = ["CHECKPOINTER_KEY", "GRAPH_KEY"]
