"""The figures ``/metrics`` shows, kept in the database (SPEC §17): the log's counters
folded once per event by whichever process scrapes, and the open-interrupt counts the
writes keep (:mod:`symfonic_store.db.statements.counts`).

- :func:`fold_page` folds the events after the fold's position (one page, gap-safe as
  ``events(after=...)`` reads, I11) into the counters and moves the position, in one
  transaction holding the fold row: two scrapers (two replicas) never fold an event twice,
  and a new process starts where the last one stopped, not at position 0.
- :func:`compact` moves the open-count deltas the writes appended into the totals.
- :func:`snapshot` reads it all back: a few rows, however large the store.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.engine import Connection

from ..db.statements import counts as sql
from ..db.statements.log import events_after
from ..db.statements.tenants import Scope
from ..events import EXPIRED, RESUME_REJECTED, RESUMED, StoredEvent, refused_assignment

ANSWER_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0,
                  4 * 3600.0, 12 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0)
"""The histogram's upper bounds (seconds); a bucket's label is its bound's ``str`` (or
``+Inf``), as migration ``0026_metric_counts`` wrote them."""
BUCKET_LABELS = (*map(str, ANSWER_BUCKETS), "+Inf")
PAGE = 2000
"""Events one fold transaction takes."""

ANSWERS, EXPIRIES, EVENTS = "answers", "expiries", "events"
BUCKET, ANSWER_SUM = "answer_seconds_bucket", "answer_seconds_sum"


def tally(page: Sequence[StoredEvent], minted: dict[tuple[str, str], datetime]) -> dict[tuple[str, str], float]:
    """What ``page`` adds to the counters; ``minted``: when its resumed interrupts were
    minted, where the log still has the mint."""
    added: defaultdict[tuple[str, str], float] = defaultdict(float)
    for event in page:
        added[(EVENTS, event.type)] += 1
        if event.type == RESUMED:
            added[(ANSWERS, "resumed")] += 1
            at = minted.get((event.thread_id, str(event.interrupt_id)))
            if at is not None:
                waited = max(0.0, (event.occurred_at - at).total_seconds())
                added[(BUCKET, BUCKET_LABELS[bisect.bisect_left(ANSWER_BUCKETS, waited)])] += 1
                added[(ANSWER_SUM, "")] += waited
        elif event.type == RESUME_REJECTED and not refused_assignment(event.data):
            added[(ANSWERS, str(event.data.get("why")))] += 1
        elif event.type == EXPIRED:
            added[(EXPIRIES, str(event.data.get("reason")))] += 1
    return dict(added)


def fold_page(conn: Connection, *, limit: int = PAGE) -> tuple[int, int]:
    """Fold up to ``limit`` events after the fold's position; returns the position
    reached and how many events were folded. Run in a write transaction that appends
    nothing (the fold row's lock makes scrapers take turns)."""
    position = sql.fold_position(conn, lock=True)
    page = events_after(conn, after=position, limit=limit)
    if not page:
        return position, 0
    resumed = [(e.thread_id, str(e.interrupt_id)) for e in page if e.type == RESUMED]
    sql.add_to_counters(conn, tally(page, sql.mint_times(conn, resumed)))
    sql.set_fold_position(conn, page[-1].position)
    return page[-1].position, len(page)


def caught_up(conn: Connection) -> tuple[bool, int]:
    """A read-only check before :func:`fold_page`: ``(True, position)`` when no event
    follows the fold's position (nothing to fold, no write lock taken)."""
    position = sql.fold_position(conn, lock=False)
    return not events_after(conn, after=position, limit=1), position


def compact(conn: Connection) -> int:
    """Move open-count deltas into the totals (holding the fold row); returns how many."""
    sql.fold_position(conn, lock=True)
    return sql.compact(conn)


def nothing_to_compact(conn: Connection) -> tuple[bool, int]:
    """A read-only check before :func:`compact`."""
    return not sql.has_deltas(conn), 0


@dataclass
class Snapshot:
    """What a scrape shows of the store's counts."""

    position: int
    open: dict[str, int]
    oldest_open: float | None
    answers: dict[str, float] = field(default_factory=dict)
    expiries: dict[str, float] = field(default_factory=dict)
    by_type: dict[str, float] = field(default_factory=dict)
    buckets: list[float] = field(default_factory=list)
    """Per bucket of :data:`BUCKET_LABELS`, not cumulative."""
    answer_sum: float = 0.0


def snapshot(conn: Connection, scope: Scope) -> Snapshot:
    """The counts now; the open ones of ``scope``'s tenants (None: all)."""
    found = Snapshot(
        position=sql.fold_position(conn, lock=False),
        open=sql.open_by_source(conn, scope),
        oldest_open=sql.oldest_open(conn, scope),
    )
    buckets = dict.fromkeys(BUCKET_LABELS, 0.0)
    for metric, label, value in sql.counter_values(conn):
        if metric == ANSWERS:
            found.answers[label] = value
        elif metric == EXPIRIES:
            found.expiries[label] = value
        elif metric == EVENTS:
            found.by_type[label] = value
        elif metric == BUCKET and label in buckets:
            buckets[label] = value
        elif metric == ANSWER_SUM:
            found.answer_sum = value
    found.buckets = list(buckets.values())
    return found
