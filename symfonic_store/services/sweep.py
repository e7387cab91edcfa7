"""The sweep: expire every stale pending interrupt (TTL passed, or its run moved on).

Made for cron. Work is done in batches, each one transaction: the candidates are found
with an indexed query on the projection, the seed predicate decides, and the expiries
are appended set-wise. On PostgreSQL candidate rows are locked ``FOR UPDATE SKIP
LOCKED``, so two sweeps at once split the work and never expire anything twice (the
one-ending unique key would refuse it anyway).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from ..append import ThreadWriter, flush
from ..db.statements import stale_candidates
from ..events import EXPIRED
from ..protocol import PENDING_KEY, stale_reason

Expiry = tuple[str, str, str]
"""``(thread_id, interrupt_id, reason)``"""

# The SQL prefilter compares ``minted_at < now - ttl + margin``: a superset of what the
# Python predicate (``now - minted_at > ttl``) calls stale, whatever the float rounding.
_CUTOFF_MARGIN = 1e-3


@dataclass(slots=True)
class SweepReport:
    """What a sweep expired (or, with ``dry_run``, would expire)."""

    expired: list[Expiry] = field(default_factory=list)
    dry_run: bool = False
    ttl_seconds: float | None = None
    wake_failures: list[tuple[str, str, str]] = field(default_factory=list)
    """``(thread_id, interrupt_id, error)`` for each ``on_expired`` call that raised."""
    complete: bool = True
    """False when the sweep stopped partway (:class:`~symfonic_store.SweepIncompleteError`):
    the report then lists only what was committed before the failure."""

    def wake_failed(self, thread_id: str, interrupt_id: str, exc: Exception) -> None:
        """Record an ``on_expired`` callback that raised."""
        self.wake_failures.append((thread_id, interrupt_id, f"{type(exc).__name__}: {exc}"))

    @property
    def count(self) -> int:
        return len(self.expired)

    def as_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "dry_run": self.dry_run,
            "ttl_seconds": self.ttl_seconds,
            "expired": [
                {"thread_id": t, "interrupt_id": i, "reason": r} for t, i, r in self.expired
            ],
            "wake_failures": [
                {"thread_id": t, "interrupt_id": i, "error": e} for t, i, e in self.wake_failures
            ],
        }

    def __str__(self) -> str:
        verb = "would expire" if self.dry_run else "expired"
        by_reason: dict[str, int] = {}
        for _, _, reason in self.expired:
            by_reason[reason] = by_reason.get(reason, 0) + 1
        detail = ", ".join(f"{n} {r}" for r, n in sorted(by_reason.items()))
        ttl = "none" if self.ttl_seconds is None else f"{self.ttl_seconds:g}s"
        text = f"sweep {verb} {self.count} interrupt(s)" + (f" ({detail})" if detail else "")
        if not self.complete:
            text = f"sweep stopped partway; before it stopped it {verb} {self.count} interrupt(s)"
            text += f" ({detail})" if detail else ""
        text += f"; ttl {ttl}"
        if self.wake_failures:
            text += f"; {len(self.wake_failures)} wake-up(s) failed"
        return text


@dataclass(slots=True)
class SweepBatch:
    expired: list[Expiry]
    last_thread: str | None
    """The keyset cursor for the next batch; None when there is nothing further."""


def sweep_batch(
    conn: Connection,
    *,
    ttl_seconds: float | None,
    after_thread: str,
    batch_size: int,
    dry_run: bool,
    thread_ids: Sequence[str] | None = None,
) -> SweepBatch:
    """Find (and unless ``dry_run`` expire) the stale interrupts of one batch of threads
    (of ``thread_ids`` only, when given)."""
    now = time.time()
    cutoff = None if ttl_seconds is None else now - ttl_seconds + _CUTOFF_MARGIN
    candidates = stale_candidates(
        conn,
        ttl_cutoff=cutoff,
        after_thread=after_thread,
        limit=batch_size,
        lock=not dry_run,
        thread_ids=thread_ids,
    )
    expired: list[Expiry] = []
    writers: list[ThreadWriter] = []
    for state in candidates:
        # A read-only view of the state (as_state() would deep-copy the marker).
        reason = stale_reason({PENDING_KEY: state.pending, "run_id": state.run_id}, ttl_seconds)
        interrupt_id = state.pending_interrupt_id
        if reason is None or interrupt_id is None:
            continue
        expired.append((state.thread_id, interrupt_id, reason))
        if not dry_run:
            w = ThreadWriter(conn, state.thread_id, state)
            w.append(
                EXPIRED,
                interrupt_id=interrupt_id,
                data={"reason": reason, "detected_by": "sweep"},
            )
            writers.append(w)
    flush(conn, writers)
    last = candidates[-1].thread_id if len(candidates) == batch_size else None
    return SweepBatch(expired, last)
