"""Verify the evidence: every hash chain, and every thread's projection head against it.

The hash chain shows an event changed or removed *inside* a thread: each event's hash
covers its content and the previous link. It cannot show events removed from the *end*
of a thread (what is left is still a valid chain). The projection row of each thread
keeps the head it last wrote -- ``version`` and ``last_hash`` -- in the same transaction
as the event (I6), so a head the events no longer reach is that removal's trace.

A thread archived by ``archive`` (SPEC §10) keeps its head with ``archived_version``: its
chain starts again after that version, from the hash its archive record holds, and a
head with no events is the archived head, not a removal, when that record matches it.

The audit columns beside each event (symfonic_store/audit_columns.py: the copies of its
data that ``audit()`` reads) are not covered by the hash: ``verify`` recomputes each one
from the hashed data, and a copy that disagrees is that event's problem (``kind`` audit),
so "who approved what" cannot be changed through them unnoticed.

Neither check stops someone who re-forges the chain and the head together; the signed
checkpoints do (services/evidence/). ``verify`` also reports append-only triggers that
are missing, disabled or replaced (db/guards.py): while they are off, anything goes; and
each table of the store's schema that is missing (db/tables.py), which ``db upgrade``
does not bring back (the schema is still "at head") and ``db guards --restore`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from ..audit_columns import AUDIT_COLUMNS
from ..audit_columns import derive as derive_audit_columns
from ..db.backends.base import GUARD_CHECK
from ..db.guards import guard_problems
from ..db.schema import ARCHIVED_THREADS_TABLE, EVENTS_TABLE, THREADS_TABLE
from ..db.statements.audit import audit_columns_query
from ..db.statements.evidence import archived_bases_for_live_events, unmarked_archive_records
from ..db.statements.log import all_events_by_thread_query, stream_events, stream_rows
from ..db.statements.projection import projection_heads_query
from ..db.tables import EVENT_LOG_GONE, missing_tables
from ..events import GENESIS_HASH, StoredEvent, canonical_json, stored_hash_is_valid

CHAIN = "chain"
"""A link of a thread's hash chain does not hold (a version gap or a bad hash)."""
HEAD = "head"
"""A thread's projection head (version, last hash) does not match its last event."""
AUDIT = "audit"
"""An event's audit column disagrees with its (hashed) data: the copy was altered."""
NO_EVENTS = "no_events"
"""``verify(thread_id=T)`` of a thread that has no events and no projection head."""
_READ_FOR_CHAINS = frozenset({EVENTS_TABLE, THREADS_TABLE, ARCHIVED_THREADS_TABLE})
"""The tables the chains and heads are checked from."""


@dataclass(frozen=True, slots=True)
class BrokenLink:
    """The first problem found on a thread: where it is and what is wrong.

    ``version`` is the chain's broken event (``kind == "chain"``) or the projection's
    head version (``"head"``); ``position`` the event at fault, or for a head the
    thread's last event (None when there is none).
    """

    thread_id: str
    version: int | None
    position: int | None
    problem: str
    kind: str = CHAIN

    def __str__(self) -> str:
        if self.kind == CHAIN:
            return (
                f"thread {self.thread_id!r}: chain broken at version {self.version} "
                f"(position {self.position}): {self.problem}"
            )
        if self.kind == HEAD:
            last = "" if self.position is None else f" (last event at position {self.position})"
            return (
                f"thread {self.thread_id!r}: projection head at version {self.version} "
                f"does not match the events{last}: {self.problem}"
            )
        if self.kind == AUDIT:
            return (
                f"thread {self.thread_id!r}: audit columns of version {self.version} "
                f"(position {self.position}) do not match the event: {self.problem}"
            )
        return f"thread {self.thread_id!r}: {self.problem}"


@dataclass(frozen=True, slots=True)
class Head:
    """A thread's projection head beside its last event, read in one statement."""

    thread_id: str
    version: int | None
    """The projection row's version; None when the thread has no projection row."""
    last_hash: str | None
    event_version: int | None
    """The thread's last event; None (with its hash and position) when it has none."""
    event_hash: str | None
    event_position: int | None
    archived_version: int | None = None
    """The projection row's ``archived_version`` (SPEC §10), if any."""
    archived_hash: str | None = None
    """The hash the archive record of that version holds (None without a record)."""


@dataclass(slots=True)
class VerifyReport:
    """``ok`` when every chain holds and every projection head matches its last event;
    ``broken`` names the first problem per thread."""

    threads_checked: int = 0
    events_checked: int = 0
    broken: list[BrokenLink] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    """What is wrong with the append-only triggers (missing, disabled, replaced)."""
    missing: list[str] = field(default_factory=list)
    """The tables of the store's schema that the database no longer has (names)."""
    chains_checked: bool = True
    """False when a table the chains and heads are read from is missing."""

    @property
    def ok(self) -> bool:
        return not self.broken and not self.guards and not self.missing

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if not self.chains_checked:
            verdict = "the chains and heads could not be checked: a table they are read from is missing"
        elif not self.broken:
            verdict = "all hash chains hold and every projection head matches its last event"
        else:
            verdict = f"{len(self.broken)} thread(s) with a problem"
        head = f"verified {self.events_checked} event(s) on {self.threads_checked} thread(s): {verdict}"
        return "\n".join([head, *map(table_missing, self.missing), *(str(b) for b in self.broken), *self.guards])


def verify_events(
    events: Iterable[StoredEvent], bases: dict[str, tuple[int, str]] | None = None
) -> VerifyReport:
    """Check the hash chains of events given in (thread_id, version) order; a thread in
    ``bases`` (archived up to a version, with that version's hash) starts after it."""
    report = VerifyReport()
    bases = bases or {}
    thread: str | None = None
    expected_version = 1
    prev_hash = GENESIS_HASH
    broken = False
    for event in events:
        if event.thread_id != thread:
            thread, broken = event.thread_id, False
            version, prev_hash = bases.get(thread, (0, GENESIS_HASH))
            expected_version = version + 1
            report.threads_checked += 1
        report.events_checked += 1
        if broken:
            continue
        problem = None
        if event.version != expected_version:
            problem = f"expected version {expected_version}, found {event.version} (a gap or a duplicate)"
        elif not stored_hash_is_valid(event, prev_hash):
            problem = "the stored hash does not match the event's content and the previous hash"
        if problem is not None:
            report.broken.append(BrokenLink(event.thread_id, event.version, event.position, problem))
            broken = True
            continue
        expected_version += 1
        prev_hash = event.hash
    return report


def _comparable(value: Any) -> str:
    # JSON's own equality: True is not 1, 1.0 is not 1, a key order does not matter.
    if isinstance(value, datetime):
        return value.isoformat()
    return canonical_json(value)


def audit_column_problems(rows: Iterable[Sequence[Any]], broken: set[str]) -> list[BrokenLink]:
    """The first event per thread whose audit columns are not what its data gives
    (rows of :func:`~symfonic_store.db.statements.audit_columns_query`); threads in
    ``broken`` (a chain already broken) are skipped."""
    found: list[BrokenLink] = []
    seen = set(broken)
    for row in rows:
        thread_id, version, position, type_, data, occurred_at = row[:6]
        if thread_id in seen:
            continue
        expected = derive_audit_columns(type_, data if isinstance(data, dict) else {}, occurred_at)
        for name, stored in zip(AUDIT_COLUMNS, row[6:], strict=True):
            if _comparable(stored) != _comparable(expected[name]):
                found.append(
                    BrokenLink(
                        thread_id, version, position,
                        f"{name} is {_comparable(stored)}, the event's data gives "
                        f"{_comparable(expected[name])}: the column was altered (the hash "
                        "covers the data, which audit() does not read)",
                        AUDIT,
                    )
                )
                seen.add(thread_id)
                break
    return found


def head_problem(head: Head) -> BrokenLink | None:
    """What is wrong with a thread's projection head, or None when it is its last event."""
    pv, ev = head.version, head.event_version
    if pv is None and ev is None:
        return None
    if head.archived_version is not None:
        if head.archived_hash is None:
            return BrokenLink(
                head.thread_id, head.archived_version, head.event_position,
                f"the projection marks versions up to {head.archived_version} as archived, but "
                "no archive record holds that head: it was altered (or the record removed)",
                HEAD,
            )
        if ev is None and pv == head.archived_version:
            if head.last_hash == head.archived_hash:
                return None  # the archived head, and nothing after it
            return BrokenLink(
                head.thread_id, pv, None,
                "the projection's last hash is not the archived head's: the projection was altered",
                HEAD,
            )
    if ev is None:
        problem = (
            f"the projection holds a head at version {pv} but the thread has no events: "
            "they were removed"
        )
    elif pv is None:
        return BrokenLink(
            head.thread_id, ev, head.event_position,
            f"the thread has events up to version {ev} but no projection row: the projection "
            "was altered (`symfonic-store projection rebuild` restores it from the events)",
            HEAD,
        )
    elif pv > ev:
        problem = (
            f"the projection's head is version {pv}, but the last event is version {ev}: "
            f"the events after version {ev} were removed (or the projection was altered)"
        )
    elif pv < ev:
        problem = (
            f"the projection's head is version {pv}, but the events go on to version {ev}: "
            "events were added behind the store's back, or the projection was rolled back"
        )
    elif head.last_hash != head.event_hash:
        problem = (
            f"the projection's last hash is not the hash of the last event (version {ev}): "
            "the last event was rewritten (or the projection was altered)"
        )
    else:
        return None
    return BrokenLink(head.thread_id, pv, head.event_position, problem, HEAD)


def check_heads(report: VerifyReport, heads: Iterable[Head], *, thread_id: str | None) -> VerifyReport:
    """Add the head problems of threads whose chains hold (a broken chain is the first
    problem already); ``thread_id`` given and found nowhere is a problem too."""
    chain_broken = {b.thread_id for b in report.broken}
    seen = False
    for head in heads:
        seen = True
        if head.event_version is None:
            report.threads_checked += 1  # a projection row the event stream did not count
        if head.thread_id in chain_broken:
            continue
        link = head_problem(head)
        if link is not None:
            report.broken.append(link)
    if thread_id is not None and not seen:
        report.broken.append(
            BrokenLink(
                thread_id, None, None,
                "the thread has no events and no projection head: nothing to verify; "
                "check the thread id (`symfonic-store pending` lists what is waiting)",
                NO_EVENTS,
            )
        )
    report.broken.sort(key=lambda b: b.thread_id)
    return report


def table_missing(name: str) -> str:
    """The line ``verify`` reports for a table of the store's schema that is gone."""
    if name == EVENTS_TABLE:
        return EVENT_LOG_GONE
    return (
        f"the table {name} of the store's schema is missing: it was dropped "
        f"(`symfonic-store db guards --restore` recreates it, empty; {GUARD_CHECK})"
    )


def verify(conn: Connection, *, thread_id: str | None) -> VerifyReport:
    """The store's tables (each one missing is a problem), the chains (one streamed pass
    over the events), then the heads (one statement), then the audit columns against the
    data (a pass over the mints, endings and refusals), then the append-only triggers.
    Without a table the chains and heads are read from, only the tables and triggers
    are checked."""
    missing = missing_tables(conn)
    if set(missing) & _READ_FOR_CHAINS:
        return VerifyReport(missing=missing, guards=guard_problems(conn), chains_checked=False)
    report = _verify_chains(conn, thread_id=thread_id)
    report.missing = missing
    return report


def _verify_chains(conn: Connection, *, thread_id: str | None) -> VerifyReport:
    bases = archived_bases_for_live_events(conn, thread_id)
    report = verify_events(stream_events(conn, all_events_by_thread_query(thread_id)), bases)
    heads = (Head(*row) for row in conn.execute(projection_heads_query(thread_id)))
    check_heads(report, heads, thread_id=thread_id)
    broken = {b.thread_id for b in report.broken}
    copies = audit_column_problems(stream_rows(conn, audit_columns_query(thread_id)), broken)
    report.broken.extend(copies)
    broken.update(b.thread_id for b in copies)
    for t, version, marked in unmarked_archive_records(conn, thread_id):
        if t in broken:
            continue
        state = "has no projection row" if marked is None else f"is marked archived up to version {marked}"
        report.broken.append(
            BrokenLink(
                t, version, None,
                f"the archive records hold its head at version {version}, but the thread {state}: "
                "the projection was altered, and a later event would not chain on from the archived head",
                HEAD,
            )
        )
    report.broken.sort(key=lambda b: b.thread_id)
    report.guards = guard_problems(conn)
    return report
