"""Graph builders and a graph driver shared by the LangGraph tests (no store involved).

Test modules build their ``driver`` fixture from :data:`DRIVER_PARAMS` and
:func:`open_driver`. A driver runs one real compiled graph with one real
checkpointer, either with ``invoke`` or with ``ainvoke``/``astream``, and reports what
LangGraph surfaced (``__interrupt__``) and the thread's state afterwards.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from pydantic import BaseModel

from symfonic_store import (
    build_interrupt_marker,
    create_interrupt_node,
    create_tools_node,
    interrupt_condition,
    request_interrupt,
)
from symfonic_store.langgraph import InterruptState


class Approval(BaseModel):
    """A typed answer, as a UI might send it."""

    approved: bool
    note: str = ""


# Checkpoints hold resume values; name the one custom type they may hold so LangGraph's
# msgpack loader accepts it without its "unregistered type" warning.
SERDE = JsonPlusSerializer(allowed_msgpack_modules=[(Approval.__module__, Approval.__name__)])

DRIVERS = ("invoke", "ainvoke", "astream")
SAVERS = ("memory", "sqlite")


# --- graphs -----------------------------------------------------------------------


def marker_graph(
    checkpointer: BaseCheckpointSaver[Any],
    *,
    name: str = "approval_required",
    interrupt_id: str = "i-0123456789ab",
    payload: dict[str, Any] | None = None,
    tool_call_id: str | None = None,
) -> Any:
    """START -> ``raise`` (returns a marker) -> the store-less interrupt node -> END."""
    marker_payload = {"order": 1181, "amount": 420} if payload is None else payload

    def raise_marker(state: dict[str, Any]) -> dict[str, Any]:
        return build_interrupt_marker(
            name=name,
            interrupt_id=interrupt_id,
            payload=marker_payload,
            tool_call_id=tool_call_id,
            run_id=state.get("run_id"),
        )

    builder = StateGraph(InterruptState)
    builder.add_node("raise", raise_marker)
    builder.add_node("interrupt", create_interrupt_node())
    builder.add_edge(START, "raise")
    builder.add_edge("raise", "interrupt")
    builder.add_edge("interrupt", END)
    return builder.compile(checkpointer=checkpointer)


@tool
def refund(order: int, amount: float) -> Any:
    """Refund an order; needs a person's approval first."""
    return request_interrupt("approval_required", {"order": order, "amount": amount})


@tool
def lookup(order: int) -> dict[str, Any]:
    """Look an order up."""
    return {"order": order, "status": "shipped"}


def scripted_agent(calls: list[dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An agent that asks for ``calls`` on the person's message, then reports the tool results."""

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            return {"messages": [AIMessage("", tool_calls=calls)]}
        results = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
        return {"messages": [AIMessage("done: " + " | ".join(str(r) for r in results))]}

    return agent


def agent_graph(
    checkpointer: BaseCheckpointSaver[Any],
    calls: list[dict[str, Any]],
    tools: Sequence[BaseTool] = (refund, lookup),
) -> Any:
    """agent -> router -> tools / interrupt -> agent, as a user would wire it."""
    builder = StateGraph(InterruptState)
    builder.add_node("agent", scripted_agent(calls))
    builder.add_node("tools", create_tools_node(list(tools)))
    builder.add_node("interrupt", create_interrupt_node())
    builder.add_edge(START, "agent")
    builder.add_conditional_edges(
        "agent",
        interrupt_condition,
        {"interrupt": "interrupt", "continue": "tools", "finish": END, "elicitation": END},
    )
    builder.add_conditional_edges(
        "tools",
        interrupt_condition,
        {"interrupt": "interrupt", "continue": "agent", "finish": "agent", "elicitation": "agent"},
    )
    builder.add_edge("interrupt", "agent")
    return builder.compile(checkpointer=checkpointer)


def tools_only_graph(checkpointer: BaseCheckpointSaver[Any], tools: Sequence[BaseTool]) -> Any:
    """START -> the tools node -> END, to look at what the tools node alone writes."""
    builder = StateGraph(InterruptState)
    builder.add_node("tools", create_tools_node(list(tools)))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=checkpointer)


# --- driving a graph --------------------------------------------------------------


@dataclass
class Outcome:
    """What one run of a graph surfaced, and the thread's state after it."""

    interrupts: list[Any]
    values: dict[str, Any]
    next: tuple[str, ...]
    chunks: list[Any] = field(default_factory=list)

    @property
    def interrupt_values(self) -> list[Any]:
        return [i.value for i in self.interrupts]


@dataclass
class Driver:
    """Runs a graph with one way of driving it, on one checkpointer."""

    how: str
    checkpointer: BaseCheckpointSaver[Any]

    @staticmethod
    def config(thread_id: str | None = None) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread_id or uuid.uuid4().hex}}

    async def run(self, graph: Any, graph_input: Any, config: dict[str, Any]) -> Outcome:
        """Run ``graph_input`` (a state or a ``Command``) on the thread of ``config``."""
        chunks: list[Any] = []
        if self.how == "invoke":
            out = graph.invoke(graph_input, config)
            interrupts = list(out.get("__interrupt__", ()))
            snapshot = graph.get_state(config)
        elif self.how == "ainvoke":
            out = await graph.ainvoke(graph_input, config)
            interrupts = list(out.get("__interrupt__", ()))
            snapshot = await graph.aget_state(config)
        else:
            interrupts = []
            async for chunk in graph.astream(graph_input, config, stream_mode="updates"):
                chunks.append(chunk)
                interrupts.extend(chunk.get("__interrupt__", ()))
            snapshot = await graph.aget_state(config)
        return Outcome(interrupts, dict(snapshot.values), tuple(snapshot.next), chunks)

    async def resume(self, graph: Any, value: Any, config: dict[str, Any]) -> Outcome:
        return await self.run(graph, Command(resume=value), config)

    async def snapshot(self, graph: Any, config: dict[str, Any]) -> Any:
        """The thread's current ``StateSnapshot``."""
        if self.how == "invoke":
            return graph.get_state(config)
        return await graph.aget_state(config)

    async def history_values(self, graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
        """The state values of every checkpoint of the thread, newest first."""
        if self.how == "invoke":
            return [dict(s.values) for s in graph.get_state_history(config)]
        return [dict(s.values) async for s in graph.aget_state_history(config)]


def dump(value: Any) -> str:
    """Everything in ``value`` as text, to look for a string that must not be anywhere."""
    return json.dumps(
        value, default=lambda o: o.model_dump() if hasattr(o, "model_dump") else str(o)
    )


def tool_messages(
    messages: Sequence[BaseMessage], tool_call_id: str | None = None
) -> list[ToolMessage]:
    return [
        m
        for m in messages
        if isinstance(m, ToolMessage) and (tool_call_id is None or m.tool_call_id == tool_call_id)
    ]


DRIVER_PARAMS = [
    pytest.param((saver, how), id=f"{saver}-{how}") for saver in SAVERS for how in DRIVERS
]


@asynccontextmanager
async def open_driver(kind: tuple[str, str], tmp_path: Path) -> AsyncIterator[Driver]:
    """A driver for ``(checkpointer, way of running)``: InMemorySaver or SQLite on a temp file.

    ``invoke`` pairs with the sync ``SqliteSaver``, ``ainvoke``/``astream`` with
    ``AsyncSqliteSaver`` (each refuses the other's calls on the event loop's thread).
    """
    saver, how = kind
    if saver == "memory":
        yield Driver(how, InMemorySaver(serde=SERDE))
    elif how == "invoke":
        conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
        try:
            yield Driver(how, SqliteSaver(conn, serde=SERDE))
        finally:
            conn.close()
    else:
        async with aiosqlite.connect(tmp_path / "checkpoints.db") as aconn:
            yield Driver(how, AsyncSqliteSaver(aconn, serde=SERDE))
