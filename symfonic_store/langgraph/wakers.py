"""Waking a graph whose interrupt expired: ``on_expired`` callbacks for ``sweep``.

A wake-up is owed to the graph whose name the mint recorded. A callback only knows its
own graph: when that graph's checkpointer has no checkpoint of the thread, it returns
:data:`~symfonic_store.NOT_HELD` and the sweep leaves the wake-up owed to the graph that
does hold it, instead of reporting it delivered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.types import Command

from ..protocol import expired_resume_value
from ..services.sweep import NOT_HELD


def holds(snapshot: Any) -> bool:
    """Does the state snapshot come from a checkpoint? (LangGraph answers ``get_state``
    for a thread its checkpointer has never seen with an empty snapshot: no
    ``created_at``, no ``metadata``.)"""
    return not (
        getattr(snapshot, "created_at", None) is None and getattr(snapshot, "metadata", None) is None
    )


def waiting_on(graph: Any, thread_id: str, interrupt_id: str) -> bool:
    """Is the graph's thread still paused on this interrupt?"""
    return _waits(graph.get_state({"configurable": {"thread_id": thread_id}}), interrupt_id)


def _waits(snapshot: Any, interrupt_id: str) -> bool:
    for pending in getattr(snapshot, "interrupts", ()) or ():
        value = getattr(pending, "value", None)
        if isinstance(value, dict) and value.get("interrupt_id") == interrupt_id:
            return True
    return False


def make_graph_waker(
    graph: Any, *, configurable: dict[str, Any] | None = None
) -> Callable[[str, str, str], Any]:
    """Return an ``on_expired`` callback for ``sweep`` that wakes each expired thread.

    The callback resumes the thread's graph with ``{"expired": true, "reason": ...}``
    only when the graph is still waiting on that interrupt, and returns whether it did
    (:data:`~symfonic_store.NOT_HELD` when the graph's checkpointer does not hold the
    thread: the wake-up stays owed).
    The interrupt node hands the wake-up to the agent like any answer, so the agent can
    say the request timed out; the store keeps the interrupt expired.
    """

    def wake(thread_id: str, interrupt_id: str, reason: str) -> Any:
        snapshot = graph.get_state({"configurable": {"thread_id": thread_id}})
        if not holds(snapshot):
            return NOT_HELD
        if not _waits(snapshot, interrupt_id):
            return False
        config = {"configurable": {**(configurable or {}), "thread_id": thread_id}}
        graph.invoke(Command(resume=expired_resume_value(reason)), config)
        return True

    return wake


async def awaiting_on(graph: Any, thread_id: str, interrupt_id: str) -> bool:
    """As :func:`waiting_on`, through the graph's async API (``aget_state``)."""
    return _waits(await graph.aget_state({"configurable": {"thread_id": thread_id}}), interrupt_id)


def make_async_graph_waker(
    graph: Any, *, configurable: dict[str, Any] | None = None
) -> Callable[[str, str, str], Awaitable[Any]]:
    """As :func:`make_graph_waker`, for ``AsyncInterruptStore.sweep`` and async graphs.

    The callback is a coroutine function using ``aget_state`` and ``ainvoke``: use it
    when the graph's checkpointer or store is asynchronous (``AsyncSqliteSaver``,
    ``AsyncPostgresSaver``, :class:`~symfonic_store.AsyncInterruptStore`).
    """

    async def wake(thread_id: str, interrupt_id: str, reason: str) -> Any:
        snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        if not holds(snapshot):
            return NOT_HELD
        if not _waits(snapshot, interrupt_id):
            return False
        config = {"configurable": {**(configurable or {}), "thread_id": thread_id}}
        await graph.ainvoke(Command(resume=expired_resume_value(reason)), config)
        return True

    return wake


__all__ = ["awaiting_on", "holds", "make_async_graph_waker", "make_graph_waker", "waiting_on"]
