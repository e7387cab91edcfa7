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

On PostgreSQL a step is one pipelined transaction: a ``put`` or ``put_writes`` with
nothing deferred sends its BEGIN, the writers' lock, LangGraph's statements and the
COMMIT together, one round trip as ``PostgresSaver``'s own. A ``put`` asks what the
thread waited on at the checkpoint it replaces in the same trip, as a statement that
fails the transaction when the answer is yes; the step then runs again with its records.
A step that carries events takes three (the lock of the thread's steps; LangGraph's
statements with the thread's head; the events with the COMMIT).

The savers lack ``copy_thread`` and ``delete_for_runs`` (and ``prune`` on SQLite);
they are implemented on the same tables (:mod:`symfonic_store.db.checkpoints`). None of
them, nor ``delete_thread``, deletes an event: the audit and replay of a thread outlive
its checkpoints.

The checkpointer is five modules: :mod:`.saver_sql` (LangGraph's saver for the backend,
bound to a store connection: the SQL of its tables), :mod:`.saver_steps` (what the twins
share: each call as one store ``Op``, with the step's deferred writes and records),
:mod:`.saver_writer` (SQLite's queued group commits), this one (the sync saver, and the
twin for a store) and :mod:`.async_checkpointer` (the async saver). They reach the store
through its integration port, ``store.runner`` (:mod:`symfonic_store.store.runner`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from langgraph.checkpoint.base import CheckpointTuple

from .. import validation
from ..db.backends import backend_of
from ..db.translate import translate_errors
from ..errors import DatabaseError
from ..store.plan import Op
from ..store.runner import is_async_store
from .async_checkpointer import AsyncStoreCheckpointer
from .recording import moved, needs_saved, saved_answers
from .saver_sql import SaverSql, serializer
from .saver_steps import (
    CHECKPOINTER_KEY,
    GRAPH_KEY,
    BaseStoreCheckpointer,
    prune_strategy,
    task_record,
    thread_id_list,
    waited,
)
from .saver_writer import read_op, sqlite_writer
from .served_records import update_closing

if TYPE_CHECKING:
    from ..store import AsyncInterruptStore, InterruptStore


class StoreCheckpointer(BaseStoreCheckpointer):
    """The checkpointer of an :class:`~symfonic_store.InterruptStore` (``store.checkpointer()``).

    A LangGraph checkpoint saver whose checkpoints live in the store's database, in
    the tables (and with the serialiser) of LangGraph's own SQLite or PostgreSQL saver,
    and whose every step commits together with the events it caused (see the module
    docstring). Its async methods run the sync ones in a worker thread, so a graph
    compiled with it also runs with ``ainvoke``/``astream``.
    """

    def __init__(self, store: InterruptStore) -> None:
        super().__init__(store, SaverSql(backend_of(store.engine), asynchronous=False))

    def _run(self, op: Op[Any]) -> Any:
        self._ready()
        if self._queue_writers:
            return sqlite_writer(self.store.engine).run(self.store, op)
        if op.write:
            return self.store.runner.run(op)
        # PostgreSQL reads of LangGraph's tables: one statement each, outside a
        # transaction, as PostgresSaver reads (no BEGIN and COMMIT round trips).
        with translate_errors(), self.store.engine.connect() as conn:
            return read_op(conn.execution_options(isolation_level="AUTOCOMMIT"), op)

    def setup(self) -> None:
        """Create LangGraph's checkpoint tables in the store's database (idempotent).

        The first call of any other method runs it too. The store itself must be set up
        (``store.setup()``) first.
        """
        with translate_errors(), self.store.engine.connect() as conn:
            if self._sql.backend.checkpoint_setup_autocommit:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            self._sql.setup(conn)
        self._is_setup = True

    def _ready(self) -> None:
        if not self._is_setup:
            self.setup()

    # --- the saver's methods ------------------------------------------------------

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        return self._run(self._get_tuple(config))  # type: ignore[no-any-return]

    # Deliberately repeated: LangGraph's saver interface, the signatures of alist() here and in
    # AsyncStoreCheckpointer.
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
        replaced = None
        args = moved(config, metadata)
        if args is not None:
            t, c, ns, source, actor, identity = args
            recorded = self._collect(
                "record_checkpoint_moved", t, c, ns, source=source, actor=actor, identity=identity,
                **update_closing(metadata, checkpoint, new_versions),
            )
            replaced = (t, c)
        flight: list[str] = []
        try:
            try:
                return self._run(self._put(config, checkpoint, metadata, new_versions, recorded, flight, replaced))
            except DatabaseError as exc:
                if not waited(exc, self._sql.backend):
                    raise
            # The thread waited at the checkpoint replaced: the step again, with its records.
            return self._run(self._put(config, checkpoint, metadata, new_versions, recorded, flight))
        finally:
            self._steps.landed(flight)

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        saved = saved_answers(self.get_tuple(config), task_id) if needs_saved(writes) else 0
        forwarded, record = task_record(config, writes, task_id, saved)
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
        ids = thread_id_list(run_ids)
        if ids:
            self._run(self._delete_for_runs(ids))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        ids, how = thread_id_list(thread_ids), prune_strategy(strategy)
        if not ids:
            return
        # Deleted, a thread waits on nothing: its open interrupts are closed (superseded).
        recorded = [op for t in ids for op in self._collect("record_waiting", t, [])] if how == "delete" else []
        if not self._sql.backend.checkpoint_saver_prunes:
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

    # Deliberately repeated: LangGraph's saver interface, the signatures of AsyncStoreCheckpointer's
    # and list()'s.
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


def checkpointer_for(store: InterruptStore | AsyncInterruptStore) -> StoreCheckpointer | AsyncStoreCheckpointer:
    """The twin for ``store``'s kind."""
    if is_async_store(store):
        return AsyncStoreCheckpointer(cast("AsyncInterruptStore", store))
    return StoreCheckpointer(cast("InterruptStore", store))


def is_own(store: Any, saver: Any) -> bool:
    """Is ``saver`` a checkpointer of ``store`` (``store.checkpointer()``)?"""
    return isinstance(saver, BaseStoreCheckpointer) and saver.store is store


def own_checkpointer(store: Any, config: Any) -> Any:
    """The running task's checkpointer when it is ``store``'s own, else None."""
    saver = ((config or {}).get("configurable") or {}).get(CHECKPOINTER_KEY)
    return saver if is_own(store, saver) else None


__all__ = [
    "GRAPH_KEY",
    "AsyncStoreCheckpointer",
    "StoreCheckpointer",
    "checkpointer_for",
    "is_own",
    "own_checkpointer",
    "serializer",
]
