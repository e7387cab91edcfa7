"""Owed wake-ups name their graph, and an operator can drop them on the record.

Frozen: this file imports nothing from ``symfonic_store``.

``symfonic_wakeups`` gains three nullable columns:

- ``graph``: the graph the wake-up is owed to, the name the interrupt's mint recorded
  (``data.graph`` of its ``interrupt.minted`` event; NULL when the mint names none, as a
  seed marker's). A sweep waking graph X then delivers only what is owed to X (and the
  unnamed wake-ups whose thread X's checkpointer holds), never another graph's. Rows owed
  before this revision get it from their mint, read here in Python (JSON on both
  backends); a row whose mint is gone (archived) keeps NULL.
- ``dropped_by`` / ``dropped_at``: an operator gave the wake-up up
  (``symfonic-store wakeups --drop``). A dropped row is no longer owed, delivered or
  counted; it stays as the record of who decided that, and when.

Downgrading drops the columns. ``graph`` is a copy of the mint's data (nothing lost), but
a dropped row would become owed again and the record of who dropped it would be lost:
the downgrade refuses while any row is dropped (delete those rows yourself to give the
record up, then downgrade again).

Revision ID: 0013_wakeup_drops
Revises: 0012_archived_read_keys
Create Date: 2026-12-12
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

revision: str = "0013_wakeup_drops"
down_revision: str | None = "0012_archived_read_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_wakeups = sa.table(
    "symfonic_wakeups",
    sa.column("thread_id", sa.String()),
    sa.column("interrupt_id", sa.String()),
    sa.column("graph", sa.Text()),
    sa.column("dropped_at", sa.DateTime(timezone=True)),
)
_events = sa.table(
    "symfonic_events",
    sa.column("thread_id", sa.String()),
    sa.column("interrupt_id", sa.String()),
    sa.column("type", sa.String()),
    sa.column("data", sa.JSON()),
)


def _graph_of(data: Any) -> str | None:
    if isinstance(data, str):  # a driver that hands JSON back as text
        data = json.loads(data)
    graph = data.get("graph") if isinstance(data, dict) else None
    return None if graph is None else str(graph)


def upgrade() -> None:
    op.add_column("symfonic_wakeups", sa.Column("graph", sa.Text(), nullable=True))
    op.add_column("symfonic_wakeups", sa.Column("dropped_by", sa.String(255), nullable=True))
    op.add_column(
        "symfonic_wakeups", sa.Column("dropped_at", sa.DateTime(timezone=True), nullable=True)
    )
    conn = op.get_bind()
    owed = conn.execute(
        sa.select(_wakeups.c.thread_id, _wakeups.c.interrupt_id, _events.c.data).join(
            _events,
            sa.and_(
                _events.c.thread_id == _wakeups.c.thread_id,
                _events.c.interrupt_id == _wakeups.c.interrupt_id,
                _events.c.type == "interrupt.minted",
            ),
        )
    ).all()
    named = [
        {"t": t, "i": i, "g": graph}
        for t, i, data in owed
        if (graph := _graph_of(data)) is not None
    ]
    if named:
        conn.execute(
            _wakeups.update()
            .where(_wakeups.c.thread_id == sa.bindparam("t"))
            .where(_wakeups.c.interrupt_id == sa.bindparam("i"))
            .values(graph=sa.bindparam("g")),
            named,
        )


def downgrade() -> None:
    conn = op.get_bind()
    dropped = conn.execute(
        sa.select(sa.func.count()).select_from(_wakeups).where(_wakeups.c.dropped_at.is_not(None))
    ).scalar_one()
    if dropped:
        raise CommandError(
            f"refusing to downgrade past 0013_wakeup_drops: symfonic_wakeups holds {dropped} "
            "dropped wake-up(s) recording who gave them up and when; below this revision they "
            "would be owed again and that record lost. Keep this release, or delete those rows "
            "yourself (DELETE FROM symfonic_wakeups WHERE dropped_at IS NOT NULL) to give the "
            "record up, then downgrade again"
        )
    op.drop_column("symfonic_wakeups", "dropped_at")
    op.drop_column("symfonic_wakeups", "dropped_by")
    op.drop_column("symfonic_wakeups", "graph")
