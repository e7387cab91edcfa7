"""A seed-marker graph the service resumes (``serve --graph``, SPEC §9 wave 4) that pauses
again at a breakpoint it declares: the service's own marker-run claim is no answer in
flight, so the breakpoint is recorded and shown as what the thread waits on next (SPEC §8)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from symfonic_store import InterruptGateway
from symfonic_store.demo import RefundLedger, build_agent_graph, refund_tools
from symfonic_store.server.marker_graphs import answer_marker
from symfonic_store.server.principal import Principal


def test_a_breakpoint_after_the_marker_is_recorded_when_the_service_resumes_it(store: Any) -> None:
    ledger = RefundLedger()
    graph = build_agent_graph(store, checkpointer=InMemorySaver(), tools=refund_tools(ledger))
    graph = graph.builder.compile(checkpointer=graph.checkpointer, interrupt_after=["interrupt"], name="refund")
    gate = InterruptGateway(graph, store)
    cfg = {"configurable": {"thread_id": "t-bp", "actor": "carol"}}
    gate.invoke({"messages": [HumanMessage("Please refund $420 to order 1181.")]}, cfg)
    [marker] = store.open_interrupts("t-bp")
    record = store.interrupt_record("t-bp", marker["interrupt_id"])

    said = answer_marker(
        store, {gate.name: gate}, record, Principal("alice", authenticated_by="service:tokens"),
        "t-bp", marker["interrupt_id"], {"approved": True},
    ).said

    assert graph.get_state(cfg).next  # paused after the marker's node, as declared
    waiting = [o["interrupt_id"] for o in store.open_interrupts("t-bp")]
    assert len(waiting) == 1 and waiting[0].startswith("bp-")
    assert said["graph"] == gate.name and [w["interrupt_id"] for w in said["waiting"]] == waiting
    [answered] = [r for r in store.audit(thread_id="t-bp") if r.interrupt_id == marker["interrupt_id"]]
    assert (answered.outcome, answered.actor, answered.attempts) == ("resumed", "alice", [])
