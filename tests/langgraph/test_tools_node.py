"""The tools node: ordinary tools answer with ToolMessages, an interrupting tool leaves a marker.

Real graphs with real checkpointers (InMemorySaver, SQLite on a temporary file), run with
``invoke``, ``ainvoke`` and ``astream``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from graphs import (
    DRIVER_PARAMS,
    Driver,
    agent_graph,
    lookup,
    open_driver,
    refund,
    tool_messages,
    tools_only_graph,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from symfonic_store import (
    InterruptRequest,
    InvalidInputError,
    build_interrupt_marker,
    request_interrupt,
)
from symfonic_store.langgraph import InterruptState


@pytest.fixture(params=DRIVER_PARAMS)
async def driver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Driver]:
    """A real checkpointer and a way of running the graph (invoke / ainvoke / astream)."""
    async with open_driver(request.param, tmp_path) as opened:
        yield opened


@tool
def escalate(reason: str) -> Any:
    """Hand the case to a supervisor, with a fixed interrupt id."""
    return request_interrupt("escalation", {"reason": reason}, interrupt_id="i-escalate0001")


@tool
def greet(name: str) -> str:
    """Say hello."""
    return f"hello {name}"


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def asking(*calls: dict[str, Any]) -> dict[str, Any]:
    """A state whose last message asks for ``calls``."""
    return {"messages": [HumanMessage("please"), AIMessage("", tool_calls=list(calls))]}


# --- what the tools node writes ---------------------------------------------------


async def test_interrupting_tool_leaves_a_bound_marker(driver: Driver) -> None:
    """A tool returning request_interrupt() leaves a marker bound to its call id and the state's run_id."""
    graph = tools_only_graph(driver.checkpointer, [refund, lookup])
    before = time.time()
    out = await driver.run(
        graph,
        {**asking(call("refund", {"order": 1181, "amount": 420}, "call_r")), "run_id": "run-7"},
        driver.config(),
    )
    after = time.time()
    marker = out.values["_interrupt_pending"]
    assert set(marker) == {"name", "interrupt_id", "payload", "tool_call_id", "run_id", "minted_at"}
    assert marker["name"] == "approval_required"
    assert re.fullmatch(r"i-[0-9a-f]{12}", marker["interrupt_id"])
    assert marker["payload"] == {"order": 1181, "amount": 420.0}
    assert marker["tool_call_id"] == "call_r"
    assert marker["run_id"] == "run-7"
    assert before <= marker["minted_at"] <= after
    assert tool_messages(out.values["messages"]) == []


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_marker_is_exactly_the_builders_under_a_frozen_clock(
    how: str, tmp_path: Path
) -> None:
    """The marker equals build_interrupt_marker(...) for that call, minted_at == time.time()."""
    async with open_driver(("memory", how), tmp_path) as driver:
        graph = tools_only_graph(driver.checkpointer, [escalate])
        with freeze_time("2024-06-01 08:30:00", real_asyncio=True):
            out = await driver.run(
                graph,
                {**asking(call("escalate", {"reason": "angry"}, "call_e")), "run_id": "r-1"},
                driver.config(),
            )
            expected = build_interrupt_marker(
                name="escalation",
                interrupt_id="i-escalate0001",
                payload={"reason": "angry"},
                tool_call_id="call_e",
                run_id="r-1",
            )
    assert {"_interrupt_pending": out.values["_interrupt_pending"]} == expected
    assert out.values["_interrupt_pending"]["minted_at"] == 1717230600.0


async def test_marker_without_run_id_in_state(driver: Driver) -> None:
    """Without a run_id in state the marker's run_id is None (so the run_id rule passes it)."""
    graph = tools_only_graph(driver.checkpointer, [escalate])
    out = await driver.run(graph, asking(call("escalate", {"reason": "x"}, "c1")), driver.config())
    assert out.values["_interrupt_pending"]["run_id"] is None
    assert out.values["_interrupt_pending"]["interrupt_id"] == "i-escalate0001"


async def test_ordinary_tools_answer_with_tool_messages(driver: Driver) -> None:
    """Ordinary tools each get one ToolMessage (strings as-is, other results as JSON) and no marker."""
    graph = tools_only_graph(driver.checkpointer, [lookup, greet])
    out = await driver.run(
        graph,
        asking(call("lookup", {"order": 7}, "c_lookup"), call("greet", {"name": "ada"}, "c_greet")),
        driver.config(),
    )
    by_id = {m.tool_call_id: m for m in tool_messages(out.values["messages"])}
    assert set(by_id) == {"c_lookup", "c_greet"}
    assert by_id["c_lookup"].name == "lookup"
    assert json.loads(str(by_id["c_lookup"].content)) == {"order": 7, "status": "shipped"}
    assert by_id["c_greet"].name == "greet"
    assert by_id["c_greet"].content == "hello ada"
    assert out.values.get("_interrupt_pending") is None


async def test_mixed_step_answers_ordinary_calls_and_leaves_one_open(driver: Driver) -> None:
    """In one step an ordinary call gets its ToolMessage while the interrupting call is left open."""
    graph = tools_only_graph(driver.checkpointer, [refund, lookup])
    out = await driver.run(
        graph,
        asking(
            call("lookup", {"order": 1}, "c_lookup"),
            call("refund", {"order": 1, "amount": 5}, "c_ref"),
        ),
        driver.config(),
    )
    assert [m.tool_call_id for m in tool_messages(out.values["messages"])] == ["c_lookup"]
    assert out.values["_interrupt_pending"]["tool_call_id"] == "c_ref"


async def test_two_interrupting_tools_in_one_step_are_refused(driver: Driver) -> None:
    """Two tools raising an interrupt in one step raise InvalidInputError and write no marker."""
    graph = tools_only_graph(driver.checkpointer, [refund, escalate])
    config = driver.config()
    with pytest.raises(InvalidInputError, match="two tools raised an interrupt"):
        await driver.run(
            graph,
            asking(
                call("refund", {"order": 1, "amount": 5}, "c1"),
                call("escalate", {"reason": "r"}, "c2"),
            ),
            config,
        )
    snapshot = await driver.snapshot(graph, config)
    assert snapshot.values.get("_interrupt_pending") is None
    assert tool_messages(snapshot.values.get("messages", [])) == []


async def test_unknown_tool_is_refused(driver: Driver) -> None:
    """A call to a tool the node does not know raises InvalidInputError naming it."""
    graph = tools_only_graph(driver.checkpointer, [lookup])
    with pytest.raises(InvalidInputError, match="nonexistent"):
        await driver.run(graph, asking(call("nonexistent", {}, "c1")), driver.config())


def test_request_interrupt_returns_a_request() -> None:
    """request_interrupt builds an InterruptRequest, with a fresh id unless one is given."""
    generated = request_interrupt("approval", {"x": 1})
    given = request_interrupt("approval", {"x": 1}, interrupt_id="i-given0000001")
    assert isinstance(generated, InterruptRequest)
    assert (generated.name, generated.payload) == ("approval", {"x": 1})
    assert re.fullmatch(r"i-[0-9a-f]{12}", generated.interrupt_id)
    assert given.interrupt_id == "i-given0000001"
    assert request_interrupt("a", {}).interrupt_id != request_interrupt("a", {}).interrupt_id


# --- end to end -------------------------------------------------------------------


async def test_answer_becomes_the_calls_one_tool_message(driver: Driver) -> None:
    """End to end, the person's answer is the interrupting call's one ToolMessage, and the agent reads it."""
    calls = [
        call("lookup", {"order": 1181}, "call_lookup"),
        call("refund", {"order": 1181, "amount": 420}, "call_refund"),
    ]
    graph = agent_graph(driver.checkpointer, calls)
    config = driver.config()
    paused = await driver.run(
        graph, {"messages": [HumanMessage("refund 1181")], "run_id": "r-1"}, config
    )
    (value,) = paused.interrupt_values
    assert value["name"] == "approval_required"
    assert value["tool_call_id"] == "call_refund"
    assert value["payload"] == {"order": 1181, "amount": 420.0}
    assert paused.next == ("interrupt",)
    assert [m.tool_call_id for m in tool_messages(paused.values["messages"])] == ["call_lookup"]

    done = await driver.resume(graph, {"approved": True, "by": "alice"}, config)
    assert done.interrupts == []
    assert done.next == ()
    messages = done.values["messages"]
    for tool_call in calls:
        assert len(tool_messages(messages, tool_call["id"])) == 1
    (answer,) = tool_messages(messages, "call_refund")
    assert answer.name == "interrupt:approval_required"
    assert json.loads(str(answer.content)) == {"approved": True, "by": "alice"}
    assert isinstance(messages[-1], AIMessage)
    assert '{"approved": true, "by": "alice"}' in str(messages[-1].content)
    assert done.values["_interrupt_pending"] is None


async def test_second_turn_does_not_pause_again(driver: Driver) -> None:
    """Once answered, the marker is gone: a later turn without tool calls is not routed to the interrupt."""
    graph = agent_graph(driver.checkpointer, [call("refund", {"order": 2, "amount": 1}, "c_r")])
    config = driver.config()
    await driver.run(graph, {"messages": [HumanMessage("refund 2")]}, config)
    await driver.resume(graph, {"approved": False}, config)
    again = await driver.run(graph, {"messages": [AIMessage("noted")]}, config)
    assert again.interrupts == []
    assert again.next == ()


# --- why the tools node exists ----------------------------------------------------


@tool
def marker_via_command(order: int) -> Any:
    """Try to pause the way LangGraph's prebuilt ToolNode would need: a Command without a ToolMessage."""
    return Command(
        update=build_interrupt_marker(
            name="approval_required", interrupt_id="i-000000000001", payload={"order": order}
        )
    )


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_prebuilt_tool_node_rejects_a_pause_without_tool_message(how: str) -> None:
    """LangGraph's ToolNode refuses a tool's Command(update=marker) that carries no ToolMessage."""
    builder = StateGraph(InterruptState)
    builder.add_node("tools", ToolNode([marker_via_command]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    state = asking(call("marker_via_command", {"order": 1}, "c1"))
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ValueError, match="matching ToolMessage"):
        if how == "invoke":
            graph.invoke(state, config)
        else:
            await graph.ainvoke(state, config)
    assert graph.get_state(config).values.get("_interrupt_pending") is None
