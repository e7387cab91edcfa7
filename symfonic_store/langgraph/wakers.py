"""Waking a graph whose interrupt expired: ``on_expired`` callbacks for ``sweep``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.types import Command

from ..protocol import expired_resume_value


def waiting_on(graph: Any, thread_id: str, interrupt_id: str) -> bool:
    """Is the graph's thread still paused on this interrupt?"""
    snapshot = graph.get_state({"configurable": {"thread_id": thread_id}})
    for pending in getattr(snapshot, "interrupts", ()) or ():
        value = getattr(pending, "value", None)
        if isinstance(value, dict) and value.get("interrupt_id") == interrupt_id:
            return True
    return False


def make_graph_waker(
    graph: Any, *, configurable: dict[str, Any] | None = None
) -> Callable[[str, str, str], bool]:
    """Return an ``on_expired`` callback for ``sweep`` that wakes each expired thread.

    The callback resumes the thread's graph with ``{"expired": true, "reason": ...}``
    only when the graph is still waiting on that interrupt, and returns whether it did.
    The interrupt node hands the wake-up to the agent like any answer, so the agent can
    say the request timed out; the store keeps the interrupt expired.
    """

    def wake(thread_id: str, interrupt_id: str, reason: str) -> bool:
        if not waiting_on(graph, thread_id, interrupt_id):
            return False
        config = {"configurable": {**(configurable or {}), "thread_id": thread_id}}
        graph.invoke(Command(resume=expired_resume_value(reason)), config)
        return True

    return wake


async def awaiting_on(graph: Any, thread_id: str, interrupt_id: str) -> bool:
    """As :func:`waiting_on`, through the graph's async API (``aget_state``)."""
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    for pending in getattr(snapshot, "interrupts", ()) or ():
        value = getattr(pending, "value", None)
        if isinstance(value, dict) and value.get("interrupt_id") == interrupt_id:
            return True
    return False


def make_async_graph_waker(
    graph: Any, *, configurable: dict[str, Any] | None = None
) -> Callable[[str, str, str], Awaitable[bool]]:
    """As :func:`make_graph_waker`, for ``AsyncInterruptStore.sweep`` and async graphs.

    The callback is a coroutine function using ``aget_state`` and ``ainvoke``: use it
    when the graph's checkpointer or store is asynchronous (``AsyncSqliteSaver``,
    ``AsyncPostgresSaver``, :class:`~symfonic_store.AsyncInterruptStore`).
    """

    async def wake(thread_id: str, interrupt_id: str, reason: str) -> bool:
        if not await awaiting_on(graph, thread_id, interrupt_id):
            return False
        config = {"configurable": {**(configurable or {}), "thread_id": thread_id}}
        await graph.ainvoke(Command(resume=expired_resume_value(reason)), config)
        return True

    return wake


__all__ = ["awaiting_on", "make_async_graph_waker", "make_graph_waker", "waiting_on"]
