"""Quorum queries (SPEC §15): the approvers recorded on the answers that completed a quorum."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import RESUMED, VOTED
from ..schema import events


def quorum_approvers(conn: Connection, thread_id: str | None = None) -> dict[tuple[str, str], tuple[str, ...]]:
    """``(thread_id, interrupt_id) -> approvers`` of each answer that recorded
    ``data["approvers"]``. Driven by the votes (their partial unique index), so a log
    without votes costs one empty index read."""
    voted = sa.select(events.c.thread_id, events.c.interrupt_id).where(events.c.type == VOTED)
    if thread_id is not None:
        voted = voted.where(events.c.thread_id == thread_id)
    v = voted.distinct().subquery()
    r = events.alias("r")
    query = sa.select(r.c.thread_id, r.c.interrupt_id, r.c.data).join(
        v, sa.and_(r.c.thread_id == v.c.thread_id, r.c.interrupt_id == v.c.interrupt_id)
    ).where(r.c.type == RESUMED)
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for t, i, data in conn.execute(query):
        names: Any = data.get("approvers") if isinstance(data, dict) else None
        if isinstance(names, list) and names:
            found[(str(t), str(i))] = tuple(str(n) for n in names)
    return found
