"""A seed marker answered over HTTP, and the ``--graph`` waiting on it run (SPEC §9).

``store.resume`` admits the answer and returns the command that resumes the graph. When
one of the server's ``--graph`` graphs holds the thread in its checkpointer and waits
on that marker, the server runs it with that command, once: it claims the run first
(``store.claim_marker_run``, decided by the database as a LangGraph interrupt's claim
is), admits the answer, looks again whether the graph still waits on the marker (an
earlier identical answer may just have run it), runs it through the graph's gateway,
and drops the claim. Without such a graph the answer is only admitted, and the
application resumes its graph with the command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import tenancy
from .principal import Principal

if TYPE_CHECKING:
    from ..langgraph.gateway import InterruptGateway
    from ..store import InterruptStore

APPLICATION_RESUMES = (
    "no --graph of this server waits on this marker: the application resumes its graph "
    "with the admitted value (`resume`, Command(resume=...))"
)
"""What a marker's 200 says when no ``--graph`` of the server holds its thread."""
RAN_ALREADY = (
    "a --graph of this server holds the thread and no longer waits on this marker: "
    "an earlier answer ran it"
)
"""What it says when one holds the thread but waits on the marker no longer."""
_APPLICATION = {"graph": None, "note": APPLICATION_RESUMES}


@dataclass(frozen=True, slots=True)
class MarkerAnswer:
    """What answering a marker did: the command's ``resume`` value, and what the 200
    says beyond it (``said``): the ``graph`` that ran it and what the thread waits on
    now (``waiting``), or ``graph: null`` and a ``note`` that the application resumes it."""

    resume: Any
    said: dict[str, Any] = field(default_factory=lambda: dict(_APPLICATION))


def _waits(gate: InterruptGateway, thread_id: str, interrupt_id: str) -> bool | None:
    """Does ``gate``'s graph wait on the marker ``interrupt_id``? None: its checkpointer
    does not hold the thread; False: it holds it, waiting on something else or nothing."""
    from ..langgraph.waiting import marker_interrupt, waiting_on
    from ..langgraph.wakers import holds

    snapshot = gate.graph.get_state({"configurable": {"thread_id": thread_id}})
    if not holds(snapshot):
        return None
    return marker_interrupt(waiting_on(snapshot), interrupt_id) is not None


def waiting_gate(
    gateways: Mapping[str, InterruptGateway], thread_id: str, interrupt_id: str, graph: Any = None
) -> tuple[InterruptGateway | None, bool]:
    """The gateway whose graph waits on the marker (or None), and whether any of them
    holds the thread; the graph the mint names (``graph``), if any, is asked first."""
    held = False
    for gate in sorted(gateways.values(), key=lambda g: g.name != graph):
        waits = _waits(gate, thread_id, interrupt_id)
        if waits:
            return gate, True
        held = held or waits is False
    return None, held


def answer_marker(
    store: InterruptStore,
    gateways: Mapping[str, InterruptGateway],
    record: Mapping[str, Any],
    principal: Principal,
    thread_id: str,
    interrupt_id: str,
    response: Any,
    approvers: tuple[str, ...] = (),
) -> MarkerAnswer:
    """Admit ``principal``'s answer to the seed marker (minted as ``record`` says), and
    run the ``--graph`` waiting on it; ``approvers``: a quorum's (SPEC §15).

    Raises what ``store.resume`` raises (refused and recorded), and
    :class:`~symfonic_store.InterruptInProgressError` when another answer holds the run
    (recorded); the graph's own errors propagate (the answer stays admitted).
    """
    actor, by = principal.name, principal.authenticated_by
    who: dict[str, Any] = {"actor": actor, "authenticated_by": by, "approvers": approvers}
    gate, held = waiting_gate(gateways, thread_id, interrupt_id, record.get("graph"))
    if gate is None:
        command = store.resume(thread_id, interrupt_id, response, **who)
        return MarkerAnswer(command.resume, {"graph": None, "note": RAN_ALREADY} if held else dict(_APPLICATION))
    store.claim_marker_run(thread_id, interrupt_id, response, actor=actor, authenticated_by=by)
    try:
        command = store.resume(thread_id, interrupt_id, response, **who)
        if not _waits(gate, thread_id, interrupt_id):
            # Run meanwhile by an identical answer (admitted once, idempotently).
            return MarkerAnswer(command.resume, {"graph": None, "note": RAN_ALREADY})
        # The gateway admits the answer again (the same one: no new event) and runs the
        # graph with it in LangGraph's map form, then records where the graph paused next.
        gate.answer(thread_id, interrupt_id, response, **who)
    finally:
        # Dropped even when the graph raised: what comes after the marker runs only once
        # the marker's own step committed, and then no graph waits on it any more.
        store.end_marker_run(thread_id, interrupt_id)
    waiting = [
        {"interrupt_id": o["interrupt_id"], "name": o["name"]}
        for o in tenancy.visible_open(store, principal, thread_id, store.open_interrupts(thread_id))
    ]
    return MarkerAnswer(command.resume, {"graph": gate.name, "waiting": waiting})
