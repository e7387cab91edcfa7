"""SPEC §17, bounded reads, the service's side (server/approvals.py, as ``GET
/api/interrupts/{thread}/{id}`` and ``POST .../answer`` call it): one interrupt shown, a
quorum's votes, and the answer to a LangGraph interrupt through its ``--graph`` read the
interrupt's own events and the projection, never the thread's whole history -- what the
database touches (tests/bounded_rig.py) on a thread of 24 events in a store of ~20 threads
and on one of 2,400 in a store of ~2,000 does not grow, and no plan scans the log or the
projection.

(The store's answers and sweeps: tests/store/test_bounded_reads.py; the store's reads of one
interrupt, the event stream and a notifier batch: tests/store/test_read_bounds.py.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bounded_rig import SCALE, Probe, ThreadSpec, assert_bounded, crowded_thread, load, probe
from langgraph.checkpoint.memory import InMemorySaver
from native_graphs import Wires, node_graph

from symfonic_store import InterruptGateway, InterruptStore
from symfonic_store.policy import Policy
from symfonic_store.server.approvals import Approvals, interrupt_digest
from symfonic_store.server.principal import Principal

PADDING = 20
HISTORY = 24
FIRST = f"i-{1:012x}"
"""The first interrupt of a bulk-loaded thread: minted, routed, resumed long ago."""
POLICY = Policy.from_dict({
    "approval_required": {"roles": ["finance"], "quorum": 2},
    "*": {"roles": ["finance", "approver"]},
})
ACME = Principal("ann", frozenset({"approver"}), tenants=frozenset({"acme"}))
FIN = [Principal(f"fin{n}", frozenset({"finance"}), tenants=frozenset({"acme"})) for n in (1, 2, 3)]


def _fixture(store: InterruptStore, tag: str, scale: int) -> str:
    """Padding threads and one acme thread of ``HISTORY * scale`` events whose last marker
    waits; its id."""
    load(store, [ThreadSpec(f"pad-{tag}", PADDING * scale, 6, tenant="globex"),
                 ThreadSpec(tag, 1, HISTORY * scale, "pending", tenant="acme")])
    return f"{tag}-0000000"


def _shown(store: InterruptStore, thread_id: str) -> Probe:
    """``GET /api/interrupts/{thread}/{id}`` of an interrupt answered long ago and of the one
    open (assigned, voted on), as everyone and as a principal kept to acme sees them."""
    approvals = Approvals(store, policy=POLICY)
    (waiting,) = store.open_interrupts(thread_id)
    open_id = waiting["interrupt_id"]
    store.assign(thread_id, open_id, to="role:finance", actor="lead")
    store.vote(thread_id, open_id, "approve", {"approved": True}, actor="fin9")
    with probe(store) as seen:
        for who in (None, ACME):
            old = approvals.interrupt(thread_id, FIRST, who)
            assert old is not None and old["status"] == "resumed" and len(old["events"]) == 3
            now = approvals.interrupt(thread_id, open_id, who)
            assert now is not None and now["status"] == "pending" and len(now["votes"]) == 1
    return seen


def test_one_interrupt_shown_reads_its_events_not_the_threads(store: InterruptStore) -> None:
    """One interrupt as the API shows it (its events, status, assignment, votes), for an
    unscoped reader and one kept to a tenant, on a thread 100 times longer: bounded."""
    small = _shown(store, _fixture(store, "t", 1))
    large = _shown(store, _fixture(store, "u", SCALE))
    assert_bounded(small, large)


def _quorum(store: InterruptStore, thread_id: str) -> Probe:
    """Two principals of a quorum of two answer the thread's waiting marker through the
    service: the first answer is a vote (the same principal's again: 409), the second
    completes the quorum and resumes it; then a principal the policy refuses (403, recorded)
    and a third voter (409: who won)."""
    approvals = Approvals(store, policy=POLICY)
    (waiting,) = store.open_interrupts(thread_id)
    interrupt_id = waiting["interrupt_id"]
    digest = interrupt_digest(thread_id, interrupt_id, waiting["payload"])
    with probe(store) as seen:
        first = approvals.answer(FIN[0], thread_id, interrupt_id, {"approved": True}, digest)
        again = approvals.answer(FIN[0], thread_id, interrupt_id, {"approved": True}, digest)
        second = approvals.answer(FIN[1], thread_id, interrupt_id, {"approved": True}, digest)
        refused = approvals.answer(ACME, thread_id, interrupt_id, {"approved": True}, digest)
        late = approvals.answer(FIN[2], thread_id, interrupt_id, {"approved": True}, digest)
    assert refused.status == 403, refused.body
    assert (first.status, first.body["outcome"]) == (200, "voted"), first.body
    assert again.status == 409, again.body
    assert (second.status, second.body["outcome"]) == (200, "resumed"), second.body
    assert second.body["approvers"] == ["fin1", "fin2"]
    assert late.status == 409 and late.body["resolved_by"] == "fin2", late.body
    return seen


def test_a_quorums_votes_read_the_interrupt_not_the_thread(store: InterruptStore) -> None:
    """A vote, a second vote of the same principal (409), the vote that completes a quorum
    of two and resumes the marker, a refused answer and a vote after it (409, who won), on
    a thread 100 times longer: bounded."""
    small = _quorum(store, _fixture(store, "t", 1))
    large = _quorum(store, _fixture(store, "u", SCALE))
    assert_bounded(small, large)


def _native_answer(store: InterruptStore, thread_id: str) -> Probe:
    """A LangGraph interrupt minted on the thread by its graph (run through the gateway),
    answered through the service's ``--graph``: claimed, the graph resumed, confirmed; the
    thread's interrupt shown before and after; a second answer refused as answered."""
    wires = Wires()
    gate = InterruptGateway(node_graph(InMemorySaver(), wires), store)
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "actor": "agent"}}
    gate.invoke({}, config)
    (native,) = [o for o in store.open_interrupts(thread_id) if o["source"] == "langgraph"]
    interrupt_id = native["interrupt_id"]
    digest = interrupt_digest(thread_id, interrupt_id, native["payload"])
    approvals = Approvals(store, gateways={gate.name: gate})
    who = Principal("carol")
    with probe(store) as seen:
        shown = approvals.interrupt(thread_id, interrupt_id)
        answered = approvals.answer(who, thread_id, interrupt_id, {"approved": True}, digest)
        again = approvals.answer(who, thread_id, interrupt_id, {"approved": True}, digest)
        after = approvals.interrupt(thread_id, interrupt_id)
    assert shown is not None and shown["status"] == "pending" and shown["in_progress"] is False
    assert (answered.status, answered.body["outcome"]) == (200, "resumed"), answered.body
    assert again.status == 409, again.body
    assert after is not None and after["status"] == "resumed"
    assert wires.sent == [999]
    return seen


def test_a_langgraph_interrupts_answer_reads_the_interrupt_not_the_thread(store: InterruptStore) -> None:
    """The answer to a LangGraph interrupt through its graph's gateway, on a thread whose
    earlier history (24 events, then 2,400) is another interrupt's: bounded."""
    small = _native_answer(store, _fixture(store, "t", 1))
    large = _native_answer(store, _fixture(store, "u", SCALE))
    assert_bounded(small, large)


CROWD = 8
"""Other interrupts of the crowded thread in the small fixture, of each kind (the large one:
100 times): seed markers escalated and answered, LangGraph interrupts still open."""
ESCALATING = Policy.from_dict({
    "approval_required": {"roles": ["finance"], "escalate_after": 60, "escalate_to": ["lead"]},
    "*": {"roles": ["finance"]},
})


def _crowded(store: InterruptStore, tag: str, scale: int) -> str:
    thread_id = f"crowd-{tag}"
    load(store, [ThreadSpec(f"pad-{tag}", PADDING * scale, 6)],
         extra=crowded_thread(thread_id, CROWD * scale, CROWD * scale, start=datetime.now(UTC)))
    return thread_id


def _crowd_reads(store: InterruptStore, thread_id: str) -> Probe:
    """One open LangGraph interrupt and the waiting marker shown; the marker answered by a
    ``lead``, whom the policy admits only because the sweep escalated it."""
    approvals = Approvals(store, policy=ESCALATING)
    lead = Principal("lea", frozenset({"lead"}))
    (marker,) = store.open_interrupts(thread_id, interrupt_id="i-last")
    digest = interrupt_digest(thread_id, "i-last", marker["payload"])
    with probe(store) as seen:
        native = approvals.interrupt(thread_id, f"n-{3:07d}")
        waiting = approvals.interrupt(thread_id, "i-last")
        answered = approvals.answer(lead, thread_id, "i-last", {"approved": True}, digest)
    assert native is not None and native["status"] == "pending" and native["in_progress"] is False
    assert waiting is not None and waiting["escalated_to"] == ["lead"]
    assert (answered.status, answered.body["outcome"]) == (200, "resumed"), answered.body
    return seen


def test_a_thread_crowded_with_other_interrupts_costs_one_interrupts_reads_nothing(
    store: InterruptStore,
) -> None:
    """A thread of 8 escalated markers and 8 open LangGraph interrupts, then of 800 and 800:
    showing one of its open LangGraph interrupts reads that one's row and claim (not the
    thread's open interrupts), and answering its escalated marker asks whether that marker
    was escalated (not every escalation of the thread): bounded."""
    small = _crowd_reads(store, _crowded(store, "s", 1))
    large = _crowd_reads(store, _crowded(store, "l", SCALE))
    assert len(store.open_interrupts("crowd-l")) == CROWD * SCALE
    assert_bounded(small, large)
