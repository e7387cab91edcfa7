"""What the checkpointer keeps by the identity of a transient object: its savers bound to
a pooled connection (by checkpointer), and the asyncio write queue on SQLite (by event
loop). Neither may keep such an object alive after it is gone, nor grow with each one."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from symfonic_store import AsyncInterruptStore, InterruptStore

METADATA: Any = {"source": "input", "step": -1, "parents": {}}


def _config(n: int) -> Any:
    return {"configurable": {"thread_id": f"t-{n}", "checkpoint_ns": ""}}


def _savers() -> int:
    gc.collect()
    return sum(isinstance(o, BaseCheckpointSaver) for o in gc.get_objects())


def test_checkpointers_made_one_after_another_leave_nothing_on_the_connections(
    store: InterruptStore,
) -> None:
    """A pooled connection outlives the checkpointers used on it: the saver bound to it
    for each one goes with its checkpointer."""
    store.checkpointer().put(_config(0), empty_checkpoint(), METADATA, {})
    before = _savers()
    for n in range(1, 30):
        store.checkpointer().put(_config(n), empty_checkpoint(), METADATA, {})
    assert _savers() == before
    assert store.checkpointer().get_tuple(_config(29)) is not None


def test_finished_event_loops_are_not_kept_by_the_write_queue(migrated_sqlite_url: str) -> None:
    """A store used from one ``asyncio.run`` after another: each new loop's write-queue
    lock is made after the closed loops' are dropped, so only the last may still be held."""
    store = AsyncInterruptStore(migrated_sqlite_url)
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def save(n: int) -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        await store.checkpointer().aput(_config(n), empty_checkpoint(), METADATA, {})

    try:
        for n in range(4):
            asyncio.run(save(n))
        gc.collect()
        assert [loop() is None for loop in loops[:-1]] == [True, True, True]
    finally:
        asyncio.run(store.close())
