"""The asyncio checkpointer's write queue on SQLite is kept per event loop, by the loop
itself: a store used from one ``asyncio.run`` after another must not keep every finished
loop (and its lock) alive."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from symfonic_store import AsyncInterruptStore


def test_finished_event_loops_are_not_kept_by_the_write_queue(migrated_sqlite_url: str) -> None:
    store = AsyncInterruptStore(migrated_sqlite_url)
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def save(n: int) -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        config: Any = {"configurable": {"thread_id": f"t-{n}", "checkpoint_ns": ""}}
        metadata: Any = {"source": "input", "step": -1, "parents": {}}
        await store.checkpointer().aput(config, empty_checkpoint(), metadata, {})

    try:
        for n in range(4):
            asyncio.run(save(n))
        gc.collect()
        # Each new loop's lock is made after the closed loops' are dropped: only the
        # last one may still be held.
        assert [loop() is None for loop in loops[:-1]] == [True, True, True]
    finally:
        asyncio.run(store.close())
