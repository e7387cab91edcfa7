"""Answers over HTTP, and what the inbox shows: the rules both the API and the web pages use.

Everything here is synchronous and calls the store (and, for LangGraph's own
interrupts, the gateway of the matching ``--graph``); the web layer runs it in a
worker thread. An answer is admitted in this order, and each step that refuses
writes nothing unless it says so:

1. the interrupt must have been minted (else 404, nothing written);
2. the digest sent must be the interrupt's digest -- what the person saw is what they
   approve (else 412, nothing written);
3. a LangGraph interrupt needs the ``--graph`` whose name its mint recorded (else 409,
   nothing written);
4. the policy file (else 403, recorded as ``not_allowed`` with the principal); once the
   sweep escalated the interrupt, its entry's ``escalate_to`` roles may answer too;
5. the store's own rules: ``store.resume`` for a seed marker, the gateway's two-phase
   claim for a LangGraph interrupt (409 resolved or in progress, 410 expired, 403 the
   store's ``approvers=``, 422 the graph did not take it) -- each recorded by the store.

Between 4 and 5 (SPEC §15): an assigned interrupt admits only its assignee, or a holder
of its role (the store's ``admit_assignee``; else 403, recorded); under a policy
``quorum`` the answer is a vote cast through the store's own quorum (``store.vote(needed=,
veto=, exclude=)``, the rules a Python or command-line caller meets too:
``interrupt.voted``, a second one 409 ``already voted``, a decision that is no vote 422),
and only the vote the store says decides the interrupt -- the quorum complete, or a
``reject`` with ``veto`` -- goes on to 5, with the approvers. The service resumes it there itself (not the store's ``resume_marker``): a
LangGraph interrupt through its gateway, a marker with the ``--graph`` waiting on it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import cursors, native, validation
from ..agent_server_client import AgentServerError
from ..decisions import decide, reported
from ..errors import (
    AnswerNotTakenError,
    ConstraintViolationError,
    DatabaseError,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptInProgressError,
    InterruptOutcomeUnknownError,
    InvalidInputError,
    PayloadTooLargeError,
    ResumeNotAllowedError,
    SymfonicStoreError,
    UnknownInterruptError,
)
from ..events import ASSIGNED, ENDINGS, ESCALATED, EXPIRED, MINTED, RESUMED, VOTED, StoredEvent
from ..policy import Policy
from ..projection import is_native_mint
from ..store import rules as rule
from ..store.vote_ops import AlreadyVotedError, NotAVoteError, assignee
from . import tenancy
from .marker_graphs import answer_marker
from .paging import DEFAULT_PAGE, NOT_A_CURSOR, BadRequest
from .principal import Principal

if TYPE_CHECKING:
    from ..agent_server_client import ServedGraphs
    from ..langgraph.gateway import InterruptGateway
    from ..store import InterruptStore

log = logging.getLogger("symfonic_store.server")

def interrupt_digest(thread_id: str, interrupt_id: str, payload: Any) -> str:
    """The hex SHA-256 of the interrupt as shown (SPEC §9): what an answer must carry."""
    text = json.dumps(
        {"interrupt_id": interrupt_id, "payload": payload, "thread_id": thread_id},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _roles(value: Any) -> list[str]:
    return [str(r) for r in value] if isinstance(value, list) else []


def _assignee(data: Mapping[str, Any]) -> str:
    """An assignment as the API says it: the principal, or ``role:<name>``."""
    return f"role:{data.get('to')}" if data.get("kind") == "role" else str(data.get("to"))


def assignment_of(assigned_to: str | None) -> dict[str, str] | None:
    """An assignment as the store records it, from the API's form (``_assignee``)."""
    if assigned_to is None:
        return None
    role = assigned_to.startswith("role:")
    return {"to": assigned_to[5:] if role else assigned_to, "kind": "role" if role else "principal"}


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    try:
        return datetime.fromtimestamp(moment, UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Result:
    """An HTTP answer: the status and the JSON body."""

    status: int
    body: dict[str, Any]


def _error(status: int, message: str, **extra: Any) -> Result:
    return Result(status, {"error": message, **extra})


def _failed(exc: SymfonicStoreError, *, outcome_unknown: bool = False) -> Result:
    """The answer for a store error that refused or failed a write, whether it recorded a
    refusal or an answer (the errors an answer alone can meet are told before this);
    ``outcome_unknown``: a 503's body says whether the write may have committed."""
    if isinstance(exc, PayloadTooLargeError):
        return _error(413, str(exc))
    if isinstance(exc, InvalidInputError):
        return _error(400, str(exc))
    if isinstance(exc, UnknownInterruptError):
        return _error(404, str(exc))
    if isinstance(exc, DatabaseError) and not isinstance(exc, ConstraintViolationError):
        extra = {"outcome_unknown": exc.outcome_unknown} if outcome_unknown else {}
        return _error(503, str(exc), **extra)
    # A rule refused the write (no retry helps), a projection gap or any other store
    # error: said as it is.
    return _error(500, str(exc))


class Approvals:
    """The inbox and the answers of one store (see the module doc).

    Args:
        store: the store (an :class:`~symfonic_store.InterruptStore`).
        gateways: the served graphs' gateways by graph name (``graph.name``).
        policy: the policy file's rules, or None (anyone authenticated may answer).
        served: the Agent Server of ``--langgraph-url``, or None.
        principals: who the service knows, when it can list them (``TokenAuth.principals``).
    """

    def __init__(
        self,
        store: InterruptStore,
        *,
        gateways: Mapping[str, InterruptGateway] | None = None,
        policy: Policy | None = None,
        served: ServedGraphs | None = None,
        principals: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.store = store
        self.gateways = dict(gateways or {})
        self.policy = policy
        self.served = served
        """The Agent Server whose graphs' interrupts this service answers (--langgraph-url)."""
        self.principals = principals
        """The principals the service knows, read at each call (a tokens file's names); None
        when it cannot list them (JWTs, a proxy's header): an assignee is then taken on trust."""

    # --- reading ---------------------------------------------------------------------

    def item(self, pending: Mapping[str, Any], now: float) -> dict[str, Any]:
        """An open interrupt as the inbox lists it."""
        minted = _number(pending.get("minted_at"))
        thread_id, interrupt_id = str(pending["thread_id"]), str(pending["interrupt_id"])
        return {
            "thread_id": thread_id,
            "interrupt_id": interrupt_id,
            "name": pending.get("name"),
            "payload": pending.get("payload"),
            "minted_at": _iso(minted),
            "age_seconds": None if minted is None else round(max(0.0, now - minted), 3),
            "digest": interrupt_digest(thread_id, interrupt_id, pending.get("payload")),
            "source": pending.get("source") or native.MARKER_SOURCE,
        }

    def inbox(
        self,
        *,
        thread: str | None = None,
        name: str | None = None,
        older_than: float | None = None,
        limit: int = DEFAULT_PAGE,
        after: str | None = None,
        scope: frozenset[str | None] | None = None,
        assigned_to: str | None = None,
    ) -> dict[str, Any]:
        """The open interrupts, oldest first, one page: ``{"items": [...], "next": cursor}``.

        In the store's order and with its cursors (``list_pending(after=)``, SPEC §17: the
        API's and the inbox's pages use the same cursors): every page, first or later, and
        every filter (``thread``, ``name``, ``older_than``, ``assigned_to``: a principal or
        ``role:<name>``, the interrupts whose latest assignment is that) is one keyset read
        of one more than a page, filtered in SQL. ``scope``: only those tenants'
        interrupts (:attr:`Principal.scope`, SPEC §15), filtered in the same read before
        the page is cut (one keyset branch per tenant), so a scoped page is full and its
        cursor is its own last item's.

        Raises:
            BadRequest: ``after`` is not a cursor of these pages.
            InvalidInputError: ``assigned_to`` names no principal or role.
        """
        now = time.time()
        if after is not None:
            try:
                cursors.decode(after, cursors.PENDING, cursors.PENDING_SHAPE)
            except InvalidInputError:
                raise BadRequest(NOT_A_CURSOR) from None
        if thread is not None:
            try:
                validation.text_id(thread, "thread")
            except InvalidInputError:
                return {"items": [], "next": None}  # no thread has that id
        try:
            pending = self.store.list_pending(
                older_than=older_than, limit=limit + 1, tenants=scope, after=after,
                thread_id=thread, name=name, assigned_to=assigned_to,
            )
        except InvalidInputError as exc:
            if exc.field == "after":
                raise BadRequest(NOT_A_CURSOR) from None
            raise
        page = pending[:limit]
        items = [self.item(p, now) for p in page]
        return {"items": items, "next": page[-1]["cursor"] if len(pending) > limit else None}

    def sees(self, principal: Principal | None, thread_id: str, interrupt_id: str) -> bool:
        """May ``principal`` see this interrupt (SPEC §15)? An unknown one: yes (it is then
        reported unknown, as another tenant's is)."""
        if principal is None or principal.scope is None:
            return True
        try:
            found = self.store.interrupt_tenants([(thread_id, interrupt_id)])
        except InvalidInputError:
            return True
        key = (thread_id, interrupt_id)
        return key not in found or principal.sees(found[key])

    def visible_events(self, principal: Principal, events: list[Any]) -> list[Any]:
        """The events ``principal`` may see (:mod:`.tenancy`): its tenants' interrupts';
        those of no interrupt to ``"*"`` only."""
        return tenancy.visible_events(self.store, principal, events)

    def interrupt(
        self, thread_id: str, interrupt_id: str, principal: Principal | None = None
    ) -> dict[str, Any] | None:
        """One interrupt, pending or not: the inbox fields, ``status`` and its ``events``;
        None when unknown, or another tenant's than ``principal``'s (SPEC §15)."""
        if not self.sees(principal, thread_id, interrupt_id):
            return None
        try:
            events = self.store.history(thread_id, interrupt_id=interrupt_id)
        except InvalidInputError:
            return None  # an id no interrupt can have (empty, too long)
        if principal is not None:  # what names another tenant's interrupt, left out
            events = self.visible_events(principal, events)
        mint = next((e for e in events if e.type == MINTED), None)
        if mint is None:
            return None
        data = mint.data
        minted = _number(data.get("minted_at")) or mint.occurred_at.timestamp()
        view = self.item(
            {
                "thread_id": thread_id,
                "interrupt_id": interrupt_id,
                "name": data.get("name"),
                "payload": data.get("payload"),
                "minted_at": minted,
                "source": native.NATIVE_SOURCE if is_native_mint(data) else native.MARKER_SOURCE,
            },
            time.time(),
        )
        ending = next((e for e in events if e.type in ENDINGS), None)
        escalation = next((e for e in events if e.type == ESCALATED), None)
        assigned = [e for e in events if e.type == ASSIGNED]
        quorum = None if self.policy is None else self.policy.quorum_for(data.get("name"))
        view.update(
            assigned_to=None if not assigned else _assignee(assigned[-1].data),
            votes=[
                {"actor": e.actor, "decision": e.data.get("decision"), "at": e.occurred_at.isoformat()}
                for e in events if e.type == VOTED
            ],
            needed=None if quorum is None else quorum[0],
        )
        view.update(
            status="pending" if ending is None else ("resumed" if ending.type == RESUMED else "expired"),
            requested_by=mint.actor,
            graph=data.get("graph"),
            breakpoint=bool(data.get("breakpoint")),
            resolved_by=None if ending is None else ending.actor,
            resolved_at=None if ending is None else ending.occurred_at.isoformat(),
            reason=None if ending is None or ending.type != EXPIRED else ending.data.get("reason"),
            response=None if ending is None or ending.type != RESUMED else ending.data.get("response"),
            escalated_to=None if escalation is None else _roles(escalation.data.get("to")),
            events=[e.as_dict() for e in events],
        )
        if ending is None and is_native_mint(data):
            opened = next(iter(self.store.open_interrupts(thread_id, interrupt_id=interrupt_id)), {})
            claimed = opened.get("claimed_by")
            view["in_progress"] = claimed is not None
            view["claimed_by"] = claimed
            view["outcome_unknown"] = bool(opened.get("outcome_unknown"))
        return view

    def decision(self, thread_id: str, interrupt_id: str, approve: bool) -> Any:
        """What an approve or reject button answers for this interrupt (its schema's form)."""
        record = self.store.interrupt_record(thread_id, interrupt_id) or {}
        return native.decision_answer(
            record.get("payload"),
            approve,
            breakpoint=bool(record.get("breakpoint")),
            message="rejected in the approval inbox",
        )

    # --- answering -------------------------------------------------------------------

    def escalated_first(self, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The inbox's items with the escalated ones first (SPEC §14), each item given
        ``escalated_to`` (the roles, or None); the order is otherwise kept."""
        found = {
            (e["thread_id"], e["interrupt_id"]): e["to"]
            for e in self.store.escalations(
                interrupts=[(str(i["thread_id"]), str(i["interrupt_id"])) for i in items]
            )
        }
        marked = [
            {**i, "escalated_to": found.get((i["thread_id"], i["interrupt_id"]))} for i in items
        ]
        return sorted(marked, key=lambda i: i["escalated_to"] is None)

    def escalated(self, thread_id: str, interrupt_id: str, name: str | None) -> bool:
        """Has the sweep escalated this interrupt, where the policy lets that matter?"""
        if self.policy is None or not self.policy.escalates(name):
            return False
        # The interrupt's own events, not every escalation of the thread (SPEC §17).
        return any(
            e.type == ESCALATED for e in self.store.history(thread_id, interrupt_id=interrupt_id)
        )

    def refusal(
        self, principal: Principal, name: str | None, requester: str | None, *, escalated: bool = False
    ) -> str | None:
        """Why the policy forbids ``principal`` to answer an interrupt of ``name`` asked by
        ``requester`` (the mint's actor); None when it may, or when there is no policy.
        ``escalated``: the sweep escalated it, so the ``escalate_to`` roles may answer too.

        The one place that decides: an answer is refused with it, and the inbox asks it
        before offering a button, so a person is never offered a click that would only be
        refused (and recorded).
        """
        if self.policy is None:
            return None
        return self.policy.refusal(principal, name, requester, escalated=escalated)

    def _ending(self, thread_id: str, interrupt_id: str) -> StoredEvent | None:
        """The interrupt's ending, read from its own events (never the thread's history)."""
        return next(
            (e for e in self.store.history(thread_id, interrupt_id=interrupt_id) if e.type in ENDINGS),
            None,
        )

    def _decided(self, thread_id: str, interrupt_id: str) -> dict[str, Any]:
        """What the admitted answer recorded as decided (SPEC §12): ``decision``, and
        ``decisions`` (one per action request) for a batched HITL request."""
        ending = self._ending(thread_id, interrupt_id)
        data = {} if ending is None or ending.type != RESUMED else ending.data
        found = data.get("decisions")
        if isinstance(found, list):
            words = [reported(w) for w in found]
            return {"decision": words[0] if len(set(words)) == 1 else None, "decisions": words}
        return {"decision": reported(data.get("decision"))}

    def _visible_record(self, principal: Principal, thread_id: str, interrupt_id: str) -> dict[str, Any] | None:
        """The interrupt's mint, or None when it is unknown -- as another tenant's is to
        ``principal`` (SPEC §15), and an id no interrupt can have."""
        try:
            if not self.sees(principal, thread_id, interrupt_id):
                return None
            return self.store.interrupt_record(thread_id, interrupt_id)
        except InvalidInputError:
            return None

    def answer(
        self, principal: Principal, thread_id: str, interrupt_id: str, response: Any, digest: str
    ) -> Result:
        """Admit ``principal``'s answer, or say why not (see the module doc for the order)."""
        where = f"interrupt {interrupt_id!r} on thread {thread_id!r}"
        record = self._visible_record(principal, thread_id, interrupt_id)
        if record is None:
            return _error(404, f"{where} is unknown: nothing was minted with that id; nothing was written")
        current = interrupt_digest(thread_id, interrupt_id, record.get("payload"))
        if not hmac.compare_digest(current.encode(), digest.encode()):
            return _error(
                412,
                f"the digest sent is not the digest of {where}: what was shown is not what "
                "would be approved; load the interrupt again and look before answering "
                "(nothing was admitted or written)",
            )
        native_interrupt = is_native_mint(record)
        gate: Any = None
        if native_interrupt:
            graph = record.get("graph")
            gate = self.gateways.get(str(graph)) if graph is not None else None
            if gate is None and self.served is not None and self.served.serves(record):
                gate = self.served  # answered through the Agent Server (SPEC §13)
            if gate is None:
                served = ", ".join(sorted(map(repr, self.gateways))) or "none"
                return _error(
                    409,
                    f"{where} is a LangGraph interrupt of graph {graph!r}, and this server has "
                    f"no --graph of that name (it serves: {served}); start it with "
                    "--graph MODULE:ATTR for that graph"
                    + (", or --langgraph-url URL for the Agent Server that serves it"
                       if record.get("assistant_id") else "")
                    + ". Nothing was written",
                )
        why = self.refusal(principal, record.get("name"), record.get("actor"))
        if why is not None and self.escalated(thread_id, interrupt_id, record.get("name")):
            # Read only on a refusal: an escalation can only widen who may answer.
            why = self.refusal(principal, record.get("name"), record.get("actor"), escalated=True)
        try:
            if why is not None:
                self.store.record_refusal(
                    thread_id, interrupt_id, response, actor=principal.name, error=why
                )
                return _error(403, f"not allowed: {why}; the refusal has been recorded")
            # The store's rule: an assigned interrupt admits its assignee (or role) only.
            self.store.admit_assignee(
                thread_id, interrupt_id, response, actor=principal.name, roles=principal.roles
            )
        except ResumeNotAllowedError as exc:
            return _error(403, f"not allowed: {exc}; the refusal has been recorded")
        except SymfonicStoreError as exc:
            return _failed(exc)
        approvers: tuple[str, ...] = ()
        quorum = None if self.policy is None else self.policy.quorum_for(record.get("name"))
        if quorum is not None:
            voted = self._vote(principal, thread_id, interrupt_id, response, record, quorum)
            if isinstance(voted, Result):
                return voted
            approvers = voted
        try:
            by = principal.authenticated_by
            if gate is not None:
                gate.answer(
                    thread_id, interrupt_id, response, actor=principal.name, authenticated_by=by,
                    approvers=approvers,
                )
                waiting = [
                    {"interrupt_id": o["interrupt_id"], "name": o["name"]}
                    for o in tenancy.visible_open(self.store, principal, thread_id,
                                                  self.store.open_interrupts(thread_id))
                ]
                return Result(200, {
                    "outcome": "resumed", "actor": principal.name,
                    **({"approvers": list(approvers)} if approvers else {}),
                    **self._decided(thread_id, interrupt_id), "waiting": waiting,
                })
            marker = answer_marker(  # and its --graph run, when one waits on it
                self.store, self.gateways, record, principal, thread_id, interrupt_id, response,
                approvers,
            )
            return Result(200, {
                "outcome": "resumed", "actor": principal.name,
                **({"approvers": list(approvers)} if approvers else {}),
                **self._decided(thread_id, interrupt_id), "resume": marker.resume, **marker.said,
            })
        except InterruptOutcomeUnknownError as exc:
            return _error(
                409,
                str(exc),
                outcome_unknown=True,
                claimed_by=exc.claimant,
                claimed_at=_iso(exc.claimed_at),
            )
        except InterruptInProgressError as exc:
            return _error(
                409,
                str(exc),
                resolved_by=exc.claimant,
                resolved_at=_iso(exc.claimed_at),
                in_progress=True,
            )
        except InterruptAlreadyResolvedError as exc:
            return self._resolved(thread_id, interrupt_id, exc)
        except InterruptExpiredError as exc:
            return _error(410, str(exc), reason=exc.reason)
        except ResumeNotAllowedError as exc:
            return _error(403, str(exc))
        except AnswerNotTakenError as exc:
            return _error(422, str(exc), outcome="not_taken", graph_error=exc.error)
        except AgentServerError as exc:
            return _error(exc.status, str(exc), outcome_unknown=exc.outcome_unknown)
        except SymfonicStoreError as exc:
            # outcome_unknown on a 503: the graph may have acted; the interrupt stays
            # claimed, so a resend is refused as in progress, and the body says so.
            return _failed(exc, outcome_unknown=True)

    def _resolved(self, thread_id: str, interrupt_id: str, exc: InterruptAlreadyResolvedError) -> Result:
        """The 409 of an answer (or a vote) to an answered interrupt: who won, and when."""
        ending = self._ending(thread_id, interrupt_id)
        return _error(
            409,
            str(exc),
            resolved_by=None if ending is None else ending.actor,
            resolved_at=None if ending is None else ending.occurred_at.isoformat(),
            in_progress=False,
        )

    # --- assignment and quorum (SPEC §15) --------------------------------------------

    def _vote(
        self,
        principal: Principal,
        thread_id: str,
        interrupt_id: str,
        response: Any,
        record: Mapping[str, Any],
        quorum: tuple[int, bool, bool],
    ) -> Result | tuple[str, ...]:
        """Cast ``principal``'s vote through the store's quorum (``store.vote(needed=)``,
        which counts it and decides): a :class:`Result` when it does not decide the
        interrupt (voted, refused), else the approvers to resume it with (empty for a
        veto). The service answers the decided interrupt itself (``resume_marker=False``),
        to run its gateway or the ``--graph`` waiting on a marker."""
        needed, veto, four_eyes = quorum
        try:
            # Named as the answer would be (SPEC §12): the store's decisions function, else
            # by the interrupt's schema (an Agent Inbox accept is a list, a HITL approval a
            # list of decisions) -- a batch votes when its decisions agree.
            found = decide(self.store.decisions, record.get("name"),
                           record.get("payload"), response, breakpoint=bool(record.get("breakpoint")))
            votes = self.store.vote(
                thread_id, interrupt_id, rule.vote_decision(found), response, actor=principal.name,
                needed=needed, veto=veto, exclude=record.get("actor") if four_eyes else None,
                resume_marker=False,
            )
        except NotAVoteError as exc:
            return _error(422, exc.problem)
        except AlreadyVotedError:
            return _error(409, "already voted")
        except InterruptAlreadyResolvedError as exc:
            return self._resolved(thread_id, interrupt_id, exc)
        except InterruptExpiredError as exc:
            return _error(410, str(exc), reason=exc.reason)
        except SymfonicStoreError as exc:
            return _failed(exc)
        if not votes.decided:
            return Result(200, {"outcome": "voted", "votes": len(votes.approvers), "needed": needed})
        return votes.resume_approvers

    def assigned_refusal(self, principal: Principal, assigned_to: str | None) -> str | None:
        """Why ``principal`` may not answer an interrupt assigned as the API shows it
        (``assigned_to``: a principal or ``role:<name>``); None when it may."""
        return rule.assignee_refusal(assignment_of(assigned_to), principal.name, principal.roles)

    def assign_refusal(
        self, principal: Principal, name: str | None, requester: str | None,
        assignment: Mapping[str, Any] | None,
    ) -> str | None:
        """Why ``principal`` may not assign an interrupt of ``name`` (assigned as the
        store's ``assignment`` says); None when it may. Asked by the API and by the inbox
        before it offers the form."""
        why = self.refusal(principal, name, requester)
        if why is None:
            reassign = frozenset() if self.policy is None else self.policy.reassign_roles(name)
            why = rule.reassign_refusal(assignment, principal.name, principal.roles, reassign)
        return why

    def assign(self, principal: Principal, thread_id: str, interrupt_id: str, to: Any) -> Result:
        """Assign an interrupt to a principal or ``role:<name>`` (SPEC §15), ``to`` trimmed
        (:func:`~symfonic_store.store.vote_ops.assignee`) and, with tokens, a principal the
        file names (else 400, asked only once the principal may assign it, so that no one
        else learns which names exist): only a principal allowed to answer it, an assigned
        one only with a ``reassign`` role (else 403, recorded as a refused assignment by the
        store's ``record_assign_refusal``, never as an answer); a quorum's only to a role
        (else 409, nothing written)."""
        try:
            kind, target = assignee(to)
        except InvalidInputError as exc:
            return _error(400, f'"to" must be a principal or "role:<name>" ({exc}); nothing was written')
        shown = _assignee({"to": target, "kind": kind})
        where = f"interrupt {interrupt_id!r} on thread {thread_id!r}"
        record = self._visible_record(principal, thread_id, interrupt_id)
        if record is None:
            return _error(404, f"{where} is unknown: nothing was minted with that id; nothing was written")
        quorum = None if self.policy is None else self.policy.quorum_for(record.get("name"))
        try:
            assignment = self.store.assignment(thread_id, interrupt_id)
            why = self.assign_refusal(principal, record.get("name"), record.get("actor"), assignment)
            if why is not None:
                self.store.record_assign_refusal(thread_id, interrupt_id, shown, actor=principal.name, error=why)
                return _error(403, f"not allowed: {why}; the refusal has been recorded")
            # Asked only of who may assign this interrupt: nobody else learns the names.
            if kind == "principal" and self.principals is not None and target not in self.principals():
                return _error(400, f"{target!r} is not a principal of this service (its tokens "
                              "file names none such); nothing was written")
            why = rule.quorum_assign_refusal(kind, target, None if quorum is None else quorum[0])
            if why is not None:
                return _error(409, f"{why}; nothing was written")
            self.store.assign(thread_id, interrupt_id, to=target, kind=kind, actor=principal.name)
        except InterruptAlreadyResolvedError as exc:
            return _error(409, str(exc))
        except InterruptExpiredError as exc:
            return _error(410, str(exc), reason=exc.reason)
        except SymfonicStoreError as exc:
            return _failed(exc)
        return Result(200, {"assigned_to": shown})
