"""The sweep: expire every stale pending interrupt (TTL passed, or its run moved on).

Made for cron. Work is done in batches, each one transaction: the candidates are found
with an indexed query on the projection, the seed predicate decides, and the expiries
are appended set-wise. Each test reads an index that holds what it looks for, so a
batch costs the stale interrupts it finds, never the open ones that are not stale: the
markers whose run moved on first (``ix_symfonic_threads_run_moved_on``, in thread
order), then those past the TTL (``ix_symfonic_threads_pending_since``, oldest first, up
to the cutoff), then LangGraph's own past the TTL (``ix_symfonic_open_interrupts_minted_at``). On PostgreSQL candidate rows are locked ``FOR UPDATE SKIP
LOCKED``, so two sweeps at once split the work and never expire anything twice (the
one-ending unique key would refuse it anyway).

Wake-ups are at-least-once. Each batch records, in its own transaction, one row per
expiry in ``symfonic_wakeups``: the wake-up it owes. A row is deleted only once
``on_expired`` returned for it, so a batch whose commit reached the server but not the
client (the connection dropped at COMMIT) still has its wake-ups on record, and the
next sweep delivers them before it expires anything new. A sweep that will call back
inserts its rows already *claimed* (``claimed_by`` = the sweep, ``claimed_until`` = now
plus :data:`WAKE_LEASE_SECONDS`), and claims older owed rows under ``FOR UPDATE SKIP
LOCKED``: two sweeps at once never deliver the same wake-up at the same time. A claim
lapses if its sweep dies; a sweep that stops on an error lets its claims go when the
database still answers.

A callback that raises leaves the wake-up owed (``attempts`` and ``last_error`` record
it): it is tried again by the next sweep, once per sweep, never in a loop. Without
``on_expired`` the rows stay owed until a sweep with a callback delivers them.

A wake-up is owed to the graph whose name the interrupt's mint recorded (the row's
``graph``; NULL for a seed marker or a mint that names none). A sweep whose callback
wakes graph X (``graph`` = X) takes only X's and the unnamed ones; a callback that finds
its graph's checkpointer does not hold the thread returns :data:`NOT_HELD`, and the
wake-up stays owed, untouched, for the graph that does. Rows an operator dropped
(``dropped_at``) are owed to nobody.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy.engine import Connection

from ..db.statements.native import OpenKey, claim_row, open_row, stale_open_interrupts
from ..db.statements.threads import TtlKey, run_moved_on_threads, ttl_threads
from ..db.statements.wakeups import (
    claim_wakeups,
    claimable_wakeups,
    delete_wakeup,
    insert_wakeups,
    record_failed_wakeup,
    release_claims,
    renew_claims,
)
from ..db.wakeups import owed_by_graph
from ..events import EXPIRED
from ..protocol import PENDING_KEY, stale_reason, ttl_passed
from ..store.append import ThreadWriter, flush
from ..sweep_report import Expiry

CLAIM_LEASE_SECONDS = 900.0
"""How long a gateway answer may hold its claim before a sweep treats its process as
gone and settles it from the thread's checkpoint (a graph step running longer than this
would see its answer settled under it)."""

WAKE_LEASE_SECONDS = 600.0
"""How long a sweep holds the owed wake-ups it is delivering (renewed as it goes); a
sweep that died lets them go when the lease runs out."""

# The SQL prefilter compares ``minted_at < now - ttl + margin``: a superset of what the
# Python predicate (``now - minted_at > ttl``) calls stale, whatever the float rounding.
_CUTOFF_MARGIN = 1e-3


class _NotHeld:
    """The type of :data:`NOT_HELD` (false in a boolean test: nothing was woken)."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_HELD"


NOT_HELD: Final = _NotHeld()
"""What an ``on_expired`` callback returns when its graph's checkpointer does not hold the
thread: the wake-up is another graph's to deliver, so the sweep leaves it owed, untouched
(not counted as delivered, not as a failure)."""


def owes(sweep_graph: str | None, graph: str | None) -> bool:
    """Is a wake-up owed to ``graph`` this sweep's to deliver? (``sweep_graph`` None: every one.)"""
    return sweep_graph is None or graph is None or graph == sweep_graph


MarkerCursor = tuple[str, "str | TtlKey | None"]
"""Where a sweep of the seed markers is: ``("run", last thread id)`` while it reads the
threads whose run moved on, then ``("ttl", last key or None)`` while it reads those past
the TTL."""
FIRST_MARKERS: MarkerCursor = ("run", "")


@dataclass(slots=True)
class SweepBatch:
    expired: list[Expiry]
    last_marker: MarkerCursor | None
    """The keyset cursor of the next batch of seed markers; None when there is nothing further."""
    last_key: OpenKey | None = None
    """The ``(minted_at, thread_id, interrupt_id)`` cursor of a batch of LangGraph interrupts."""
    to_wake: list[Expiry] = field(default_factory=list)
    """The expiries whose wake-up this sweep holds, to deliver now (owed to its graph)."""


@dataclass(slots=True)
class WakeClaim:
    """One sweep's hold on the wake-ups it delivers: its id, and when it last renewed."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    renewed_at: float = field(default_factory=time.time)

    def renewal_due(self) -> bool:
        """Half the lease has passed since the last renewal (the caller renews now)."""
        now = time.time()
        if now - self.renewed_at < WAKE_LEASE_SECONDS / 2:
            return False
        self.renewed_at = now
        return True


def sweep_batch(
    conn: Connection,
    *,
    ttl_seconds: float | None,
    after: MarkerCursor,
    batch_size: int,
    dry_run: bool,
    thread_ids: Sequence[str] | None = None,
    claim: WakeClaim | None = None,
) -> SweepBatch:
    """Find (and unless ``dry_run`` expire) the stale seed markers of one batch (of
    ``thread_ids`` only, when given), recording the wake-up each expiry owes (held by
    ``claim`` when the sweep is about to deliver them).

    ``after`` says which test the batch reads (:data:`MarkerCursor`): the threads whose
    run moved on, then, with a TTL, those past it; each from an index holding only what
    it looks for, so the batch reads the stale threads it returns and no other."""
    now = time.time()
    test, key = after
    lock = not dry_run
    following: MarkerCursor | None
    if test == "run":
        assert isinstance(key, str)
        candidates = run_moved_on_threads(
            conn, after_thread=key, limit=batch_size, lock=lock, thread_ids=thread_ids
        )
        if len(candidates) == batch_size:
            following = ("run", candidates[-1].thread_id)
        else:
            following = None if ttl_seconds is None else ("ttl", None)
    else:
        assert ttl_seconds is not None and not isinstance(key, str)
        candidates = ttl_threads(
            conn,
            cutoff=now - ttl_seconds + _CUTOFF_MARGIN,
            after=key,
            limit=batch_size,
            lock=lock,
            thread_ids=thread_ids,
        )
        last = candidates[-1] if len(candidates) == batch_size else None
        following = None if last is None else ("ttl", (last.pending_since or 0.0, last.thread_id))
    expired: list[Expiry] = []
    writers: list[ThreadWriter] = []
    owed: list[dict[str, Any]] = []
    for state in candidates:
        # A read-only view of the state (as_state() would deep-copy the marker).
        reason = stale_reason({PENDING_KEY: state.pending, "run_id": state.run_id}, ttl_seconds)
        interrupt_id = state.pending_interrupt_id
        if reason is None or interrupt_id is None:
            continue
        if dry_run and test == "ttl" and reason != "ttl":
            continue  # the run test listed it already (a real sweep expired it then)
        expired.append((state.thread_id, interrupt_id, reason))
        if not dry_run:
            w = ThreadWriter(conn, state.thread_id, state)
            event = w.append(
                EXPIRED,
                interrupt_id=interrupt_id,
                data={"reason": reason, "detected_by": "sweep"},
            )
            writers.append(w)
            owed.append(_owed_row(w, event, reason, claim, now, None))  # a seed marker names no graph
    flush(conn, writers)
    # In the expiries' own transaction: committed together, or not at all.
    insert_wakeups(conn, owed)
    return SweepBatch(expired, following, to_wake=[] if claim is None or dry_run else list(expired))


def _owed_row(
    w: ThreadWriter,
    event: Any,
    reason: str,
    claim: WakeClaim | None,
    now: float,
    graph: str | None,
) -> dict[str, Any]:
    return {
        "graph": graph,
        "thread_id": w.thread_id,
        "interrupt_id": event.interrupt_id,
        "reason": reason,
        "expired_version": event.version,
        "expired_at": event.occurred_at,
        "attempts": 0,
        "claimed_by": None if claim is None else claim.id,
        "claimed_until": None if claim is None else now + WAKE_LEASE_SECONDS,
    }


def sweep_native_batch(
    conn: Connection,
    *,
    ttl_seconds: float,
    after: OpenKey | None,
    batch_size: int,
    dry_run: bool,
    thread_ids: Sequence[str] | None = None,
    claim: WakeClaim | None = None,
    graph: str | None = None,
) -> SweepBatch:
    """As :func:`sweep_batch`, for open LangGraph interrupts older than the TTL.

    An interrupt with an answer in flight (a gateway claim) is left alone: its graph
    run settles it. Keyset-paged on ``(minted_at, thread_id, interrupt_id)``, oldest
    first, up to the cutoff (:func:`stale_open_interrupts`). Each wake-up is owed
    to the graph its mint named; ``claim`` holds only those owed to ``graph`` (the
    sweep's, see :func:`owes`) -- the others stay owed to their own graph.
    """
    now = time.time()
    rows = stale_open_interrupts(
        conn,
        cutoff=now - ttl_seconds + _CUTOFF_MARGIN,
        after=after,
        limit=batch_size,
        thread_ids=thread_ids,
    )
    expired: list[Expiry] = []
    writers: dict[str, ThreadWriter] = {}
    owed: list[dict[str, Any]] = []
    to_wake: list[Expiry] = []
    for row in rows:
        if not ttl_passed(row["minted_at"], ttl_seconds, now):  # rule P4
            continue
        expired.append((row["thread_id"], row["interrupt_id"], "ttl"))
        if dry_run:
            continue
        w = writers.get(row["thread_id"])
        if w is None:
            # The thread's lock decides (as for every append); whether the interrupt is
            # still open is read under it (by its key: the thread's other open interrupts
            # cost nothing), so a concurrent sweep or answer is never expired over.
            w = writers[row["thread_id"]] = ThreadWriter(conn, row["thread_id"])
        key = (conn, row["thread_id"], row["interrupt_id"])
        if open_row(*key) is None or claim_row(*key) is not None:
            expired.pop()
            continue
        event = w.append(
            EXPIRED, interrupt_id=row["interrupt_id"], data={"reason": "ttl", "detected_by": "sweep"}
        )
        ours = claim is not None and owes(graph, row["graph"])
        owed.append(_owed_row(w, event, "ttl", claim if ours else None, now, row["graph"]))
        if ours:
            to_wake.append(expired[-1])
    flush(conn, list(writers.values()))
    if owed:
        insert_wakeups(conn, owed)
    last = (
        (rows[-1]["minted_at"], rows[-1]["thread_id"], rows[-1]["interrupt_id"])
        if len(rows) == batch_size
        else None
    )
    return SweepBatch(expired, None, last, to_wake)


# A signature alike claimable_wakeups' (db/statements/wakeups.py) in shape only: this one claims.
def claim_owed(
    conn: Connection,
    *,
    claim: WakeClaim,
    after: tuple[str, str],
    limit: int,
    thread_ids: Sequence[str] | None,
    graph: str | None = None,
) -> list[Expiry]:
    """Take hold of up to ``limit`` owed wake-ups nobody holds, after the keyset ``after``
    (with ``graph``, only those owed to it or to no named graph)."""
    now = time.time()
    owed = claimable_wakeups(
        conn, now=now, after=after, limit=limit, thread_ids=thread_ids, graph=graph
    )
    claim_wakeups(conn, [(t, i) for t, i, _ in owed], claim=claim.id, until=now + WAKE_LEASE_SECONDS)
    return owed


def settle_wakeup(
    conn: Connection,
    *,
    claim: WakeClaim,
    thread_id: str,
    interrupt_id: str,
    error: str | None,
    renew: bool,
) -> None:
    """After one ``on_expired`` call: delivered (``error`` None) forgets the wake-up; a
    failure records it and leaves it owed. ``renew`` extends the sweep's other claims."""
    if error is None:
        delete_wakeup(conn, thread_id, interrupt_id)
    else:
        record_failed_wakeup(conn, thread_id, interrupt_id, error)
    if renew:
        renew_claims(conn, claim=claim.id, until=time.time() + WAKE_LEASE_SECONDS)


def let_go(conn: Connection, *, claim: WakeClaim) -> None:
    """A sweep that stops early releases what it holds: the next sweep delivers it."""
    release_claims(conn, claim=claim.id)


def count_owed(conn: Connection, *, thread_ids: Sequence[str] | None) -> dict[str | None, int]:
    """How many wake-ups are owed to each graph (on ``thread_ids`` only, when given)."""
    return owed_by_graph(conn, thread_ids=thread_ids)
