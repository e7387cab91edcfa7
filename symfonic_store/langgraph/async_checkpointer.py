"""``AsyncStoreCheckpointer``: the checkpointer of an asyncio store (``store.checkpointer()``).

The async twin of :class:`~symfonic_store.langgraph.checkpointer.StoreCheckpointer`: the
same steps (:mod:`.saver_steps`), run through the store's asyncio runner; see
:mod:`symfonic_store.langgraph.checkpointer` for what commits with a step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import CheckpointTuple

from .. import validation
from ..db.backends import backend_of
from ..db.translate import translate_errors
from ..store.plan import Op
from .loopcall import LoopCall
from .recording import moved, needs_saved, saved_answers
from .saver_sql import SaverSql
from .saver_steps import (
    BaseStoreCheckpointer,
    prune_strategy,
    task_record,
    thread_id_list,
)
from .saver_writer import async_writer_queue, read_op
from .served_records import update_closing

if TYPE_CHECKING:
    from ..store import AsyncInterruptStore


_SYNC_REFUSED = (
    "this checkpointer belongs to an AsyncInterruptStore: on its event loop's thread use "
    "the async API (ainvoke/astream/aget_state); sync calls are served from other threads "
    "while that loop runs, or use InterruptStore(...).checkpointer()"
)


class AsyncStoreCheckpointer(BaseStoreCheckpointer):
    """The checkpointer of an :class:`~symfonic_store.AsyncInterruptStore`.

    The async twin of :class:`StoreCheckpointer`: the same tables, serialiser and
    transactions, through the store's asyncio engine. Its sync methods, as those of
    LangGraph's async savers, run the async ones on the event loop the store runs on
    when called from another thread (a sync node calling ``subgraph.invoke()``,
    ``asyncio.to_thread(graph.get_state, ...)``), and refuse on that loop's own thread.
    """

    def __init__(self, store: AsyncInterruptStore) -> None:
        super().__init__(store, SaverSql(backend_of(store.engine), asynchronous=True))
        self._loop = LoopCall(_SYNC_REFUSED)

    async def _run(self, op: Op[Any]) -> Any:
        await self._ready()
        if not op.write:
            # Reads of LangGraph's tables, outside a transaction as its savers read.
            with translate_errors():
                async with self.store.engine.connect() as aconn:
                    if self._sql.backend.checkpoint_reads_autocommit:
                        aconn = await aconn.execution_options(isolation_level="AUTOCOMMIT")
                    return await aconn.run_sync(read_op, op)
        if not self._queue_writers:
            return await self.store.runner.run(op)
        async with async_writer_queue(self.store.engine.sync_engine):
            return await self.store.runner.run(op)

    async def setup(self) -> None:
        """Create LangGraph's checkpoint tables in the store's database (idempotent).

        The first call of any other method runs it too. The store itself must be set up
        (``await store.setup()``) first.
        """
        with translate_errors():
            async with self.store.engine.connect() as aconn:
                if self._sql.backend.checkpoint_setup_autocommit:
                    aconn = await aconn.execution_options(isolation_level="AUTOCOMMIT")
                await aconn.run_sync(self._sql.setup)
        self._is_setup = True

    async def _ready(self) -> None:
        self._loop.note()
        if not self._is_setup:
            await self.setup()

    # --- the saver's methods ------------------------------------------------------
    # Deliberately the twin of StoreCheckpointer's: the same steps (saver_steps.py), each
    # awaited here; LangGraph's savers have the one shape per kind of caller as well.

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
            t, c, ns, source, actor, identity = args
            recorded = self._collect(
                "record_checkpoint_moved", t, c, ns, source=source, actor=actor, identity=identity,
                **update_closing(metadata, checkpoint, new_versions),
            )
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
        forwarded, record = task_record(config, writes, task_id, saved)
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
        ids = thread_id_list(run_ids)
        if ids:
            await self._run(self._delete_for_runs(ids))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        ids, how = thread_id_list(thread_ids), prune_strategy(strategy)
        if not ids:
            return
        recorded = []
        if how == "delete":
            for t in ids:
                recorded += self._collect("record_waiting", t, [])
        if not self._sql.backend.checkpoint_saver_prunes:
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

    # Deliberately repeated: LangGraph's saver interface, the signatures of alist() and of
    # StoreCheckpointer's.
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
