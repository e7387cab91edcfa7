"""The plans of assignment and quorum votes (SPEC §15): ``assign``, a refused
assignment's record (``record_assign_refusal``) and ``vote``.

Both append one event under the thread's lock, to an interrupt that was minted and has
no ending: ``interrupt.assigned`` (data: ``to``, ``kind``) and ``interrupt.voted``
(data: ``decision``, ``response``). Who may assign or vote is the service's policy
(it knows the principals' roles, the store does not); the store keeps what holds
whatever races it: one vote per principal (``uq_symfonic_events_one_vote``; a racing
duplicate is retried, then refused as :class:`AlreadyVotedError`), and nothing after an
ending. Neither event ends the interrupt: the quorum's completing vote is followed by
the ordinary answer (``store.resume`` or the gateway's claim), whose one-ending index
resumes the graph once.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

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
    UnknownInterruptError,
)
from ..event_types import assignee_of
from ..events import ASSIGN_NOT_ALLOWED, ASSIGNED, RESUME_REJECTED, RESUMED, VOTED
from ..projection_gaps import missing_row
from . import rules as rule
from .append import ThreadWriter, flush
from .plan import Op, Plan
from .settings import Settings

ASSIGN_KINDS: Final = ("principal", "role")
ROLE_PREFIX: Final = "role:"
"""How the service is told an assignee is a role (``{"to": "role:finance"}``)."""


class AlreadyVotedError(InterruptStateError):
    """This principal has voted on the interrupt already; nothing was written."""


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
    return w


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
) -> list[dict[str, Any]]:
    w = _open_writer(conn, thread_id, interrupt_id)
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
    return [*votes, {**data, "actor": actor, "at": at}]


class VoteOps(Settings):
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

    def vote(
        self, thread_id: str, interrupt_id: str, decision: str, response: Any = None, *, actor: str
    ) -> Plan[list[dict[str, Any]]]:
        """Record ``actor``'s vote (``interrupt.voted``: ``decision``, ``response``);
        returns every vote on the interrupt so far, this one last (``actor``,
        ``decision``, ``response``, ``at``).

        Raises:
            AlreadyVotedError: ``actor`` voted on it before; nothing was written.
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError:
                nothing was written.
            InvalidInputError: bad ids or decision, or a response that is not JSON.
        """
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        word = validation.required_id(decision, "decision")
        r = validation.json_value(response, "response", max_bytes=self.max_payload_bytes)
        votes: list[dict[str, Any]] = yield Op(
            partial(vote_interrupt, thread_id=t, interrupt_id=i, decision=word, response=r, actor=a),
            write=True,
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
