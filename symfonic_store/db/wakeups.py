"""The operator's view of owed wake-ups: what is owed, to which graph, and dropping them.

The sweep's own delivery statements (insert, claim, settle) are in ``statements/wakeups.py``;
these are the reads and the one write an operator asks for (``symfonic-store wakeups``).
A row whose ``dropped_at`` is set is no longer owed: every read here leaves it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .schema import wakeups as table

_OWED = table.c.dropped_at.is_(None)
_COLUMNS = (
    table.c.graph,
    table.c.thread_id,
    table.c.interrupt_id,
    table.c.reason,
    table.c.expired_at,
    table.c.attempts,
    table.c.last_error,
)


def _owed_to(graph: str | None) -> Any:
    """The rows owed to ``graph`` (None: those whose mint names no graph)."""
    return table.c.graph.is_(None) if graph is None else table.c.graph == graph


def owed_by_graph(conn: Connection, *, thread_ids: Sequence[str] | None) -> dict[str | None, int]:
    """How many wake-ups are owed to each graph (None: no named graph)."""
    query = sa.select(table.c.graph, sa.func.count()).where(_OWED).group_by(table.c.graph)
    if thread_ids is not None:
        query = query.where(table.c.thread_id.in_(thread_ids))
    return {None if g is None else str(g): int(n) for g, n in conn.execute(query)}


def owed_wakeups(conn: Connection) -> list[dict[str, Any]]:
    """Every owed wake-up, by graph (unnamed last), then thread and interrupt."""
    query = (
        sa.select(*_COLUMNS)
        .where(_OWED)
        .order_by(
            table.c.graph.is_(None), table.c.graph, table.c.thread_id, table.c.interrupt_id
        )
    )
    return [dict(row._mapping) for row in conn.execute(query)]


def drop_wakeups(
    conn: Connection, *, graph: str | None, actor: str, at: datetime
) -> list[dict[str, Any]]:
    """Mark every wake-up owed to ``graph`` dropped by ``actor`` at ``at``; returns them.

    The rows are locked first (``FOR UPDATE``; SQLite's writer holds the database), so
    what is returned is exactly what this call dropped.
    """
    query = (
        sa.select(*_COLUMNS)
        .where(_OWED, _owed_to(graph))
        .order_by(table.c.thread_id, table.c.interrupt_id)
        .with_for_update()
    )
    rows = [dict(row._mapping) for row in conn.execute(query)]
    if rows:
        conn.execute(
            table.update()
            .where(_OWED, _owed_to(graph))
            .values(dropped_by=actor, dropped_at=at, claimed_by=None, claimed_until=None)
        )
    return rows


def release_wakeup(conn: Connection, thread_id: str, interrupt_id: str) -> None:
    """Let go of one claimed wake-up untouched: it was not this sweep's to deliver."""
    conn.execute(
        table.update()
        .where(table.c.thread_id == thread_id, table.c.interrupt_id == interrupt_id)
        .values(claimed_by=None, claimed_until=None)
    )
