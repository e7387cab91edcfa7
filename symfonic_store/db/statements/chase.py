"""The sweep's reminders and escalations (SPEC §14): the open interrupts old enough to be
chased, and what each thread was already chased for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import ESCALATED, REMINDED
from ..schema import events, open_interrupts, threads

CHASES = (REMINDED, ESCALATED)


def _chased(kind: str, thread_id: Any, interrupt_id: Any) -> sa.ColumnElement[bool]:
    """Has this interrupt an event of ``kind``? (the partial unique index answers it)"""
    return sa.exists().where(
        events.c.thread_id == thread_id,
        events.c.interrupt_id == interrupt_id,
        events.c.type == kind,
    )


ChaseKey = tuple[float, str, str]
"""A candidate's place in the chase's order: ``(since, thread_id, interrupt_id)``."""


def chase_candidates(
    conn: Connection,
    *,
    native: bool,
    cutoff: float,
    after: ChaseKey | None,
    limit: int,
    thread_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Open interrupts older than ``cutoff`` (Unix seconds): seed markers (the thread
    rows' pending marker) or, with ``native``, LangGraph's own (the open-interrupts rows).

    Dicts of ``thread_id``, ``interrupt_id``, ``name``, ``since`` (what the age counts
    from: the marker's ``pending_since``, the interrupt's ``minted_at``), ``reminded``
    and ``escalated`` (has it been?). Keyset-paged on ``(since, thread_id,
    interrupt_id)``, oldest first, after ``after`` (None: from the oldest), read from the
    index on ``since`` up to the cutoff (``ix_symfonic_threads_pending_since``,
    ``ix_symfonic_open_interrupts_minted_at``, as the TTL sweep reads them): the open
    interrupts younger than the cutoff are never read (SPEC §17). Not locked: the sweep
    takes each thread's lock and decides again under it.
    """
    if native:
        t, i = open_interrupts.c.thread_id, open_interrupts.c.interrupt_id
        name: Any = open_interrupts.c.name
        since: Any = open_interrupts.c.minted_at
    else:
        t, i = threads.c.thread_id, threads.c.pending_interrupt_id
        name = threads.c.pending["name"].as_string()
        since = threads.c.pending_since
    query = sa.select(
        t.label("thread_id"),
        i.label("interrupt_id"),
        name.label("name"),
        since.label("since"),
        _chased(REMINDED, t, i).label("reminded"),
        _chased(ESCALATED, t, i).label("escalated"),
    ).where(since < cutoff)
    if not native:
        query = query.where(i.is_not(None))
    if after is not None:
        at, thread_id, interrupt_id = after
        query = query.where(since >= at).where(
            sa.or_(since > at, sa.tuple_(t, i) > sa.tuple_(sa.literal(thread_id), sa.literal(interrupt_id)))
        )
    query = query.order_by(since, t, i).limit(limit)
    if thread_ids is not None:
        query = query.where(t.in_(thread_ids))
    return [
        {**row._asdict(), "reminded": bool(row.reminded), "escalated": bool(row.escalated)}
        for row in conn.execute(query)
    ]


def chased_on(conn: Connection, thread_id: str, interrupt_ids: Sequence[str]) -> set[tuple[str, str]]:
    """``(interrupt_id, type)`` of the reminders and escalations so far of these interrupts
    of the thread, read through their own events (not every chase of the thread)."""
    if not interrupt_ids:
        return set()
    query = (
        sa.select(events.c.interrupt_id, events.c.type)
        .where(events.c.thread_id == thread_id)
        # Plain binds, one per interrupt (no expanding IN): fixed SQL for every executor.
        .where(sa.or_(*(events.c.interrupt_id == sa.literal(i, sa.String()) for i in interrupt_ids)))
        .where(sa.or_(*(events.c.type == kind for kind in CHASES)))
    )
    return {(str(r[0]), str(r[1])) for r in conn.execute(query)}


_KEYS = 100
"""Interrupts asked of one statement by :func:`escalations` (plain binds, two each)."""


def escalations(
    conn: Connection,
    thread_ids: Sequence[str],
    keys: Sequence[tuple[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The escalations recorded on these threads: ``thread_id``, ``interrupt_id``, the
    roles ``to`` and when (``at``), oldest first. ``keys``: only those interrupts'
    (``(thread_id, interrupt_id)``), each found through the interrupt's own events (an
    inbox page's: it reads the page, not the escalations of its threads' history)."""
    if keys is not None:
        found = []
        for start in range(0, len(keys), _KEYS):
            found.extend(_escalations(conn, sa.or_(*(
                sa.and_(events.c.thread_id == t, events.c.interrupt_id == i)
                for t, i in keys[start:start + _KEYS]
            ))))
        return sorted(found, key=lambda e: e.pop("position"))
    if not thread_ids:
        return []
    found = _escalations(conn, events.c.thread_id.in_(list(thread_ids)))
    for e in found:
        del e["position"]
    return found


def _escalations(conn: Connection, where: sa.ColumnElement[bool]) -> list[dict[str, Any]]:
    query = (
        sa.select(
            events.c.thread_id, events.c.interrupt_id, events.c.data, events.c.occurred_at,
            events.c.position,
        )
        # A literal: SQLite then reads through the escalations' partial unique index.
        .where(events.c.type == sa.literal_column(f"'{ESCALATED}'"))
        .where(where)
        .order_by(events.c.position)
    )
    found = []
    for thread_id, interrupt_id, data, at, position in conn.execute(query):
        to = data.get("to") if isinstance(data, dict) else None
        found.append({
            "thread_id": thread_id,
            "interrupt_id": interrupt_id,
            "to": [str(r) for r in to] if isinstance(to, list) else [],
            "at": at,
            "position": position,
        })
    return found
