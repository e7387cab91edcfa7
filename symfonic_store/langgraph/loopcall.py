"""Sync calls of an asyncio checkpointer, served off the event loop's thread.

LangGraph's async savers (``AsyncPostgresSaver``, ``AsyncSqliteSaver``) answer a sync
call from another thread by running the coroutine on their own event loop
(``asyncio.run_coroutine_threadsafe``) and refuse it only on that loop's thread, where
waiting would block the loop itself. A sync node under ``ainvoke`` that calls
``subgraph.invoke()``, or ``asyncio.to_thread(graph.get_state, ...)``, relies on it.
The store's asyncio checkpointers do the same, on the loop their async API last ran on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class LoopCall:
    """The event loop an async API runs on, and sync calls run there from other threads."""

    def __init__(self, refusal: str) -> None:
        self.refusal = refusal
        self.loop = _running()

    def note(self) -> None:
        """Called from the async API: its loop is the one sync calls run on."""
        self.loop = asyncio.get_running_loop()

    def run(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """``make()``'s coroutine run on the loop, waited for from this (other) thread.

        Refused (``TypeError``) on the loop's own thread, which the wait would block,
        and when no loop of the async API is running.
        """
        loop = self.loop
        if loop is None or not loop.is_running() or _running() is loop:
            raise TypeError(self.refusal)
        return asyncio.run_coroutine_threadsafe(make(), loop).result()


__all__ = ["LoopCall"]
