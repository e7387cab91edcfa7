"""Recording never changes what LangGraph does (SPEC §8), measured on the cases where it did.

Each test runs a real graph with the store's savers and checks that LangGraph behaves as
it does with its own saver (``InMemorySaver``), and that the audit says what happened.
LangGraph's own test suite is run against the same savers by
``python -m tests.langgraph_suite`` (see docs/reliability.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from graph_rig import config_for, new_store, open_saver, ready
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from native_graphs import Approval, State
from pydantic import ValidationError
from typing_extensions import TypedDict

from symfonic_store import AnswerNotTakenError, InterruptGateway

DRIVERS = ["invoke", "ainvoke"]
SAVERS = ["recording", "own"]


def two_answers_graph(checkpointer: Any) -> Any:
    """One node, two interrupts: a free-form note, then an approval with a response_schema."""

    def approve(state: State) -> dict[str, Any]:
        note = interrupt({"ask": "note"})
        approval = interrupt({"ask": "approve"}, response_schema=Approval)
        return {"answers": [note, approval.model_dump()]}

    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer)


async def run(graph: Any, driver: str, value: Any, thread_id: str, **configurable: Any) -> Any:
    config = config_for(thread_id, **configurable)
    if driver == "ainvoke":
        return await graph.ainvoke(value, config)
    return graph.invoke(value, config)


async def drive_two_answers(graph: Any, driver: str, thread_id: str) -> tuple[Any, list[str]]:
    """A valid first answer, an invalid second one (refused by LangGraph), then a valid one."""
    (first,) = (await run(graph, driver, {}, thread_id, actor="requester"))["__interrupt__"]
    out = await run(graph, driver, Command(resume={first.id: "note-1"}), thread_id, actor="carol")
    (second,) = out["__interrupt__"]
    with pytest.raises(ValidationError):
        await run(graph, driver, Command(resume={second.id: {"approved": "maybe?"}}), thread_id, actor="mallory")
    out = await run(graph, driver, Command(resume={second.id: {"approved": True}}), thread_id, actor="alice")
    return out, [first.id, second.id]


@pytest.mark.parametrize("saver_kind", SAVERS)
@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_answer_refused_by_its_schema_does_not_take_back_an_earlier_valid_answer(
    migrated_url: str, driver: str, saver_kind: str
) -> None:
    """The refused second answer was never saved: the node still gets the first answer, and the audit says so."""
    expected, _ = await drive_two_answers(two_answers_graph(InMemorySaver()), driver, "t-memory")
    assert expected["answers"] == ["note-1", {"approved": True}]

    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            checkpointer = store.recording_checkpointer(saver) if saver_kind == "recording" else store.checkpointer()
            out, (first, second) = await drive_two_answers(two_answers_graph(checkpointer), driver, "t-two")
            assert out == expected  # the graph does what it does with LangGraph's saver
            events = await ready(store.history("t-two"))
            resumed = [(e.interrupt_id, e.actor, e.data["response"]) for e in events if e.type == "interrupt.resumed"]
            assert resumed == [(first, "carol", "note-1"), (second, "alice", {"approved": True})]
            # LangGraph saved no answer from mallory: nothing of hers is recorded as
            # taken, and the first answer is never recorded against the second interrupt.
            rejected = [e for e in events if e.type == "interrupt.resume_rejected"]
            assert all(e.data.get("response") != "note-1" for e in rejected)
            assert await ready(store.open_interrupts("t-two")) == []
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


@pytest.mark.parametrize("saver_kind", ["langgraph", "own"])
@pytest.mark.parametrize("driver", DRIVERS)
async def test_the_gateway_takes_back_no_earlier_answer_when_the_schema_refuses_one(
    migrated_url: str, driver: str, saver_kind: str
) -> None:
    """Through the gateway: the refused answer is not_taken, the first answer stays the node's."""
    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            graph = two_answers_graph(saver if saver_kind == "langgraph" else store.checkpointer())
            gate = InterruptGateway(graph, store)
            a = "a" if driver == "ainvoke" else ""
            (first,) = (await ready(getattr(gate, a + "invoke")({}, config_for("t-gate"))))["__interrupt__"]
            (second,) = (await ready(getattr(gate, a + "answer")("t-gate", first.id, "note-1", actor="carol")))[
                "__interrupt__"
            ]
            with pytest.raises(AnswerNotTakenError):
                await ready(getattr(gate, a + "answer")("t-gate", second.id, {"approved": "maybe?"}, actor="mallory"))
            out = await ready(getattr(gate, a + "answer")("t-gate", second.id, {"approved": True}, actor="alice"))
            assert out["answers"] == ["note-1", {"approved": True}]
            events = await ready(store.history("t-gate"))
            resumed = [(e.interrupt_id, e.actor) for e in events if e.type == "interrupt.resumed"]
            assert resumed == [(first.id, "carol"), (second.id, "alice")]
            rejected = [(e.interrupt_id, e.actor, e.data["why"]) for e in events if e.type == "interrupt.resume_rejected"]
            assert rejected == [(second.id, "mallory", "not_taken")]
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


ASYNC_SAVERS = ["own", "recording"]


def async_saver(astore: Any, kind: str) -> Any:
    """An AsyncInterruptStore's checkpointer, or its recording one over LangGraph's saver."""
    return astore.checkpointer() if kind == "own" else astore.recording_checkpointer(InMemorySaver())


class Text(TypedDict):
    input: str


def nested_graph(checkpointer: Any) -> Any:
    """A sync node that runs a subgraph with ``subgraph.invoke()``, which pauses on interrupt()."""

    def ask(state: Text) -> dict[str, str]:
        return {"input": interrupt("the sub-agent asks")}

    sub = StateGraph(Text)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")
    sub.add_edge("ask", END)
    subgraph = sub.compile()

    def run_sub_agent(state: Text) -> dict[str, str]:
        return subgraph.invoke(state)  # type: ignore[no-any-return]

    parent = StateGraph(Text)
    parent.add_node("agent", run_sub_agent)
    parent.add_edge(START, "agent")
    parent.add_edge("agent", END)
    return parent.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("kind", ASYNC_SAVERS)
async def test_a_sync_node_running_a_subgraph_under_ainvoke_works_on_the_async_store(migrated_url: str, kind: str) -> None:
    """subgraph.invoke() from a sync node (a worker thread) pauses and resumes as with LangGraph's saver."""
    expected = []
    for checkpointer in (InMemorySaver(), None):
        if checkpointer is None:
            astore = new_store(migrated_url, "ainvoke")
            await astore.setup()
            checkpointer = async_saver(astore, kind)
        graph = nested_graph(checkpointer)
        config = config_for("t-nested", actor="carol")
        paused = await graph.ainvoke({"input": "hi"}, config)
        done = await graph.ainvoke(Command(resume="answered"), config)
        expected.append((paused["__interrupt__"][0].value, done))
    try:
        assert expected[1] == expected[0] == ("the sub-agent asks", {"input": "answered"})
        events = await astore.history("t-nested")
        assert [e.type for e in events if e.type.startswith("interrupt.")][:2] == [
            "interrupt.minted", "interrupt.resumed",
        ]
        assert await astore.open_interrupts("t-nested") == []
    finally:
        await astore.aclose()


@pytest.mark.parametrize("kind", ASYNC_SAVERS)
async def test_get_state_in_a_worker_thread_reads_the_async_store(migrated_url: str, kind: str) -> None:
    """asyncio.to_thread(graph.get_state, ...) answers as aget_state does; on the loop's thread it is refused."""
    astore = new_store(migrated_url, "ainvoke")
    await astore.setup()
    try:
        graph = two_answers_graph(async_saver(astore, kind))
        config = config_for("t-thread")
        (paused,) = (await graph.ainvoke({}, config))["__interrupt__"]
        state = await asyncio.to_thread(graph.get_state, config)
        assert state == await graph.aget_state(config)
        assert state.interrupts[0].id == paused.id
        history = await asyncio.to_thread(lambda: list(graph.get_state_history(config)))
        assert [s.config for s in history] == [s.config async for s in graph.aget_state_history(config)]
        # A whole sync run from a worker thread: its writes are recorded like any other.
        await asyncio.to_thread(graph.invoke, Command(resume={paused.id: "note-1"}), config)
        (resumed,) = [e for e in await astore.history("t-thread") if e.type == "interrupt.resumed"]
        assert resumed.interrupt_id == paused.id and resumed.data["response"] == "note-1"
        if kind == "own":  # reads of the recording one are its saver's, answered anywhere
            with pytest.raises(TypeError, match="async API"):
                graph.get_state(config)  # on the loop's own thread: waiting would block it
    finally:
        await astore.aclose()
