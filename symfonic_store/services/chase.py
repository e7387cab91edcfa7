"""The sweep's reminders and escalations (SPEC §14): chase what stays open too long.

A policy entry (:mod:`symfonic_store.policy`) may say ``remind_after`` seconds and
``escalate_after`` seconds with ``escalate_to`` roles. The sweep records
``interrupt.reminded`` (data: ``after``) and ``interrupt.escalated`` (data: ``after``,
``to``) for an interrupt still open that long after its mint (a seed marker's
``pending_since``, a LangGraph interrupt's ``minted_at``), strictly, as the TTL is
compared (rule P4). Neither ends the interrupt.

At most once each per interrupt, with the guarantees of expiries: candidates are read
without a lock, then each thread's row is locked (:class:`ThreadWriter`, in thread order,
so two sweeps never deadlock on each other) and what is still open and not yet chased is
decided again under the lock; the partial unique indexes
``uq_symfonic_events_one_reminder`` and ``..._one_escalation`` keep "once" whatever
races them (a violation is a lost race, retried and decided again).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from ..db.statements.chase import ChaseKey, chase_candidates, chased_on, escalations
from ..db.statements.native import open_row
from ..events import ESCALATED, REMINDED
from ..policy import Policy
from ..protocol import ttl_passed
from ..store.append import ThreadWriter, flush
from ..sweep_report import SweepReport

# As the expiry's prefilter: a superset of what the Python predicate calls due.
_CUTOFF_MARGIN = 1e-3


@dataclass(frozen=True, slots=True)
class Due:
    """One reminder or escalation the policy calls for."""

    thread_id: str
    interrupt_id: str
    type: str
    after: float
    to: tuple[str, ...] = ()

    @property
    def data(self) -> dict[str, Any]:
        after = int(self.after) if float(self.after).is_integer() else self.after
        return {"after": after, "to": list(self.to)} if self.type == ESCALATED else {"after": after}

    def report_to(self, report: SweepReport) -> None:
        """List it in the sweep's report (recorded, or due in a dry run)."""
        after = self.data["after"]
        if self.type == ESCALATED:
            report.escalated.append((self.thread_id, self.interrupt_id, after, self.to))
        else:
            report.reminded.append((self.thread_id, self.interrupt_id, after))


def due(row: dict[str, Any], policy: Policy, now: float) -> list[Due]:
    """What ``row`` (a candidate: name, since, reminded, escalated) is due for now."""
    chase = policy.chase_for(row["name"])
    if chase is None:
        return []
    found = []
    t, i, since = str(row["thread_id"]), str(row["interrupt_id"]), row["since"]
    if chase.remind_after is not None and not row["reminded"] and ttl_passed(since, chase.remind_after, now):
        found.append(Due(t, i, REMINDED, chase.remind_after))
    if (
        chase.escalate_after is not None
        and not row["escalated"]
        and ttl_passed(since, chase.escalate_after, now)
    ):
        found.append(Due(t, i, ESCALATED, chase.escalate_after, chase.escalate_to))
    return found


@dataclass(slots=True)
class ChasePage:
    due: list[Due]
    last_key: ChaseKey | None
    """The keyset cursor of the next page; None when there is nothing further."""


def chase_page(
    conn: Connection,
    *,
    policy: Policy,
    native: bool,
    after: ChaseKey | None,
    limit: int,
    thread_ids: Sequence[str] | None,
    skip: Collection[tuple[str, str]] = (),
) -> ChasePage:
    """One page of candidates and what they are due for (read only). ``skip``:
    ``(thread_id, interrupt_id)`` pairs to leave alone (a dry run's would-be expiries)."""
    now = time.time()
    earliest = policy.earliest()
    if earliest is None:
        return ChasePage([], None)
    rows = chase_candidates(
        conn, native=native, cutoff=now - earliest + _CUTOFF_MARGIN, after=after, limit=limit,
        thread_ids=thread_ids,
    )
    found = [
        d for row in rows if (row["thread_id"], row["interrupt_id"]) not in skip
        for d in due(row, policy, now)
    ]
    last = (
        (float(rows[-1]["since"]), str(rows[-1]["thread_id"]), str(rows[-1]["interrupt_id"]))
        if len(rows) == limit
        else None
    )
    return ChasePage(found, last)


def record(conn: Connection, items: Sequence[Due], *, native: bool) -> list[Due]:
    """Append the reminders and escalations of ``items`` that are still due under each
    thread's lock (the interrupt still open, not chased yet); returns those appended."""
    by_thread: dict[str, list[Due]] = {}
    for d in items:
        by_thread.setdefault(d.thread_id, []).append(d)
    recorded: list[Due] = []
    writers: list[ThreadWriter] = []
    for thread_id in sorted(by_thread):  # one lock order for every sweep
        w = ThreadWriter(conn, thread_id)
        wanted = sorted({d.interrupt_id for d in by_thread[thread_id]})
        if native:  # by their keys: the thread's other open interrupts cost nothing
            still_open = {i for i in wanted if open_row(conn, thread_id, i) is not None}
        else:
            pending = w.state.pending_interrupt_id
            still_open = set() if pending is None else {str(pending)}
        done = chased_on(conn, thread_id, wanted)
        for d in by_thread[thread_id]:
            if d.interrupt_id not in still_open or (d.interrupt_id, d.type) in done:
                continue
            w.append(d.type, interrupt_id=d.interrupt_id, data=d.data)
            done.add((d.interrupt_id, d.type))
            recorded.append(d)
        writers.append(w)
    flush(conn, writers)
    return recorded


def escalated_on(
    conn: Connection, thread_ids: Sequence[str], keys: Sequence[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """The escalations recorded on these threads, or of these interrupts (see
    :func:`~symfonic_store.db.statements.chase.escalations`)."""
    return escalations(conn, thread_ids, keys)
