"""The rules an answer meets, each decided once for both paths that admit answers.

An answer reaches the store by one of two paths: the marker path
(:func:`~symfonic_store.store.lifecycle.resume`, the seed's ``_interrupt_pending``
markers) and the native path (:func:`~symfonic_store.store.admission.claim`,
LangGraph's own interrupts). Each rule below is the one decision both paths take: it
admits (``None``) or refuses with the word recorded as ``resume_rejected``'s ``why``
(and, for an expiry, its ``reason``). The paths keep their own order of asking -- their
ladders, spelled out in :data:`MARKER_LADDER` and :data:`NATIVE_LADDER` -- and their
own wording of the error; what a rule decides is the same on both:

- marker path: a marker pending on the thread meets :func:`stale`, then
  :func:`not_allowed`, then is admitted (its decision taken); any other id meets
  :func:`unknown`, :func:`ended` (resolved, then expired; :func:`answered_again` lets
  the identical repeat through), then :func:`wrong_path`; what is left is a projection
  that disagrees with the log.
- native path: a thread never written is unknown (nothing recorded); an interrupt not
  open meets :func:`wrong_path`, :func:`ended`, then :func:`unknown`; an open one meets
  :func:`held` (outcome unknown, then in progress), :func:`stale`, :func:`not_allowed`,
  then is claimed (its decision taken).

A new refusal rule is one function here, asked at its rung by each path it applies to,
and a case in ``tests/core/test_rules.py``.

Pure functions over what the caller has read; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..decisions import DecisionRule
from ..events import MINTED, RESUMED, StoredEvent
from ..projection import is_native_mint
from ..protocol import expired_resume_value, marker_staleness
from .settlement import OUTCOME_UNKNOWN

ApproverPolicy = Callable[[str, dict[str, Any], str | None], bool]
"""``policy(thread_id, marker, actor) -> bool``: may this actor resume this interrupt?"""


@dataclass(frozen=True, slots=True)
class Rules:
    """The store's settings that the rules consult."""

    ttl_seconds: float | None = None
    approvers: ApproverPolicy | None = None
    decisions: DecisionRule | None = None


def payload_approvers(thread_id: str, marker: dict[str, Any], actor: str | None) -> bool:
    """The built-in policy: ``payload["approvers"]``, when present, lists who may resume."""
    payload = marker.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("approvers"), list):
        return actor is not None and actor in payload["approvers"]
    return True


UNKNOWN: Final = "unknown"
ALREADY_RESOLVED: Final = "already_resolved"
EXPIRED: Final = "expired"
NOT_ALLOWED: Final = "not_allowed"
IN_PROGRESS: Final = "in_progress"


@dataclass(frozen=True, slots=True)
class Refused:
    """A rule's refusal: ``why`` as recorded, and an expiry's ``reason``."""

    why: str
    reason: str | None = None


def mint_and_ending(history: list[StoredEvent]) -> tuple[StoredEvent | None, StoredEvent | None]:
    """An interrupt's mint and its ending (the first event after it), from its history."""
    minted = next((e for e in history if e.type == MINTED), None)
    ending = next((e for e in history if e.type != MINTED), None)
    return minted, ending


def when(event: StoredEvent) -> str:
    """An event's moment as the refusals tell it."""
    return event.occurred_at.isoformat(timespec="seconds")


def unknown(minted: StoredEvent | None) -> Refused | None:
    """Nothing was minted with that id: refused ``unknown``."""
    return Refused(UNKNOWN) if minted is None else None


def ended(ending: StoredEvent | None) -> Refused | None:
    """The interrupt has an ending: resumed (``already_resolved``) or expired (``expired``,
    with the expiry's reason). An ending is final (I10)."""
    if ending is None:
        return None
    if ending.type == RESUMED:
        return Refused(ALREADY_RESOLVED)
    return Refused(EXPIRED, reason=str(ending.data.get("reason")))


def answered_again(
    ending: StoredEvent, response: Any, actor: str | None, *, from_node: bool
) -> bool:
    """Is this answer, to an interrupt that ended, what the ending already stands for?

    The identical repeat of the admitted answer (from the node, or by the same actor),
    or, from the node, the expiry's wake-up value: admitted again, recording nothing.
    """
    if ending.type == RESUMED:
        return bool(ending.data.get("response") == response) and (from_node or ending.actor == actor)
    return from_node and response == expired_resume_value(str(ending.data.get("reason")))


def wrong_path(minted: StoredEvent, *, native: bool) -> bool:
    """Is the mint of the other kind than the path asked (a marker answered as LangGraph's
    own interrupt, or the reverse)? The caller refuses with nothing written."""
    return is_native_mint(minted.data) is not native


def stale(
    marker: Any,
    run_id: str | None,
    ttl_seconds: float | None,
    *,
    breakpoint: bool = False,
    now: float | None = None,
) -> Refused | None:
    """A pending interrupt that is stale (SPEC §4 P3 then P4): another run's marker
    (``run_id``), or past the TTL (``ttl``); refused ``expired``, and the caller records
    the expiry (``detected_by: resume``) with the refusal. A breakpoint has no TTL."""
    if not marker or not isinstance(marker, Mapping):
        return None
    reason = marker_staleness(marker, run_id, None if breakpoint else ttl_seconds, now)
    return None if reason is None else Refused(EXPIRED, reason=reason)


def not_allowed(
    policy: ApproverPolicy | None, thread_id: str, marker: dict[str, Any], actor: str | None
) -> Refused | None:
    """The approvers policy refuses this actor: refused ``not_allowed``."""
    if policy is None or policy(thread_id, marker, actor):
        return None
    return Refused(NOT_ALLOWED)


def held(claim: Mapping[str, Any] | None, *, outcome_unknown: bool) -> Refused | None:
    """Another answer holds the interrupt (native path): ``outcome_unknown`` when its
    process stopped before anyone knew whether the graph took it, else ``in_progress``."""
    if claim is None:
        return None
    return Refused(OUTCOME_UNKNOWN if outcome_unknown else IN_PROGRESS)


# --- assignment and quorum (SPEC §15): what the service's answer path decides -----------

APPROVING: Final = ("approve", "accept")
"""The decisions whose votes count toward a quorum."""
VETOING: Final = "reject"


def vote_refusal(decision: str | None, needed: int | None) -> str | None:
    """Why an answer cannot be a vote toward a quorum of ``needed``: only an approving
    decision or a ``reject`` is one; None when it is (or there is no quorum)."""
    if needed is None or decision in (*APPROVING, VETOING):
        return None
    return (
        f"this interrupt is decided by a quorum of {needed}: a vote must approve, accept "
        f"or reject (this answer's decision: {decision!r}); nothing was written"
    )


def vote_decision(decided: Mapping[str, Any]) -> str | None:
    """The one decision an answer votes (what :func:`~symfonic_store.decisions.decide`
    found): a batch votes when its decisions agree, else None (not a vote)."""
    words = decided.get("decisions") or [decided.get("decision")]
    first = words[0]
    return str(first) if first is not None and len(set(words)) == 1 else None


def voted_before(votes: Sequence[Mapping[str, Any]], actor: str) -> bool:
    """Has ``actor`` voted already (one vote per principal)?"""
    return any(v.get("actor") == actor for v in votes)


def assignee_refusal(
    assignment: Mapping[str, Any] | None, name: str, roles: frozenset[str]
) -> str | None:
    """Why a principal (``name``, ``roles``) may not answer an assigned interrupt; None
    when it is not assigned or the principal is its assignee (or holds its role)."""
    if assignment is None:
        return None
    to, kind = str(assignment.get("to")), assignment.get("kind")
    if kind == "role":
        return None if to in roles else f"the interrupt is assigned to the role {to!r}, which {name!r} does not hold"
    return None if to == name else f"the interrupt is assigned to {to!r}, not to {name!r}"


def reassign_refusal(
    assignment: Mapping[str, Any] | None, name: str, roles: frozenset[str], reassign: frozenset[str]
) -> str | None:
    """Why a principal may not assign an interrupt already assigned: it needs one of the
    policy's ``reassign`` roles; None when it may (or nothing was assigned yet)."""
    if assignment is None or roles & reassign:
        return None
    needed = ", ".join(sorted(reassign)) or "none listed"
    role = "the role " if assignment.get("kind") == "role" else ""
    return (
        f"the interrupt is already assigned to {role}{assignment.get('to')!r}; assigning it again "
        f"needs one of the policy's reassign roles ({needed}), and {name!r} holds none"
    )


def quorum_assign_refusal(kind: str, to: str, needed: int | None) -> str | None:
    """Why an interrupt decided by a quorum of ``needed`` may not be assigned to ``to``
    (of ``kind``): only a role may hold it, for one principal could cast only one of the
    votes, and the others would be refused as not its assignee; None when it may."""
    if needed is None or kind == "role":
        return None
    return (
        f"the interrupt is decided by a quorum of {needed} votes: assign it to a role "
        f"(\"role:<name>\"), whose principals may each vote, not to the one principal {to!r}"
    )


@dataclass(frozen=True, slots=True)
class Tally:
    """A quorum's count after a vote."""

    approvers: tuple[str, ...]
    """The distinct principals whose approving votes count, in the order they voted."""
    needed: int
    vetoed_by: str | None = None
    """The principal whose ``reject`` ended the interrupt (with ``veto``)."""

    @property
    def complete(self) -> bool:
        return len(self.approvers) >= self.needed


def tally(
    votes: Sequence[Mapping[str, Any]],
    needed: int,
    *,
    requester: str | None = None,
    four_eyes: bool = False,
    veto: bool,
    exclude: Collection[str] = (),
) -> Tally:
    """Count ``votes`` toward a quorum of ``needed``: approving votes of distinct
    principals, never those of ``exclude`` (nor the requester's under ``four_eyes``);
    the latest vote's ``reject`` vetoes when ``veto``. Once more than ``needed`` count
    (a completing answer the graph did not take, then another vote), the latest
    ``needed`` are the approvers."""
    excluded = {*exclude, *((requester,) if four_eyes and requester is not None else ())}
    approvers: list[str] = []
    for v in votes:
        who = str(v.get("actor"))
        if v.get("decision") in APPROVING and who not in approvers and who not in excluded:
            approvers.append(who)
    last = votes[-1] if votes else None
    vetoed = str(last.get("actor")) if veto and last is not None and last.get("decision") == VETOING else None
    return Tally(tuple(approvers[-needed:]) if len(approvers) >= needed else tuple(approvers), needed, vetoed)
