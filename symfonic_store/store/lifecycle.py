"""The rules of an interrupt's life: mint, route decision, resume, expiry.

Each function runs inside a write transaction on a synchronous ``Connection`` (both
stores call them; the asyncio store through ``run_sync``) and appends through a
:class:`~symfonic_store.store.append.ThreadWriter`. Inputs are already validated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from ..db.statements.log import interrupt_events, was_minted
from ..decisions import decide
from ..errors import (
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStateError,
    InvalidInputError,
    ProjectionMismatchError,
    ResumeNotAllowedError,
    UnknownInterruptError,
)
from ..events import EXPIRED, MINTED, RESUME_REJECTED, RESUMED, ROUTE_DECIDED, StoredEvent
from ..projection_gaps import REBUILD_HINT, missing_row
from ..protocol import PENDING_KEY
from . import rules as rule
from .append import Refusal, ThreadWriter, flush
from .rules import ApproverPolicy as ApproverPolicy  # where the store's front doors import it
from .rules import Rules as Rules
from .rules import payload_approvers as payload_approvers

E = TypeVar("E", bound=InterruptStateError)

# --- mint --------------------------------------------------------------------------


def mint_into(
    w: ThreadWriter,
    marker: dict[str, Any],
    actor: str | None,
    encoded: Mapping[str, str] | None = None,
    tenant: str | None = None,
) -> bool:
    """Record ``interrupt.minted`` unless this (thread, interrupt) was seen before (I4).

    A different interrupt still pending on the thread is expired first, reason
    ``superseded`` (I5), in the same transaction. ``encoded``: the marker's payload
    already encoded (see :func:`symfonic_store.validation.marker_encoded`).
    """
    interrupt_id = marker["interrupt_id"]
    if w.holds_pending(interrupt_id):
        return False
    # A thread with no projection row has no events (I6), so nothing to look up.
    if w.was_minted(interrupt_id):
        return False
    previous = w.state.pending_interrupt_id
    if previous is not None:
        w.append(
            EXPIRED,
            interrupt_id=previous,
            actor=actor,
            data={"reason": "superseded", "detected_by": "mint", "superseded_by": interrupt_id},
        )
    w.append(
        MINTED,
        interrupt_id=interrupt_id,
        run_id=marker["run_id"],
        actor=actor,
        data=marker,
        encoded=encoded,
        tenant=tenant,
    )
    return True


def mint_settled(conn: Connection, thread_id: str, interrupt_id: str) -> tuple[bool, bool]:
    """Read-only: ``(True, False)`` when the mint is already recorded, so :func:`mint`
    would write nothing (a recorded mint stays recorded: the log is append-only)."""
    return was_minted(conn, thread_id, interrupt_id), False


def mint(
    conn: Connection,
    thread_id: str,
    marker: dict[str, Any],
    actor: str | None,
    encoded: Mapping[str, str] | None = None,
    tenant: str | None = None,
) -> bool:
    w = ThreadWriter(conn, thread_id, probe_mint=marker["interrupt_id"])
    minted = mint_into(w, marker, actor, encoded, tenant)
    flush(conn, [w])
    return minted


# --- route decisions ---------------------------------------------------------------


def record_route(
    conn: Connection,
    thread_id: str,
    route: str,
    *,
    run_id: str | None,
    reason: str | None,
    interrupt_id: str | None,
) -> None:
    w = ThreadWriter(conn, thread_id)
    looked_at = interrupt_id if interrupt_id is not None else w.state.pending_interrupt_id
    w.append(
        ROUTE_DECIDED,
        interrupt_id=looked_at,
        run_id=run_id,
        data={"route": route, "interrupt_id": looked_at, "reason": reason},
    )
    flush(conn, [w])


def record_router_decision(
    conn: Connection,
    thread_id: str,
    state: dict[str, Any],
    route: str,
    *,
    marker: dict[str, Any] | None,
    ttl_seconds: float | None,
    encoded: Mapping[str, str] | None = None,
    tenant: str | None = None,
    actor: str | None = None,
) -> None:
    """What the router saw, in one transaction: mint if unseen (for ``tenant``, asked by
    ``actor``), stale expiry once, route."""
    w = ThreadWriter(conn, thread_id, probe_mint=None if marker is None else marker["interrupt_id"])
    interrupt_id = None
    reason = None
    if marker is not None:
        interrupt_id = marker["interrupt_id"]
        mint_into(w, marker, actor, encoded, tenant)
        stale = rule.stale(state.get(PENDING_KEY), state.get("run_id"), ttl_seconds)
        reason = None if stale is None else stale.reason
        if reason is not None and w.state.pending_interrupt_id == interrupt_id:
            w.append(
                EXPIRED,
                interrupt_id=interrupt_id,
                run_id=state.get("run_id"),
                data={"reason": reason, "detected_by": "router"},
            )
    w.append(
        ROUTE_DECIDED,
        interrupt_id=interrupt_id,
        run_id=state.get("run_id"),
        data={"route": route, "interrupt_id": interrupt_id, "reason": reason},
    )
    flush(conn, [w])


# --- resume ------------------------------------------------------------------------


def refuse(
    w: ThreadWriter,
    interrupt_id: str,
    response: Any,
    actor: str | None,
    why: str,
    error: InterruptStateError,
    response_json: str | None = None,
    **extra: Any,
) -> Refusal:
    """Record a refused answer (``interrupt.resume_rejected``); the caller raises ``error``
    once the record is committed. ``extra`` adds data keys (``via``, ``claimant``)."""
    w.append(
        RESUME_REJECTED,
        interrupt_id=interrupt_id,
        actor=actor,
        data={"response": response, "why": why, **extra},
        encoded=None if response_json is None else {"response": response_json},
    )
    flush(w.conn, [w])
    return Refusal(error)


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer being judged: who answers which interrupt with what, and how a refusal
    of it is told and recorded (``data``: keys added to the record, e.g. ``via``)."""

    w: ThreadWriter
    interrupt_id: str
    response: Any
    actor: str | None
    response_json: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"interrupt {self.interrupt_id!r} on thread {self.w.thread_id!r}"

    def error(self, kind: type[E], message: str, **fields: Any) -> E:
        """The error telling the refusal, naming the thread and the interrupt."""
        return kind(message, thread_id=self.w.thread_id, interrupt_id=self.interrupt_id, **fields)

    def refuse(self, why: str, error: InterruptStateError, **data: Any) -> Refusal:
        """Record the refusal (:func:`refuse`); the caller raises ``error`` after commit."""
        return refuse(
            self.w, self.interrupt_id, self.response, self.actor, why, error,
            response_json=self.response_json, **self.data, **data,
        )

    def refuse_ended(
        self, over: rule.Refused, ending: StoredEvent, *, answered: str, expired_tail: str = ""
    ) -> Refusal:
        """Refuse an answer to an interrupt that ended (:func:`.rules.ended`), told in the
        path's words (``answered``: "resumed" or "answered")."""
        where = self.where
        if over.why == rule.ALREADY_RESOLVED:
            return self.refuse(over.why, self.error(
                InterruptAlreadyResolvedError,
                f"{where} was already {answered} by {ending.actor!r} at {rule.when(ending)}; "
                "this answer was not applied and has been recorded as rejected",
            ))
        return self.refuse(over.why, self.error(
            InterruptExpiredError,
            f"{where} expired at {rule.when(ending)} (reason: {over.reason}); the answer was "
            f"not applied and has been recorded{expired_tail}",
            reason=str(over.reason),
        ))

    def refuse_stale(self, stale: rule.Refused, *, expired_tail: str = "") -> Refusal:
        """Expire the stale interrupt (:func:`.rules.stale`, ``detected_by: resume``) and
        refuse the answer, in one transaction."""
        self.w.append(
            EXPIRED, interrupt_id=self.interrupt_id, data={"reason": stale.reason, "detected_by": "resume"}
        )
        return self.refuse(stale.why, self.error(
            InterruptExpiredError,
            f"{self.where} is stale (reason: {stale.reason}) and is now expired; the answer was "
            f"not applied and has been recorded as rejected{expired_tail}",
            reason=stale.reason,
        ))


def resume(
    conn: Connection,
    rules: Rules,
    thread_id: str,
    interrupt_id: str,
    response: dict[str, Any],
    actor: str | None,
    *,
    from_node: bool = False,
    response_json: str | None = None,
    authenticated_by: str | None = None,
    approvers: tuple[str, ...] = (),
) -> dict[str, Any] | Refusal:
    """Admit an answer exactly once, or record why not (I10). Returns the admitted response.

    From the store's front door (``from_node=False``) an identical repeat (same actor,
    same response) returns the same response without a new event. From the node
    (``from_node=True``) an answer equal to the admitted one is the graph applying what
    the store admitted, and an answer equal to the expiry wake-up of an expired
    interrupt is handed to the agent; neither records anything. The rules asked, in
    this order, are those of :mod:`.rules`.
    """
    w = ThreadWriter(conn, thread_id)
    answer = Answer(w, interrupt_id, response, actor, response_json)
    where = answer.where
    if w.state.pending_interrupt_id == interrupt_id:
        # The projection says it is minted and has no ending (I6): no need to look.
        return _admit_pending(answer, rules, authenticated_by, approvers)
    minted, ending = rule.mint_and_ending(interrupt_events(conn, thread_id, interrupt_id))
    if rule.unknown(minted) is not None:
        if not w.existed:
            gap = missing_row(conn, thread_id)
            if gap is not None:  # the log has the thread: its projection row went missing
                return Refusal(gap)
            # No projection row and no events (I6): a mistyped thread id. Recording
            # the refusal would create the thread out of nothing (I10): refuse only.
            return Refusal(
                answer.error(
                    UnknownInterruptError,
                    f"{where} is unknown: thread {thread_id!r} has no events at all; check "
                    "the thread id (`symfonic-store pending` lists what is waiting); "
                    "nothing was recorded",
                )
            )
        return answer.refuse(rule.UNKNOWN, answer.error(
            UnknownInterruptError,
            f"{where} is unknown: nothing was minted with that id; check the thread and "
            "interrupt ids (`symfonic-store pending` lists what is waiting)",
        ))
    assert minted is not None  # rule.unknown admitted it
    over = rule.ended(ending)
    if over is not None and ending is not None:
        if rule.answered_again(ending, response, actor, from_node=from_node):
            return response
        return answer.refuse_ended(
            over, ending, answered="resumed",
            expired_tail=" as rejected: ask again with a new interrupt",
        )
    if rule.wrong_path(minted, native=False):
        # LangGraph's own interrupt: admitting it here would record an answer before
        # LangGraph consumed it. The gateway admits it in two phases.
        raise InvalidInputError(
            "interrupt_id",
            f"{where} is a LangGraph interrupt, not a seed marker: answer it with "
            "InterruptGateway(graph, store).answer(...) (or `resume ... --graph MODULE:ATTR`)",
        )
    # Minted, no ending in the log, yet the projection (which holds every open marker,
    # I5/I6) does not hold it pending: the two disagree -- e.g. its ending was deleted
    # from the end of the thread. The log can no longer say whether it was answered, so
    # nothing is applied, and nothing is chained onto a head the events may not reach.
    # Without a projection row at all, the row is what went missing (the log has the
    # mint): a rebuild restores it from the log.
    cause, remedy = (
        ("the thread has no projection row", REBUILD_HINT)
        if not w.existed
        else ("events may have been removed from the end of the thread", "run `symfonic-store verify`")
    )
    return Refusal(
        ProjectionMismatchError(
            f"{where} has no ending in the event log, but the projection does not hold it "
            f"pending: the projection disagrees with the log ({cause}). The answer was not "
            f"applied and nothing was recorded: {remedy}",
            thread_ids=(thread_id,),
        )
    )


def node_resume_settled(
    conn: Connection, thread_id: str, interrupt_id: str, response: dict[str, Any]
) -> tuple[bool, dict[str, Any] | None]:
    """Read-only: ``(True, response)`` when :func:`resume` from the node would return
    ``response`` without writing -- the interrupt already ended with exactly this
    answer admitted, or expired and this is its wake-up. An ending is final, so what
    this finds stays true; anything else is left to the write path."""
    minted, ending = rule.mint_and_ending(interrupt_events(conn, thread_id, interrupt_id))
    if minted is None or ending is None:
        return False, None
    return rule.answered_again(ending, response, None, from_node=True), response


def _admit_pending(
    answer: Answer, rules: Rules, authenticated_by: str | None = None, approvers: tuple[str, ...] = ()
) -> dict[str, Any] | Refusal:
    """Admit an answer to a minted interrupt without an ending, unless stale or refused.

    The decision is recorded with it (SPEC §12); a decisions function that fails refuses
    the answer with :class:`InvalidInputError`, and the transaction writes nothing."""
    w, where, actor = answer.w, answer.where, answer.actor
    response: dict[str, Any] = answer.response
    # Still pending: is it stale by the store's TTL or the thread's run_id? (A read-only
    # view of the state: no copy of the marker needed.)
    stale = rule.stale(w.state.pending, w.state.run_id, rules.ttl_seconds)
    if stale is not None:
        return answer.refuse_stale(stale, expired_tail=": ask again with a new interrupt")
    marker = w.state.pending or {}
    refused = rule.not_allowed(rules.approvers, w.thread_id, marker, actor)
    if refused is not None:
        return answer.refuse(refused.why, answer.error(
            ResumeNotAllowedError,
            f"{actor!r} may not resume {where}: the approvers policy refuses it; "
            "the attempt has been recorded",
        ))
    data: dict[str, Any] = {
        "response": response,
        **decide(rules.decisions, marker.get("name"), marker.get("payload"), response),
    }
    if authenticated_by is not None:
        data["authenticated_by"] = authenticated_by
    if approvers:
        data["approvers"] = list(approvers)  # a quorum's (SPEC §15)
    w.append(
        RESUMED,
        interrupt_id=answer.interrupt_id,
        actor=actor,
        data=data,
        encoded=None if answer.response_json is None else {"response": answer.response_json},
    )
    flush(w.conn, [w])
    return response


def record_refusal(
    conn: Connection,
    thread_id: str,
    interrupt_id: str,
    response: Any,
    actor: str,
    *,
    why: str,
    error: str,
    via: str,
) -> None:
    """Record an answer refused before it reached the rules above (the service's policy).

    The refusal is decided by the caller (it knows the authenticated principal and its
    roles, which the store does not); the store only makes it part of the record, with
    the principal as the actor. An interrupt never minted on the thread is refused with
    nothing written, as :func:`resume` refuses a mistyped thread id (I10).
    """
    w = ThreadWriter(conn, thread_id)
    if not w.existed and (gap := missing_row(conn, thread_id)) is not None:
        raise gap  # the log has the thread: its projection row went missing
    if not w.existed or not was_minted(conn, thread_id, interrupt_id):
        raise UnknownInterruptError(
            f"interrupt {interrupt_id!r} on thread {thread_id!r} is unknown: nothing was "
            "minted with that id; nothing was recorded",
            thread_id=thread_id, interrupt_id=interrupt_id,
        )
    w.append(
        RESUME_REJECTED,
        interrupt_id=interrupt_id,
        actor=actor,
        data={"response": response, "why": why, "error": error, "via": via},
    )
    flush(conn, [w])


# --- expire ------------------------------------------------------------------------


def expire(
    conn: Connection,
    thread_id: str,
    interrupt_id: str,
    *,
    reason: str,
    actor: str | None,
) -> None:
    """Declare a pending interrupt dead by API call (``detected_by: api``)."""
    w = ThreadWriter(conn, thread_id)
    where = f"interrupt {interrupt_id!r} on thread {thread_id!r}"
    if w.state.pending_interrupt_id != interrupt_id:
        if not w.existed and (gap := missing_row(conn, thread_id)) is not None:
            raise gap  # the log has the thread: its projection row went missing
        history = interrupt_events(conn, thread_id, interrupt_id)
        ending = rule.mint_and_ending(history)[1]
        if not history:
            raise UnknownInterruptError(
                f"{where} is unknown: nothing was minted with that id",
                thread_id=thread_id, interrupt_id=interrupt_id,
            )
        if ending is not None and ending.type == RESUMED:
            raise InterruptAlreadyResolvedError(
                f"{where} was already resumed by {ending.actor!r} at {rule.when(ending)}; "
                "it cannot be expired",
                thread_id=thread_id, interrupt_id=interrupt_id,
            )
        raise InterruptExpiredError(
            f"{where} is already expired (reason: {ending.data.get('reason') if ending else None})",
            thread_id=thread_id, interrupt_id=interrupt_id,
            reason=None if ending is None else str(ending.data.get("reason")),
        )
    w.append(
        EXPIRED,
        interrupt_id=interrupt_id,
        actor=actor,
        data={"reason": reason, "detected_by": "api"},
    )
    flush(conn, [w])
