"""Real LangGraph graphs that pause the ways LangGraph and LangChain users pause.

None of them knows the store: the gateway and the recording checkpointer record them
unchanged. Each money-moving tool counts its calls in a :class:`Wires` ledger, so "ran
once" and "did not run" are counted, not assumed.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt
from pydantic import BaseModel


@dataclass
class Wires:
    """The side effect that must run once: every wire sent, by amount."""

    sent: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, amount: int) -> str:
        with self.lock:
            self.sent.append(amount)
        return f"wired ${amount}"


class State(TypedDict, total=False):
    answers: Annotated[list[Any], operator.add]
    done: list[str]


def node_graph(checkpointer: Any, wires: Wires, *, raise_on: Any = "bad") -> Any:
    """``interrupt()`` in a node; the node raises on ``raise_on`` and wires on approval."""

    def approve(state: State) -> dict[str, Any]:
        answer = interrupt({"name": "wire_approval", "amount": 999, "to": "acct-1"})
        if answer == raise_on:
            raise ValueError(f"cannot read the answer {answer!r}")
        if isinstance(answer, dict) and answer.get("approved") is True:
            wires.send(999)
        return {"answers": [answer]}

    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer, name="wire-node")


class Approval(BaseModel):
    approved: bool


def schema_graph(checkpointer: Any, wires: Wires) -> Any:
    """``interrupt(..., response_schema=...)``: LangGraph itself refuses a malformed answer."""

    def approve(state: State) -> dict[str, Any]:
        answer = interrupt({"name": "wire_approval", "amount": 500}, response_schema=Approval)
        if answer.approved:
            wires.send(500)
        return {"answers": [answer.model_dump()]}

    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer, name="wire-schema")


def breakpoint_graph(checkpointer: Any, wires: Wires) -> Any:
    """A static breakpoint before the node that wires the money."""

    def plan(state: State) -> dict[str, Any]:
        return {"done": ["plan"]}

    def wire(state: State) -> dict[str, Any]:
        wires.send(999)
        return {"done": [*state.get("done", []), "wire"]}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("wire", wire)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "wire")
    builder.add_edge("wire", END)
    return builder.compile(checkpointer=checkpointer, interrupt_before=["wire"], name="wire-bp")


def two_step_graph(checkpointer: Any) -> Any:
    """Two nodes, each asking a person in turn (``interrupt()``): an answer to the first
    runs the graph on to the second."""

    def first(state: State) -> dict[str, Any]:
        return {"answers": [interrupt({"name": "first"})]}

    def second(state: State) -> dict[str, Any]:
        return {"answers": [interrupt({"name": "second"})]}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=checkpointer)


class _ToolModel(GenericFakeChatModel):
    """A scripted chat model that accepts ``bind_tools`` (it calls what it is told)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def scripted_model(*replies: AIMessage) -> _ToolModel:
    return _ToolModel(messages=iter(list(replies)))


def wire_calls(*amounts: int) -> AIMessage:
    calls = [
        {"name": "wire", "args": {"amount": a}, "id": f"call-{i}"} for i, a in enumerate(amounts)
    ]
    return AIMessage("", tool_calls=calls)


def interrupting_wire_tool(wires: Wires) -> BaseTool:
    """A tool that asks a person inside its body (``interrupt()`` under ``ToolNode``)."""

    @tool
    def wire(amount: int) -> str:
        """Wire money after a person approves."""
        answer = interrupt({"name": "wire_approval", "amount": amount})
        if isinstance(answer, dict) and answer.get("approved") is True:
            return wires.send(amount)
        return "not approved"

    return wire


def tool_node_graph(checkpointer: Any, wires: Wires, *amounts: int) -> Any:
    """A model calling ``wire`` (once per amount, in parallel) under LangGraph's ``ToolNode``."""
    model = scripted_model(wire_calls(*amounts), AIMessage("done"))
    tools = [interrupting_wire_tool(wires)]

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    from langgraph.graph import MessagesState

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer, name="wire-tools")


def tool_agent(checkpointer: Any, wires: Wires, *amounts: int) -> Any:
    """``create_agent`` whose tool calls ``interrupt()``: parallel calls pause together."""
    from langchain.agents import create_agent

    return create_agent(
        scripted_model(wire_calls(*amounts), AIMessage("done")),
        tools=[interrupting_wire_tool(wires)],
        checkpointer=checkpointer,
        name="wire-tool-agent",
    )


def plain_wire_tool(wires: Wires) -> BaseTool:
    @tool
    def wire(amount: int) -> str:
        """Wire money."""
        return wires.send(amount)

    return wire


def hitl_agent(checkpointer: Any, wires: Wires, *amounts: int, mode: str = "batched") -> Any:
    """``create_agent`` with ``HumanInTheLoopMiddleware`` gating every wire."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    return create_agent(
        scripted_model(wire_calls(*amounts), AIMessage("done")),
        tools=[plain_wire_tool(wires)],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"wire": True}, interrupt_mode=mode)],  # type: ignore[arg-type]
        checkpointer=checkpointer,
        name="wire-agent",
    )


def inbox_graph(checkpointer: Any, wires: Wires) -> Any:
    """The Agent Inbox schema: a list of ``HumanInterrupt``, answered with ``HumanResponse``s."""

    def review(state: State) -> dict[str, Any]:
        request = {
            "action_request": {"action": "wire", "args": {"amount": 750}},
            "config": {"allow_accept": True, "allow_ignore": True, "allow_respond": False, "allow_edit": False},
            "description": "Wire $750?",
        }
        (response,) = interrupt([request])
        if response["type"] == "accept":
            wires.send(750)
        return {"answers": [response]}

    builder = StateGraph(State)
    builder.add_node("review", review)
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer, name="wire-inbox")


GraphFactory = Callable[..., Any]


def approve_then_ship_graph(checkpointer: Any, wires: Wires) -> Any:
    """``interrupt()`` in a node, then a static breakpoint before the node that ships."""

    def approve(state: State) -> dict[str, Any]:
        return {"answers": [interrupt({"name": "charge", "amount": 50})]}

    def ship(state: State) -> dict[str, Any]:
        wires.send(50)
        return {"done": ["shipped"]}

    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_node("ship", ship)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", "ship")
    builder.add_edge("ship", END)
    return builder.compile(checkpointer=checkpointer, interrupt_before=["ship"], name="ship-bp")
