"""Answers whose outcome is unknown, and the operator who settles them (SPEC §12).

A gateway answer *claims* its interrupt before the graph runs (SPEC §8). When the
answering process dies, the claim stays. A claim whose lease ran out without the
thread's checkpoint showing the answer taken cannot be settled from the database: the
graph may have acted (its node ran, its side effect happened) and died before the step
committed. Releasing it as ``not_taken`` would let the next approval run the action a
second time and credit only the second approver.

- :func:`lapsed_claims` lists the claims whose lease ran out and that are not marked yet.
- :func:`mark_unknown` records ``interrupt.resume_rejected`` with ``why:
  "outcome_unknown"`` (actor: the claimant; ``detected_by: "sweep"``; the claim's
  ``claimed_at``) and keeps the claim row: the interrupt stays held, so it is neither
  superseded nor expired, and every answer is refused
  (:class:`~symfonic_store.InterruptOutcomeUnknownError`).
- :func:`unknown_record` says whether a held claim was marked so.
- :func:`settle` is the operator's word: ``taken`` records the claim's answer as
  ``interrupt.resumed``, ``not_taken`` as ``resume_rejected`` (``not_taken``) and the
  interrupt is open again; both carry ``settled_by``.

The mark is an event, not a column: the claim row says the answer is held, the event says
since when nobody knows what became of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db.rows import EVENT_COLUMNS, to_event
from ..db.schema import events as events_table
from ..db.statements.native import claim_row, delete_claim, open_row, stale_claims
from ..decisions import decide_unrefusable
from ..errors import InvalidInputError
from ..events import RESUME_REJECTED, RESUMED, StoredEvent
from .append import ThreadWriter, flush

OUTCOME_UNKNOWN: Final = "outcome_unknown"
"""The ``why`` of the record a sweep makes for an answer whose outcome is unknown."""

MARKER_RUN: Final = {"run": "marker"}
"""The ``decided`` value of a seed marker's claim (:mod:`.marker_runs`); a LangGraph
interrupt's claim holds its answer's decision there."""


def is_marker_run(held: dict[str, Any]) -> bool:
    """Is the claim ``held`` (a ``claim_row`` value) a seed marker's run?"""
    return held.get("decided") == MARKER_RUN


Outcome = Literal["taken", "not_taken"]
OUTCOMES: Final = ("taken", "not_taken")

# The interrupt's refusals through its index, ordered here (see log.interrupt_events).
_REJECTIONS = (
    sa.select(*EVENT_COLUMNS)
    .where(events_table.c.thread_id == sa.bindparam("t"))
    .where(events_table.c.interrupt_id == sa.bindparam("i"))
    .where(events_table.c.type == RESUME_REJECTED)
)


def answer_data(
    row: dict[str, Any], held: dict[str, Any], decision: str | None = None
) -> dict[str, Any]:
    """What a claimed answer records beside its response: decision, authentication."""
    if decision is not None:
        data: dict[str, Any] = {"decision": decision}
    elif isinstance(held.get("decided"), dict):
        data = dict(held["decided"])
    else:  # a breakpoint confirmed without a word, or a claim taken before this release
        data = decide_unrefusable(None, row["name"], row["payload"], held["response"])
    if held.get("authenticated_by") is not None:
        data["authenticated_by"] = held["authenticated_by"]
    return data


def append_taken(
    w: ThreadWriter,
    interrupt_id: str,
    row: dict[str, Any],
    held: dict[str, Any],
    *,
    via: str = "gateway",
    decision: str | None = None,
    settled_by: str | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Record the claimed answer ``held`` as taken (the claim row is the caller's to delete);
    ``extra``: more of the answer's data (``server_user``)."""
    data: dict[str, Any] = {"response": held["response"], "via": via, **answer_data(row, held, decision)}
    data.update(extra or {})
    if settled_by is not None:
        data["settled_by"] = settled_by
    w.append(RESUMED, interrupt_id=interrupt_id, actor=held["actor"], data=data)


def unknown_record(
    conn: Connection, thread_id: str, interrupt_id: str, held: dict[str, Any]
) -> StoredEvent | None:
    """The sweep's ``outcome_unknown`` record of the claim ``held``, or None (not marked)."""
    found = [to_event(row) for row in conn.execute(_REJECTIONS, {"t": thread_id, "i": interrupt_id})]
    for event in sorted(found, key=lambda e: e.version):
        data = event.data
        if (
            data.get("why") == OUTCOME_UNKNOWN
            and data.get("detected_by") == "sweep"
            and data.get("claimed_at") == held["claimed_at"]
        ):
            return event
    return None


# Alike mark_unknown in shape, deliberately: that one reads every claim again under the thread's
# lock.
def lapsed_claims(
    conn: Connection, *, claimed_before: float, thread_ids: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """Claims older than ``claimed_before`` that no sweep has marked unknown yet (a seed
    marker's run is not one: its next answer takes it over, :mod:`.marker_runs`)."""
    lapsed = []
    for thread_id, interrupt_id in stale_claims(
        conn, claimed_before=claimed_before, thread_ids=thread_ids
    ):
        held = claim_row(conn, thread_id, interrupt_id)
        if held is None or is_marker_run(held):
            continue
        if unknown_record(conn, thread_id, interrupt_id, held) is None:
            lapsed.append((thread_id, interrupt_id))
    return lapsed


# Alike lapsed_claims in shape, deliberately: each claim is read again under the thread's lock.
def mark_unknown(
    conn: Connection, *, claimed_before: float, thread_ids: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """Record every lapsed claim as ``outcome_unknown`` (the claim stays); returns them."""
    marked = []
    for thread_id, interrupt_id in lapsed_claims(
        conn, claimed_before=claimed_before, thread_ids=thread_ids
    ):
        w = ThreadWriter(conn, thread_id)  # the thread's lock, then read again under it
        held = claim_row(conn, thread_id, interrupt_id)
        if held is None or held["claimed_at"] >= claimed_before:
            continue  # settled (or claimed anew) meanwhile
        if unknown_record(conn, thread_id, interrupt_id, held) is not None:
            continue
        w.append(
            RESUME_REJECTED,
            interrupt_id=interrupt_id,
            actor=held["actor"],
            data={
                "response": held["response"],
                "why": OUTCOME_UNKNOWN,
                "error": "the process answering it stopped and its claim lapsed; the "
                "checkpoint does not show the answer taken, yet the graph may have acted",
                "via": "gateway",
                "detected_by": "sweep",
                "claimed_at": held["claimed_at"],
            },
        )
        flush(conn, [w])
        marked.append((thread_id, interrupt_id))
    return marked


def settle(
    conn: Connection, *, thread_id: str, interrupt_id: str, outcome: Outcome, actor: str
) -> None:
    """An operator says what became of an answer whose outcome is unknown."""
    where = f"interrupt {interrupt_id!r} on thread {thread_id!r}"
    w = ThreadWriter(conn, thread_id)
    held = claim_row(conn, thread_id, interrupt_id) if w.existed else None
    if held is None or unknown_record(conn, thread_id, interrupt_id, held) is None:
        raise InvalidInputError(
            "interrupt_id",
            f"{where} has no answer of unknown outcome to settle (only a claim a sweep "
            "recorded as outcome_unknown is settled); nothing was written",
        )
    row = open_row(conn, thread_id, interrupt_id)
    delete_claim(conn, thread_id, interrupt_id)
    if outcome == "taken":
        if row is None:  # pragma: no cover - a held interrupt is neither expired nor superseded
            raise InvalidInputError("interrupt_id", f"{where} is no longer open; nothing was written")
        append_taken(w, interrupt_id, row, held, settled_by=actor)
    else:
        w.append(
            RESUME_REJECTED,
            interrupt_id=interrupt_id,
            actor=held["actor"],
            data={
                "response": held["response"],
                "why": "not_taken",
                "error": "settled as not taken by an operator",
                "via": "gateway",
                "settled_by": actor,
            },
        )
    flush(conn, [w])
