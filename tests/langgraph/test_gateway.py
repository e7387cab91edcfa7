"""The gateway records and gates LangGraph's own interrupts on real graphs (SPEC §8).

Every test runs on SQLite and PostgreSQL (the store and LangGraph's checkpointer on the
same database), through ``invoke`` and through ``ainvoke`` (AsyncInterruptStore with
the async savers). Side effects are counted: "ran once" and "did not run" are proven.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from consistency import assert_consistent
from graph_rig import config_for, new_store, open_saver, ready
from native_graphs import (
    Wires,
    approve_then_ship_graph,
    breakpoint_graph,
    hitl_agent,
    inbox_graph,
    node_graph,
    schema_graph,
    tool_agent,
    tool_node_graph,
)

from symfonic_store import (
    AnswerNotTakenError,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptGateway,
    InterruptStore,
    InvalidInputError,
    UnknownInterruptError,
)

DRIVERS = ["invoke", "ainvoke"]


class Gate:
    """A gateway driven through the sync or the async API, with its store and wires."""

    def __init__(self, gateway: InterruptGateway, store: Any, driver: str, wires: Wires) -> None:
        self.gateway = gateway
        self.store = store
        self.driver = driver
        self.wires = wires

    async def s(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await ready(getattr(self.store, method)(*args, **kwargs))

    async def invoke(self, value: Any, thread_id: str, **configurable: Any) -> Any:
        config = config_for(thread_id, **configurable)
        if self.driver == "ainvoke":
            return await self.gateway.ainvoke(value, config)
        return self.gateway.invoke(value, config)

    async def answer(self, thread_id: str, interrupt_id: str, value: Any, actor: str) -> Any:
        if self.driver == "ainvoke":
            return await self.gateway.aanswer(thread_id, interrupt_id, value, actor=actor)
        return self.gateway.answer(thread_id, interrupt_id, value, actor=actor)

    async def open(self, thread_id: str) -> list[dict[str, Any]]:
        return list(await self.s("open_interrupts", thread_id))

    async def history(self, thread_id: str) -> list[Any]:
        return list(await self.s("history", thread_id))

    async def state(self, thread_id: str) -> Any:
        config = config_for(thread_id)
        if self.driver == "ainvoke":
            return await self.gateway.graph.aget_state(config)
        return self.gateway.graph.get_state(config)


@asynccontextmanager
async def gate_for(
    db_url: str, driver: str, build: Callable[..., Any], *args: Any, **kwargs: Any
) -> AsyncIterator[Gate]:
    store = new_store(db_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(db_url, driver) as saver:
            wires = Wires()
            graph = build(saver, wires, *args, **kwargs)
            yield Gate(InterruptGateway(graph, store), store, driver, wires)
        # Whatever the pattern did: the projections (the marker slot and the open
        # LangGraph interrupts) equal the fold of the events, and a rebuild agrees.
        with InterruptStore(db_url) as check:
            assert_consistent(check)
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


def of_type(events: list[Any], type_: str) -> list[Any]:
    return [e for e in events if e.type == type_]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_interrupt_in_a_node_is_minted_answered_once_and_runs_once(migrated_url: str, driver: str) -> None:
    """interrupt() in a node: the mint keeps LangGraph's id and value; one answer, one wire."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        out = await gate.invoke({}, "t-node", actor="requester")
        (paused,) = out["__interrupt__"]
        (opened,) = await gate.open("t-node")
        assert opened["interrupt_id"] == paused.id
        assert opened["payload"] == {"name": "wire_approval", "amount": 999, "to": "acct-1"}
        assert opened["name"] == "wire_approval" and opened["source"] == "langgraph"
        mint = of_type(await gate.history("t-node"), "interrupt.minted")[0]
        assert mint.actor == "requester" and mint.data["graph"] == "wire-node"

        await gate.answer("t-node", paused.id, {"approved": True}, "alice")
        assert gate.wires.sent == [999]
        with pytest.raises(InterruptAlreadyResolvedError):
            await gate.answer("t-node", paused.id, {"approved": True}, "bob")
        assert gate.wires.sent == [999]
        (resumed,) = of_type(await gate.history("t-node"), "interrupt.resumed")
        assert resumed.actor == "alice" and resumed.data["response"] == {"approved": True}
        assert resumed.data["via"] == "gateway"
        assert await gate.open("t-node") == []


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_answer_the_graph_raises_on_never_locks_out_the_real_approver(migrated_url: str, driver: str) -> None:
    """The graph raises on mallory's answer: recorded not_taken, still open; alice's answer is the one the node gets."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        out = await gate.invoke({}, "t-bad")
        (paused,) = out["__interrupt__"]
        with pytest.raises(AnswerNotTakenError) as refused:
            await gate.answer("t-bad", paused.id, "bad", "mallory")
        assert "ValueError" in refused.value.error
        assert [o["interrupt_id"] for o in await gate.open("t-bad")] == [paused.id]
        (rejected,) = of_type(await gate.history("t-bad"), "interrupt.resume_rejected")
        assert rejected.actor == "mallory" and rejected.data["why"] == "not_taken"
        assert "ValueError" in rejected.data["error"]

        await gate.answer("t-bad", paused.id, {"approved": True}, "alice")
        assert gate.wires.sent == [999]
        state = await gate.state("t-bad")
        assert state.values["answers"] == [{"approved": True}]
        (resumed,) = of_type(await gate.history("t-bad"), "interrupt.resumed")
        assert resumed.actor == "alice"


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_response_schema_refusal_is_not_recorded_as_applied(migrated_url: str, driver: str) -> None:
    """LangGraph's response_schema refuses the answer: not_taken, and the valid answer is admitted next."""
    async with gate_for(migrated_url, driver, schema_graph) as gate:
        (paused,) = (await gate.invoke({}, "t-schema"))["__interrupt__"]
        with pytest.raises(AnswerNotTakenError):
            await gate.answer("t-schema", paused.id, {"approved": "maybe?"}, "mallory")
        assert of_type(await gate.history("t-schema"), "interrupt.resumed") == []
        await gate.answer("t-schema", paused.id, {"approved": True}, "alice")
        assert gate.wires.sent == [500]
        (resumed,) = of_type(await gate.history("t-schema"), "interrupt.resumed")
        assert resumed.actor == "alice"


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_interrupt_inside_a_tool_under_toolnode_pauses_and_resumes(migrated_url: str, driver: str) -> None:
    """interrupt() in a tool run by LangGraph's ToolNode: recorded, answered once, wired once."""
    async with gate_for(migrated_url, driver, tool_node_graph, 100) as gate:
        await gate.invoke({"messages": [("user", "pay")]}, "t-toolnode")
        (opened,) = await gate.open("t-toolnode")
        assert opened["payload"] == {"name": "wire_approval", "amount": 100}
        out = await gate.answer("t-toolnode", opened["interrupt_id"], {"approved": True}, "alice")
        assert gate.wires.sent == [100]
        assert out["messages"][-1].content == "done"


@pytest.mark.parametrize("driver", DRIVERS)
async def test_parallel_tool_calls_are_each_open_and_answerable(migrated_url: str, driver: str) -> None:
    """Two tool calls that pause in one step: two open interrupts, none superseding the other, each answered by id."""
    async with gate_for(migrated_url, driver, tool_agent, 100, 200) as gate:
        await gate.invoke({"messages": [("user", "pay both")]}, "t-tools")
        opened = await gate.open("t-tools")
        assert sorted(o["payload"]["amount"] for o in opened) == [100, 200]
        by_amount = {o["payload"]["amount"]: o["interrupt_id"] for o in opened}
        await gate.answer("t-tools", by_amount[100], {"approved": True}, "alice")
        assert gate.wires.sent == [100]
        assert [o["interrupt_id"] for o in await gate.open("t-tools")] == [by_amount[200]]
        await gate.answer("t-tools", by_amount[200], {"approved": False}, "bob")
        assert gate.wires.sent == [100]
        assert await gate.open("t-tools") == []
        events = await gate.history("t-tools")
        assert of_type(events, "interrupt.expired") == []
        assert sorted(e.actor for e in of_type(events, "interrupt.resumed")) == ["alice", "bob"]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_hitl_middleware_batched_request_is_named_and_answered_with_decisions(migrated_url: str, driver: str) -> None:
    """HumanInTheLoopMiddleware (batched): one interrupt named by its actions; a reject decision wires nothing."""
    async with gate_for(migrated_url, driver, hitl_agent, 999, 5) as gate:
        await gate.invoke({"messages": [("user", "pay")]}, "t-hitl")
        (opened,) = await gate.open("t-hitl")
        assert opened["name"] == "wire,wire"
        decisions = {"decisions": [{"type": "reject", "message": "no"}, {"type": "approve"}]}
        await gate.answer("t-hitl", opened["interrupt_id"], decisions, "alice")
        assert gate.wires.sent == [5]
        (resumed,) = of_type(await gate.history("t-hitl"), "interrupt.resumed")
        assert resumed.data["response"] == decisions
        assert resumed.data["decisions"] == ["reject", "approve"]
        records = await gate.s("audit", thread_id="t-hitl")
        assert [(r.action_index, r.action["args"], r.decision, r.actor) for r in records] == [
            (0, {"amount": 999}, "reject", "alice"),
            (1, {"amount": 5}, "approve", "alice"),
        ]
        assert {r.interrupt_id for r in records} == {opened["interrupt_id"]}


@pytest.mark.parametrize("driver", DRIVERS)
async def test_hitl_middleware_per_call_interrupts_are_answered_one_by_one(migrated_url: str, driver: str) -> None:
    """HumanInTheLoopMiddleware(interrupt_mode="per_call"): one interrupt per call, each its own decision."""
    async with gate_for(migrated_url, driver, hitl_agent, 300, 400, mode="per_call") as gate:
        await gate.invoke({"messages": [("user", "pay")]}, "t-per-call")
        opened = await gate.open("t-per-call")
        assert [o["name"] for o in opened] == ["wire", "wire"]
        by_amount = {o["payload"]["args"]["amount"]: o["interrupt_id"] for o in opened}
        await gate.answer("t-per-call", by_amount[300], {"type": "reject", "message": "no"}, "alice")
        assert gate.wires.sent == []
        await gate.answer("t-per-call", by_amount[400], {"type": "approve"}, "bob")
        assert gate.wires.sent == [400]
        decisions = [e.data["decision"] for e in of_type(await gate.history("t-per-call"), "interrupt.resumed")]
        assert decisions == ["reject", "approve"]
        records = await gate.s("audit", thread_id="t-per-call")
        assert sorted((r.actor, r.decision, r.action_index) for r in records) == [
            ("alice", "reject", None), ("bob", "approve", None)
        ]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_agent_inbox_answer_is_kept_as_the_list_it_is(migrated_url: str, driver: str) -> None:
    """Agent Inbox: the answer [{"type": "accept"}] reaches the node unchanged (not stringified)."""
    async with gate_for(migrated_url, driver, inbox_graph) as gate:
        (paused,) = (await gate.invoke({}, "t-inbox"))["__interrupt__"]
        (opened,) = await gate.open("t-inbox")
        assert opened["name"] == "wire"
        await gate.answer("t-inbox", paused.id, [{"type": "accept", "args": None}], "alice")
        assert gate.wires.sent == [750]
        (resumed,) = of_type(await gate.history("t-inbox"), "interrupt.resumed")
        assert resumed.data["response"] == [{"type": "accept", "args": None}]
        assert resumed.data["decision"] == "accept"
        (record,) = await gate.s("audit", thread_id="t-inbox")
        assert record.decision == "accept" and record.response == [{"type": "accept", "args": None}]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_rejected_breakpoint_does_not_run_the_wire(migrated_url: str, driver: str) -> None:
    """interrupt_before: a reject is recorded and the node does not run; the thread stays paused before it."""
    async with gate_for(migrated_url, driver, breakpoint_graph) as gate:
        await gate.invoke({}, "t-bp")
        (opened,) = await gate.open("t-bp")
        assert opened["interrupt_id"].startswith("bp-") and opened["payload"] == {"next": ["wire"]}
        await gate.answer("t-bp", opened["interrupt_id"], {"approved": False}, "bob")
        assert gate.wires.sent == []
        assert (await gate.state("t-bp")).next == ("wire",)
        (resumed,) = of_type(await gate.history("t-bp"), "interrupt.resumed")
        assert resumed.actor == "bob" and resumed.data["decision"] == "reject"
        (record,) = await gate.s("audit", thread_id="t-bp")
        assert (record.outcome, record.decision, record.actor) == ("resumed", "reject", "bob")
        with pytest.raises(InterruptAlreadyResolvedError):
            await gate.answer("t-bp", opened["interrupt_id"], {"approved": True}, "mallory")
        assert gate.wires.sent == []


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_approved_breakpoint_runs_the_node_once(migrated_url: str, driver: str) -> None:
    """interrupt_before: {"approved": true} continues the run; the wire runs once."""
    async with gate_for(migrated_url, driver, breakpoint_graph) as gate:
        await gate.invoke({}, "t-bp-ok")
        (opened,) = await gate.open("t-bp-ok")
        out = await gate.answer("t-bp-ok", opened["interrupt_id"], {"approved": True}, "alice")
        assert out["done"] == ["plan", "wire"] and gate.wires.sent == [999]
        (resumed,) = of_type(await gate.history("t-bp-ok"), "interrupt.resumed")
        assert resumed.data["decision"] == "approve"
        assert await gate.open("t-bp-ok") == []


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_interrupt_langgraph_stops_waiting_on_is_closed_as_superseded(migrated_url: str, driver: str) -> None:
    """New input moves the thread past its interrupt: the next gateway call closes it as superseded."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        (first,) = (await gate.invoke({}, "t-sup"))["__interrupt__"]
        if driver == "ainvoke":
            await gate.gateway.graph.aupdate_state(config_for("t-sup"), {"answers": ["skip"]}, as_node="approve")
        else:
            gate.gateway.graph.update_state(config_for("t-sup"), {"answers": ["skip"]}, as_node="approve")
        await gate.invoke({}, "t-sup")
        (expired,) = of_type(await gate.history("t-sup"), "interrupt.expired")
        assert expired.interrupt_id == first.id
        assert expired.data == {"reason": "superseded", "detected_by": "gateway"}
        with pytest.raises(InterruptExpiredError):
            await gate.answer("t-sup", first.id, {"approved": True}, "alice")
        assert gate.wires.sent == []


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_id_langgraph_is_not_waiting_on_is_refused_without_running_the_graph(migrated_url: str, driver: str) -> None:
    """A made-up interrupt id on a real thread: UnknownInterruptError, recorded, nothing runs."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        await gate.invoke({}, "t-unknown")
        with pytest.raises(UnknownInterruptError):
            await gate.answer("t-unknown", "0" * 32, {"approved": True}, "alice")
        assert gate.wires.sent == []
        (rejected,) = of_type(await gate.history("t-unknown"), "interrupt.resume_rejected")
        assert rejected.data["why"] == "unknown"


async def _sweep(gate: Gate, **kwargs: Any) -> Any:
    return await gate.s("sweep", ttl_seconds=0, on_expired=gate.gateway.waker(), **kwargs)


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_expired_hitl_request_wakes_the_agent_with_reject_decisions(migrated_url: str, driver: str) -> None:
    """The sweep expires a HITL request; the waker answers one reject per action, nothing is wired, no resume recorded."""
    async with gate_for(migrated_url, driver, hitl_agent, 999, 5) as gate:
        await gate.invoke({"messages": [("user", "pay")]}, "t-exp-hitl")
        (opened,) = await gate.open("t-exp-hitl")
        report = await _sweep(gate)
        assert report.expired == [("t-exp-hitl", opened["interrupt_id"], "ttl")]
        assert report.wake_failures == []
        assert gate.wires.sent == []
        state = await gate.state("t-exp-hitl")
        assert not state.interrupts and state.values["messages"][-1].content == "done"
        rejected = [m for m in state.values["messages"] if "expired: ttl" in str(m.content)]
        assert len(rejected) == 2
        events = await gate.history("t-exp-hitl")
        assert of_type(events, "interrupt.resumed") == []
        (expired,) = of_type(events, "interrupt.expired")
        assert expired.data == {"reason": "ttl", "detected_by": "sweep"}


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_expired_node_interrupt_is_woken_with_the_expiry_value(migrated_url: str, driver: str) -> None:
    """A plain interrupt() that expired receives {"expired": true, "reason": "ttl"}; later answers are refused."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        (paused,) = (await gate.invoke({}, "t-exp-node"))["__interrupt__"]
        await _sweep(gate)
        assert (await gate.state("t-exp-node")).values["answers"] == [{"expired": True, "reason": "ttl"}]
        with pytest.raises(InterruptExpiredError):
            await gate.answer("t-exp-node", paused.id, {"approved": True}, "alice")
        assert gate.wires.sent == []


@pytest.mark.parametrize("driver", DRIVERS)
async def test_an_expired_agent_inbox_request_is_ignored(migrated_url: str, driver: str) -> None:
    """Agent Inbox: the expiry answer is a list with one ignore response, as the schema asks."""
    async with gate_for(migrated_url, driver, inbox_graph) as gate:
        await gate.invoke({}, "t-exp-inbox")
        await _sweep(gate)
        assert (await gate.state("t-exp-inbox")).values["answers"] == [{"type": "ignore", "args": None}]
        assert gate.wires.sent == []


@pytest.mark.parametrize("driver", DRIVERS)
async def test_the_seed_nodes_own_interrupt_is_the_markers_and_is_answered_through_resume(migrated_url: str, driver: str) -> None:
    """A marker-protocol graph behind the gateway: nothing minted twice; answer() goes through store.resume (N2)."""
    from symfonic_store.demo import RefundLedger, build_agent_graph, refund_tools

    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            ledger = RefundLedger()
            graph = build_agent_graph(store, checkpointer=saver, tools=refund_tools(ledger))
            gate = Gate(InterruptGateway(graph, store), store, driver, Wires())
            await gate.invoke({"messages": [("user", "Please refund $420 to order 1181.")]}, "t-marker")
            (opened,) = await gate.open("t-marker")
            assert opened["source"] == "marker"
            await gate.answer("t-marker", opened["interrupt_id"], {"approved": True}, "alice")
            events = await gate.history("t-marker")
            assert len(of_type(events, "interrupt.minted")) == 1
            (resumed,) = of_type(events, "interrupt.resumed")
            assert resumed.actor == "alice" and resumed.data["response"] == {"approved": True}
            assert len(ledger.issued) == 1
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


@pytest.mark.parametrize("driver", DRIVERS)
async def test_stream_and_astream_record_after_the_stream_ends(migrated_url: str, driver: str) -> None:
    """gate.stream / gate.astream yield the graph's own chunks, then record the interrupt."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        config = config_for("t-stream")
        if driver == "ainvoke":
            chunks = [c async for c in gate.gateway.astream({}, config)]
        else:
            chunks = list(gate.gateway.stream({}, config))
        assert any("__interrupt__" in c for c in chunks)
        (opened,) = await gate.open("t-stream")
        assert opened["name"] == "wire_approval"


@pytest.mark.parametrize("waker", [True, False], ids=["waker", "no-waker"])
@pytest.mark.parametrize("consumed", [True, False], ids=["consumed", "not-consumed"])
async def test_a_claim_left_by_a_dead_process_is_settled_by_the_next_sweep(
    migrated_url: str, consumed: bool, waker: bool
) -> None:
    """A gateway that claimed and died: consumed (seen by the waker): resumed; else outcome_unknown, never not_taken (SPEC §12)."""
    from datetime import UTC, datetime, timedelta

    from freezegun import freeze_time
    from langgraph.types import Command

    from symfonic_store import InterruptOutcomeUnknownError

    async with gate_for(migrated_url, "invoke", node_graph) as gate:
        (paused,) = (await gate.invoke({}, "t-dead"))["__interrupt__"]
        gate.store.claim("t-dead", paused.id, {"approved": True}, actor="alice")  # then the process died
        if consumed:  # ... after LangGraph took the answer
            gate.gateway.graph.invoke(Command(resume={paused.id: {"approved": True}}), config_for("t-dead"))
        wake = {"on_expired": gate.gateway.waker()} if waker else {}
        assert gate.store.sweep(**wake).claims_settled == []  # within the lease
        with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
            report = gate.store.sweep(**wake)
            again = gate.store.sweep(**wake)
        shown_taken = consumed and waker
        outcome = "resumed" if shown_taken else "outcome_unknown"
        assert report.claims_settled == [("t-dead", paused.id, outcome)]
        assert again.claims_settled == []  # recorded once
        events = await gate.history("t-dead")
        if shown_taken:
            (resumed,) = of_type(events, "interrupt.resumed")
            assert resumed.actor == "alice" and gate.wires.sent == [999]
            return
        (unknown,) = of_type(events, "interrupt.resume_rejected")
        assert unknown.actor == "alice" and unknown.data["why"] == "outcome_unknown"
        assert unknown.data["detected_by"] == "sweep"
        assert of_type(events, "interrupt.resumed") == []
        with pytest.raises(InterruptOutcomeUnknownError) as refused:
            await gate.answer("t-dead", paused.id, {"approved": True}, "bob")
        assert refused.value.claimant == "alice" and "settle" in str(refused.value)
        (opened,) = await gate.open("t-dead")
        assert opened["outcome_unknown"] is True and opened["claimed_by"] == "alice"
        assert gate.wires.sent == ([999] if consumed else [])  # the refused answer ran nothing


@pytest.mark.parametrize("driver", DRIVERS)
async def test_expired_per_call_approvals_are_rejected_in_the_requests_own_schema(migrated_url: str, driver: str) -> None:
    """Per-call HITL: each expired ToolApprovalRequest is answered with a reject its response_schema accepts."""
    async with gate_for(migrated_url, driver, hitl_agent, 300, 400, mode="per_call") as gate:
        await gate.invoke({"messages": [("user", "pay")]}, "t-exp-per-call")
        assert len(await gate.open("t-exp-per-call")) == 2
        report = await _sweep(gate)
        assert len(report.expired) == 2 and report.wake_failures == []
        state = await gate.state("t-exp-per-call")
        assert not state.interrupts and gate.wires.sent == []
        assert sum("expired: ttl" in str(m.content) for m in state.values["messages"]) == 2


@pytest.mark.parametrize("driver", DRIVERS)
async def test_invoke_none_through_the_gateway_never_runs_past_a_breakpoint(migrated_url: str, driver: str) -> None:
    """gate.invoke(None) at a breakpoint: refused while open (the attempt recorded), refused once rejected; nothing ships."""
    async with gate_for(migrated_url, driver, breakpoint_graph) as gate:
        await gate.invoke({}, "t-bp-none")
        (opened,) = await gate.open("t-bp-none")
        with pytest.raises(InvalidInputError, match="paused at breakpoint"):
            await gate.invoke(None, "t-bp-none", actor="eve")
        assert gate.wires.sent == []
        (attempt,) = of_type(await gate.history("t-bp-none"), "interrupt.resume_rejected")
        assert attempt.actor == "eve" and attempt.data["why"] == "not_taken"
        await gate.answer("t-bp-none", opened["interrupt_id"], {"approved": False}, "bob")
        with pytest.raises(InterruptAlreadyResolvedError):
            await gate.invoke(None, "t-bp-none", actor="eve")
        with pytest.raises(InvalidInputError):
            await gate.invoke(None, "t-bp-none")
        assert gate.wires.sent == []
        assert (await gate.state("t-bp-none")).next == ("wire",)


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_woken_graph_that_pauses_again_is_recorded(migrated_url: str, driver: str) -> None:
    """After a wake-up the graph stops at a breakpoint: that pause is open in the store, and an expired one stays shut."""
    async with gate_for(migrated_url, driver, approve_then_ship_graph) as gate:
        await gate.invoke({}, "t-wake-bp")
        await _sweep(gate)  # expires the interrupt, wakes the graph: it stops before "ship"
        (opened,) = await gate.open("t-wake-bp")
        assert opened["breakpoint"] is True and opened["payload"] == {"next": ["ship"]}
        await _sweep(gate)  # the breakpoint expires in turn; nothing runs
        assert await gate.open("t-wake-bp") == []
        with pytest.raises(InterruptExpiredError):
            await gate.invoke(None, "t-wake-bp", actor="eve")
        assert gate.wires.sent == []
