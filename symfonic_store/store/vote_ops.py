"""The plans of assignment and quorum votes (SPEC §15): ``assign``, a refused
assignment's record (``record_assign_refusal``) and ``vote`` -- with ``needed``, the
quorum itself: the rules that decide an answer by votes live here, for the service and
every Python or command-line caller alike.

Both append one event under the thread's lock, to an interrupt that was minted and has
no ending: ``interrupt.assigned`` (data: ``to``, ``kind``) and ``interrupt.voted``
(data: ``decision``, ``response``). Who may assign or vote is the service's policy
(it knows the principals' roles, the store does not); the store keeps what holds
whatever races it: one vote per principal (``uq_symfonic_events_one_vote``; a racing
duplicate is retried, then refused as :class:`AlreadyVotedError`), and nothing after an
ending. Neither event ends the interrupt: the quorum's completing vote is followed by
the ordinary answer (``store.resume`` or the gateway's claim), whose one-ending index
resumes the graph once.

The quorum (``vote(..., needed=N)``): the vote is recorded and counted in one write
transaction (:func:`~.rules.tally`: distinct approving actors, ``exclude`` never
counted, a ``reject`` vetoing with ``veto``); a vote that decides the interrupt is
followed by the answer -- the plan's own ``resume`` for a seed marker (``data
["approvers"]`` the tally's, none for a veto), or, for a LangGraph interrupt and for a
caller that runs a graph itself (the service's ``--graph``), the caller's answer with
:attr:`Votes.resume_approvers`. Racing completing votes are each recorded, and the
one-ending index lets one answer through: the others are refused (and recorded) as
already resolved.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .. import validation
from ..db.schema import events
from ..db.statements.log import interrupt_events
from ..errors import (
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStateError,
    InvalidInputError,
    ResumeNotAllowedError,
    UnknownInterruptError,
)
from ..event_types import assignee_of
from ..events import ASSIGN_NOT_ALLOWED, ASSIGNED, RESUME_REJECTED, RESUMED, VOTED
from ..projection import is_native_mint
from ..projection_gaps import missing_row
from . import lifecycle
from . import rules as rule
from .append import ThreadWriter, flush
from .marker_ops import MarkerOps
from .plan import Op, Plan

if TYPE_CHECKING:
    from langgraph.types import Command

ASSIGN_KINDS: Final = ("principal", "role")
ROLE_PREFIX: Final = "role:"
"""How the service is told an assignee is a role (``{"to": "role:finance"}``)."""


class AlreadyVotedError(InterruptStateError):
    """This principal has voted on the interrupt already; nothing was written."""


class NotAVoteError(InvalidInputError):
    """Under a quorum, an answer whose decision neither approves (``approve``,
    ``accept``) nor rejects; nothing was written (the service's 422)."""


class Votes(list[dict[str, Any]]):
    """What :meth:`vote` returns: the votes on the interrupt so far, this one last, as
    the list it always was (``actor``, ``decision``, ``response``, ``at``), and what the
    quorum made of them.

    Attributes:
        needed: the quorum asked for (``needed=``), or None (the vote was only recorded).
        approvers: the distinct approving actors counted, in the order they voted (at
            most ``needed``: the latest ones once more voted).
        vetoed_by: the actor whose ``reject`` ended the interrupt (with ``veto``), or None.
        native: the interrupt is LangGraph's own (its answer goes through a gateway).
        resumed: the ``Command`` of the resume this vote made (``store.resume``'s), or
            None: the quorum is not decided, the interrupt is a LangGraph interrupt,
            or the caller answers it itself (``resume_marker=False``).
    """

    __slots__ = ("needed", "approvers", "vetoed_by", "native", "resumed")

    def __init__(
        self,
        votes: Iterable[dict[str, Any]] = (),
        *,
        needed: int | None = None,
        approvers: tuple[str, ...] = (),
        vetoed_by: str | None = None,
        native: bool = False,
        resumed: Command[Any] | None = None,
    ) -> None:
        super().__init__(votes)
        self.needed = needed
        self.approvers = approvers
        self.vetoed_by = vetoed_by
        self.native = native
        self.resumed = resumed

    @property
    def decided(self) -> bool:
        """Does this vote decide the interrupt: the quorum complete, or a veto?"""
        if self.needed is None:
            return False
        return self.vetoed_by is not None or len(self.approvers) >= self.needed

    @property
    def resume_approvers(self) -> tuple[str, ...]:
        """What the deciding answer records as ``data["approvers"]``: the approvers of a
        complete quorum; none for a veto (or an undecided vote)."""
        return () if self.vetoed_by is not None or not self.decided else self.approvers


@dataclass(frozen=True, slots=True)
class Cast:
    """A recorded vote: every vote so far, and whether the interrupt is LangGraph's own."""

    votes: list[dict[str, Any]]
    native: bool


def quorum_size(needed: Any) -> int | None:
    """``needed`` as the quorum: None, or an integer of at least 2.

    Raises:
        InvalidInputError: anything else.
    """
    if needed is None:
        return None
    if isinstance(needed, bool) or not isinstance(needed, int) or needed < 2:
        raise InvalidInputError("needed", f"must be None or an integer of at least 2, got {needed!r}")
    return needed


def excluded(exclude: Any) -> tuple[str, ...]:
    """``exclude`` as actors: None, one actor, or a collection of them.

    Raises:
        InvalidInputError: an actor that is not a non-empty id.
    """
    if exclude is None:
        return ()
    found = [exclude] if isinstance(exclude, str) else exclude
    if not isinstance(found, Collection):
        raise InvalidInputError("exclude", "must be None, an actor or a collection of actors")
    return tuple(validation.required_id(a, "exclude") for a in found)


def recorded(conn: Connection, thread_id: str, interrupt_id: str, kind: str) -> list[dict[str, Any]]:
    """The events of ``kind`` on one interrupt, in order: ``{actor, at, **data}``."""
    # Through the interrupt's index, ordered here (see log.interrupt_events: asked to order
    # them, SQLite would walk the whole thread).
    rows = sorted(
        conn.execute(
            sa.select(events.c.actor, events.c.occurred_at, events.c.data, events.c.version)
            .where(events.c.thread_id == thread_id, events.c.interrupt_id == interrupt_id,
                   events.c.type == kind)
        ).all(),
        key=lambda r: int(r[3]),
    )
    return [{**(r[2] if isinstance(r[2], dict) else {}), "actor": r[0], "at": r[1]} for r in rows]


def _open_writer(conn: Connection, thread_id: str, interrupt_id: str) -> ThreadWriter:
    """The thread's writer, once the interrupt is known to be minted and open."""
    return _opened(conn, thread_id, interrupt_id)[0]


def _opened(conn: Connection, thread_id: str, interrupt_id: str) -> tuple[ThreadWriter, bool]:
    """The thread's writer, once the interrupt is known to be minted and open, and
    whether it is a LangGraph interrupt."""
    w = ThreadWriter(conn, thread_id)
    where = f"interrupt {interrupt_id!r} on thread {thread_id!r}"
    ids = {"thread_id": thread_id, "interrupt_id": interrupt_id}
    if not w.existed and (gap := missing_row(conn, thread_id)) is not None:
        raise gap
    minted, ending = rule.mint_and_ending(interrupt_events(conn, thread_id, interrupt_id))
    if minted is None:
        raise UnknownInterruptError(f"{where} is unknown: nothing was minted with that id; nothing was written", **ids)
    over = rule.ended(ending)
    if over is not None and ending is not None:
        if ending.type == RESUMED:
            raise InterruptAlreadyResolvedError(f"{where} was already answered; nothing was written", **ids)
        raise InterruptExpiredError(f"{where} is expired ({over.reason}); nothing was written", **ids, reason=over.reason)
    return w, is_native_mint(minted.data)


def assign_interrupt(
    conn: Connection, thread_id: str, interrupt_id: str, *, to: str, kind: str, actor: str
) -> None:
    w = _open_writer(conn, thread_id, interrupt_id)
    w.append(ASSIGNED, interrupt_id=interrupt_id, actor=actor, data={"to": to, "kind": kind})
    flush(conn, [w])


def refuse_assignment(
    conn: Connection, thread_id: str, interrupt_id: str, *, assign: str, actor: str, error: str
) -> None:
    """Record a refused assignment: ``interrupt.resume_rejected`` with data ``{why:
    "assign_not_allowed", assign, error}`` -- no ``response``, for it answered nothing."""
    w = _open_writer(conn, thread_id, interrupt_id)
    w.append(RESUME_REJECTED, interrupt_id=interrupt_id, actor=actor,
             data={"why": ASSIGN_NOT_ALLOWED, "assign": assign, "error": error})
    flush(conn, [w])


def refuse_unassigned(
    conn: Connection, thread_id: str, interrupt_id: str, *, response: Any, actor: str,
    roles: frozenset[str], via: str,
) -> str | None:
    """Why ``actor`` (holding ``roles``) may not answer the interrupt as assigned, that
    refusal recorded (``resume_rejected``, ``not_allowed``, as ``record_refusal`` does);
    None when it is not assigned or ``actor`` is its assignee (or holds its role)."""
    found = recorded(conn, thread_id, interrupt_id, ASSIGNED)
    why = rule.assignee_refusal(found[-1] if found else None, actor, roles)
    if why is not None:
        lifecycle.record_refusal(conn, thread_id, interrupt_id, response, actor,
                                 why=rule.NOT_ALLOWED, error=why, via=via)
    return why


def assignee_settled(
    conn: Connection, thread_id: str, interrupt_id: str, *, actor: str, roles: frozenset[str]
) -> tuple[bool, str | None]:
    """:func:`refuse_unassigned`'s read-only check: an answer its assignment admits
    records nothing (no write lock is taken for it)."""
    found = recorded(conn, thread_id, interrupt_id, ASSIGNED)
    admitted = rule.assignee_refusal(found[-1] if found else None, actor, roles) is None
    return admitted, None


def assignee_name(to: Any) -> str:
    """An assignee (a principal, or a role without its ``role:`` prefix) as recorded:
    trimmed of surrounding whitespace, then a non-empty id of at most 255 characters.

    Raises:
        InvalidInputError: not a string, or empty or too long once trimmed.
    """
    return validation.required_id(to.strip() if isinstance(to, str) else to, "to")


def assignee(to: Any) -> tuple[str, str]:
    """``(kind, name)`` of an assignment as the service is sent it: ``"bob"`` is the
    principal ``bob``, ``"role:finance"`` the role ``finance``; surrounding whitespace,
    also after ``role:``, is not part of the name (:func:`assignee_name`).

    Raises:
        InvalidInputError: not a string, or no name once trimmed.
    """
    text = to.strip() if isinstance(to, str) else to
    if isinstance(text, str) and text.startswith(ROLE_PREFIX):
        return "role", assignee_name(text[len(ROLE_PREFIX):])
    return "principal", assignee_name(text)


def shown_assignee(to: Any, field: str = "to") -> str:
    """An assignee as the API shows it (the projection's ``assigned_to``), from the form
    the service is sent (:func:`assignee`): ``"bob"``, or ``"role:finance"``.

    Raises:
        InvalidInputError: (of ``field``) not a string, or no name once trimmed.
    """
    try:
        kind, name = assignee(to)
    except InvalidInputError as exc:
        raise InvalidInputError(field, exc.problem) from None
    return assignee_of({"to": name, "kind": kind})


def vote_interrupt(
    conn: Connection, thread_id: str, interrupt_id: str, *, decision: str, response: Any, actor: str
) -> Cast:
    w, native = _opened(conn, thread_id, interrupt_id)
    votes = recorded(conn, thread_id, interrupt_id, VOTED)
    if rule.voted_before(votes, actor):
        raise AlreadyVotedError(
            f"{actor!r} has already voted on interrupt {interrupt_id!r} on thread {thread_id!r}; "
            "nothing was written",
            thread_id=thread_id, interrupt_id=interrupt_id,
        )
    data = {"decision": decision, "response": response}
    w.append(VOTED, interrupt_id=interrupt_id, actor=actor, data=data)
    at = w.new_events[-1].occurred_at
    flush(conn, [w])
    return Cast([*votes, {**data, "actor": actor, "at": at}], native)


class VoteOps(MarkerOps):
    """Assignment and votes (see the module doc)."""

    def assign(
        self, thread_id: str, interrupt_id: str, *, to: str, kind: str = "principal", actor: str
    ) -> Plan[None]:
        """Record ``interrupt.assigned``: the interrupt is handed to the principal or role
        ``to`` (``kind``: ``principal`` or ``role``), by ``actor``; ``to`` is recorded
        trimmed of surrounding whitespace (``" bob "`` is ``bob``).

        Raises:
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError:
                nothing was written.
            InvalidInputError: bad ids, an empty ``to``, or a ``kind`` not listed.
        """
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        target = assignee_name(to)
        if kind not in ASSIGN_KINDS:
            raise InvalidInputError("kind", f"must be one of {', '.join(ASSIGN_KINDS)}")
        yield Op(partial(assign_interrupt, thread_id=t, interrupt_id=i, to=target, kind=kind, actor=a), write=True)

    def record_assign_refusal(
        self, thread_id: str, interrupt_id: str, to: str, *, actor: str, error: str
    ) -> Plan[None]:
        """Record an assignment its caller refused (the service's policy, SPEC §15):
        ``interrupt.resume_rejected`` with ``why: "assign_not_allowed"`` and data ``assign``
        (``to`` as the caller was sent it: a principal or ``role:<name>``) and ``error``
        (why, in words), ``actor`` the principal. It is not an answer attempt: the audit's
        ``attempts`` and the answer metrics leave it out.

        Raises:
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError:
                nothing was written.
            InvalidInputError: bad ids, or an empty ``to``.
        """
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        fn = partial(refuse_assignment, thread_id=t, interrupt_id=i, assign=assignee_name(to),
                     actor=a, error=str(error)[:1000])
        yield Op(fn, write=True)

    def admit_assignee(
        self,
        thread_id: str,
        interrupt_id: str,
        response: Any = None,
        *,
        actor: str,
        roles: Collection[str] = (),
        via: str = "service",
    ) -> Plan[None]:
        """Admit ``actor``'s answer (or vote) to an assigned interrupt only from its
        assignee, or a holder of its role (``roles``: the actor's, which the caller
        knows and the store does not), SPEC §15. A refusal is recorded as
        :meth:`record_refusal` records one (``interrupt.resume_rejected``, ``why:
        "not_allowed"``, ``error`` the reason, ``response``, ``via``) and raised; an
        interrupt never assigned, or an answer its assignment admits, records nothing.

        Raises:
            ResumeNotAllowedError: refused (recorded); its message is the reason.
            UnknownInterruptError: refused, and nothing was minted with that id (nothing
                recorded).
            InvalidInputError: bad ids, roles, or a response that is not JSON.
        """
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        held = frozenset(validation.required_id(r, "roles") for r in roles)
        r = validation.json_value(response, "response", max_bytes=self.max_payload_bytes)
        why: str | None = yield Op(
            partial(refuse_unassigned, thread_id=t, interrupt_id=i, response=r, actor=a, roles=held,
                    via=str(via)[: validation.MAX_ID_LENGTH]),
            write=True,
            settled=partial(assignee_settled, thread_id=t, interrupt_id=i, actor=a, roles=held),
        )
        if why is not None:
            raise ResumeNotAllowedError(why, thread_id=t, interrupt_id=i)

    def vote(
        self,
        thread_id: str,
        interrupt_id: str,
        decision: str | None,
        response: Any = None,
        *,
        actor: str,
        needed: int | None = None,
        veto: bool = True,
        exclude: str | Collection[str] | None = None,
        authenticated_by: str | None = None,
        resume_marker: bool = True,
    ) -> Plan[Votes]:
        """Record ``actor``'s vote (``interrupt.voted``: ``decision``, ``response``);
        returns every vote on the interrupt so far, this one last (``actor``,
        ``decision``, ``response``, ``at``), as :class:`Votes` (a list, with what the
        quorum made of them).

        With ``needed`` (N >= 2) the vote counts toward a quorum (SPEC §15), as the
        service's policy ``quorum`` does: only ``approve``, ``accept`` or ``reject`` is a
        vote (else :class:`NotAVoteError`, nothing written); the approving votes of
        distinct actors count, never those of ``exclude`` (an actor or several: the
        requester under four-eyes). The vote that brings them to N -- or, with ``veto``,
        a ``reject`` -- decides the interrupt (``Votes.decided``): a seed marker is then
        resumed here, once, with this vote's ``response`` and ``actor`` (as ``store.resume``
        with ``authenticated_by`` and ``approvers``: ``data["approvers"]`` lists the N,
        none after a veto), its ``Command`` in ``Votes.resumed``. A LangGraph interrupt
        (``Votes.native``) is not resumed here: answer it through its gateway
        (``gateway.answer(..., approvers=votes.resume_approvers)``), as the service does;
        ``resume_marker=False`` leaves a marker to the caller too (the service, to run the
        ``--graph`` waiting on it). Racing votes are each recorded; one deciding answer
        goes through, the others raise :class:`InterruptAlreadyResolvedError` (their
        votes stand, the refusal is recorded, as the service's 409 is). Without
        ``needed`` the vote is only recorded (``veto`` and ``exclude`` unused).

        Raises:
            AlreadyVotedError: ``actor`` voted on it before; nothing was written.
            NotAVoteError: with ``needed``, a decision that neither approves nor rejects
                (None: a batch whose decisions disagree); nothing was written.
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError:
                nothing was written -- or, raised by the deciding vote's resume, what
                ``store.resume`` raises (the vote stands; the refusal is recorded).
            ResumeNotAllowedError: the store's ``approvers`` refuse the deciding vote's
                actor (recorded; the vote stands).
            InvalidInputError: bad ids, decision, ``needed`` or ``exclude``, or a
                response that is not JSON.
        """
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        quorum = quorum_size(needed)
        refused = rule.vote_refusal(decision, quorum)
        if refused is not None:
            raise NotAVoteError("decision", refused)
        word = validation.required_id(decision, "decision")
        r = validation.json_value(response, "response", max_bytes=self.max_payload_bytes)
        left_out = excluded(exclude)
        by = validation.authenticated_by(authenticated_by)
        cast: Cast = yield Op(
            partial(vote_interrupt, thread_id=t, interrupt_id=i, decision=word, response=r, actor=a),
            write=True,
        )
        if quorum is None:
            return Votes(cast.votes, native=cast.native)
        count = rule.tally(cast.votes, quorum, veto=bool(veto), exclude=left_out)
        votes = Votes(cast.votes, needed=quorum, approvers=count.approvers, vetoed_by=count.vetoed_by,
                      native=cast.native)
        if votes.decided and resume_marker and not cast.native:
            votes.resumed = yield from self.resume(
                t, i, response, actor=a, authenticated_by=by, approvers=votes.resume_approvers
            )
        return votes

    def votes(self, thread_id: str, interrupt_id: str) -> Plan[list[dict[str, Any]]]:
        """The votes on one interrupt, in order (``actor``, ``decision``, ``response``, ``at``)."""
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        found: list[dict[str, Any]] = yield Op(
            partial(recorded, thread_id=t, interrupt_id=i, kind=VOTED), write=False
        )
        return found

    def assignment(self, thread_id: str, interrupt_id: str) -> Plan[dict[str, Any] | None]:
        """The interrupt's latest assignment (``to``, ``kind``, ``actor``, ``at``), or None."""
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        found: list[dict[str, Any]] = yield Op(
            partial(recorded, thread_id=t, interrupt_id=i, kind=ASSIGNED), write=False
        )
        return found[-1] if found else None
