"""``store.recording_checkpointer(saver)``: nothing a graph does stays out of the audit.

A checkpointer that delegates every call to ``saver`` and watches two of them:

- ``put_writes``: LangGraph saves a task's interrupts (the ``__interrupt__`` write) and
  the answers it handed the task (the ``__resume__`` write) there. An interrupt write
  is a mint; an answer write with the task's other writes is an answer LangGraph
  consumed; an answer write beside the task's error that holds a new answer (one more
  than LangGraph had saved for the task) is an answer the node raised on: recorded
  ``not_taken`` and taken back from the write, so that the next answer, not this one, is
  what the task receives. An answer LangGraph refused before saving it (a
  ``response_schema`` mismatch) is not in the write: the write is saved as it is.
- ``put``: a new checkpoint after checkpoint C means LangGraph no longer waits on what
  it waited on at C: those interrupts are closed as superseded.

Whoever invoked the graph, the store records it: the actor is the one
:func:`~.actor.actor_of` names (the Agent Server's authenticated user, else
``config["configurable"]["actor"]`` when given), and such answers carry
``via: "direct"``. An answer the gateway claimed is confirmed as the gateway's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..compat import ERROR as _ERROR
from ..compat import INTERRUPT as _INTERRUPT
from ..compat import RESUME as _RESUME
from ..store.runner import is_async_store
from .actor import actor_of, tenant_of
from .loopcall import LoopCall
from .served_records import update_closing

if TYPE_CHECKING:
    from ..store import AsyncInterruptStore, InterruptStore



def needs_saved(writes: Sequence[tuple[str, Any]]) -> bool:
    """Does ``observed`` need the task's saved answers (an answer write beside an error)?"""
    channels = {w[0] for w in writes}
    return _ERROR in channels and _RESUME in channels


def saved_answers(checkpoint: Any, task_id: str) -> int:
    """How many answers LangGraph had saved for ``task_id`` at ``checkpoint`` (a tuple)."""
    for write in getattr(checkpoint, "pending_writes", None) or ():
        if write[0] == task_id and write[1] == _RESUME:
            return len(write[2]) if isinstance(write[2], list) else 1
    return 0


def observed(
    config: Any, writes: Sequence[tuple[str, Any]], task_id: str, saved: int = 0
) -> tuple[list[tuple[str, Any]], dict[str, Any] | None]:
    """The writes to forward to the saver, and what the store should record (or None).

    ``saved`` is :func:`saved_answers` of the checkpoint the writes belong to, read by
    the caller when :func:`needs_saved`: beside an error, only answers past those are
    new, and only a new answer is one the task failed on.
    """
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    channels = {w[0] for w in writes}
    if thread_id is None or not channels & {_INTERRUPT, _RESUME}:
        return list(writes), None
    interrupts: list[dict[str, Any]] = []
    answer: Any = None
    answered = False
    forwarded: list[tuple[str, Any]] = []
    who = actor_of(config)
    failed = _ERROR in channels
    error = next((w[1] for w in writes if w[0] == _ERROR), None)
    for channel, value in writes:
        if channel == _INTERRUPT:
            for iv in value if isinstance(value, list | tuple) else (value,):
                if getattr(iv, "id", None) is None:
                    continue  # not LangGraph's Interrupt: nothing the graph would wait on
                interrupts.append({"interrupt_id": iv.id, "value": getattr(iv, "value", None)})
        elif channel == _RESUME:
            answers = list(value) if isinstance(value, list) else [value]
            if failed:
                if len(answers) > saved:
                    # The node raised on a new answer: take it back, keep what LangGraph
                    # had saved, or LangGraph would hand it to the task again.
                    answered, answer = True, answers[-1]
                    forwarded.append((channel, answers[:saved]))
                    continue
                # No new answer was saved (LangGraph refused it first): saved as it is.
            elif answers:
                answered, answer = True, answers[-1]
        forwarded.append((channel, value))
    record = {
        "thread_id": str(thread_id),
        "task_id": task_id,
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "actor": who.name,
        "identity": who.data(),  # authenticated_by, claimed_actor: into the events' data
        "tenant": tenant_of(config),  # the mints' tenant (SPEC §15): beside, not in, the data
        "interrupts": interrupts,
        "answered": answered,
        "answer": answer,
        "error": None if not failed else f"{type(error).__name__}: {error}"[:500],
    }
    return forwarded, record


def moved(config: Any, metadata: Any) -> tuple[str, str, str, str | None, str | None, dict[str, str]] | None:
    """``record_checkpoint_moved`` arguments for a new checkpoint after ``config``'s, or None.

    ``(thread_id, checkpoint_id, checkpoint_ns, source, actor, identity)``: the checkpoint
    the new one replaces, the metadata's ``source``, the call's actor and how it was
    established (``authenticated_by``, ``claimed_actor``: :func:`.actor.actor_of`).
    """
    configurable = (config or {}).get("configurable") or {}
    thread_id, checkpoint_id = configurable.get("thread_id"), configurable.get("checkpoint_id")
    if thread_id is None or checkpoint_id is None:
        return None
    who = actor_of(config)
    source = (metadata or {}).get("source")
    return (
        str(thread_id),
        str(checkpoint_id),
        str(configurable.get("checkpoint_ns") or ""),
        None if source is None else str(source),
        who.name,
        who.data(),
    )


class RecordingCheckpointer(BaseCheckpointSaver[Any]):
    """A checkpointer that delegates to ``saver`` and records interrupts and answers."""

    def __init__(
        self, saver: BaseCheckpointSaver[Any], store: InterruptStore | AsyncInterruptStore
    ) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver
        self.store = store
        self._async_store = is_async_store(store)
        self._loop = LoopCall(
            "this recording checkpointer records into an AsyncInterruptStore: on its event "
            "loop's thread run the graph with ainvoke()/astream(); sync calls are served "
            "from other threads while that loop runs, or record into an InterruptStore"
        )

    def _call(self, method: str, *args: Any, **kwargs: Any) -> None:
        if self._async_store:
            # As LangGraph's async savers: on the store's loop, from another thread.
            self._loop.run(lambda: getattr(self.store, method)(*args, **kwargs))
            return
        getattr(self.store, method)(*args, **kwargs)

    async def _acall(self, method: str, *args: Any, **kwargs: Any) -> None:
        import asyncio

        if self._async_store:
            self._loop.note()
            await getattr(self.store, method)(*args, **kwargs)
        else:
            await asyncio.to_thread(getattr(self.store, method), *args, **kwargs)

    @property
    def config_specs(self) -> Any:
        return self.saver.config_specs

    # --- what the store records ------------------------------------------------------

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        saved = self.saver.put(config, checkpoint, metadata, new_versions)
        moved_from = moved(config, metadata)
        if moved_from is not None:
            t, c, ns, source, actor, identity = moved_from
            closing = update_closing(metadata, checkpoint, new_versions)
            self._call(
                "record_checkpoint_moved", t, c, ns, source=source, actor=actor, identity=identity, **closing
            )
        return saved

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        saved = await self.saver.aput(config, checkpoint, metadata, new_versions)
        moved_from = moved(config, metadata)
        if moved_from is not None:
            t, c, ns, source, actor, identity = moved_from
            closing = update_closing(metadata, checkpoint, new_versions)
            await self._acall(
                "record_checkpoint_moved", t, c, ns, source=source, actor=actor, identity=identity, **closing
            )
        return saved

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        saved = saved_answers(self.saver.get_tuple(config), task_id) if needs_saved(writes) else 0
        forwarded, record = observed(config, writes, task_id, saved)
        self.saver.put_writes(config, forwarded, task_id, task_path)
        if record is not None:
            self._call("record_task_writes", record)

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        saved = 0
        if needs_saved(writes):
            saved = saved_answers(await self.saver.aget_tuple(config), task_id)
        forwarded, record = observed(config, writes, task_id, saved)
        await self.saver.aput_writes(config, forwarded, task_id, task_path)
        if record is not None:
            await self._acall("record_task_writes", record)

    # --- everything else: the saver's own ----------------------------------------------

    def get_tuple(self, config: Any) -> Any:
        return self.saver.get_tuple(config)

    async def aget_tuple(self, config: Any) -> Any:
        if self._async_store:
            self._loop.note()
        return await self.saver.aget_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        return self.saver.list(config, **kwargs)

    def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return self.saver.alist(config, **kwargs)

    def delete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.saver.adelete_thread(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.saver.copy_thread(source_thread_id, target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.saver.acopy_thread(source_thread_id, target_thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.saver.delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.saver.adelete_for_runs(run_ids)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.saver.prune(thread_ids, strategy=strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.saver.aprune(thread_ids, strategy=strategy)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.saver.get_next_version(current, channel)


__all__ = ["RecordingCheckpointer", "moved", "needs_saved", "observed", "saved_answers"]
