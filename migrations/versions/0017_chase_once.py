"""The sweep reminds of and escalates an interrupt at most once each (SPEC §14).

Frozen: this file imports nothing from ``symfonic_store``.

- ``uq_symfonic_events_one_reminder``: one ``interrupt.reminded`` per (thread, interrupt);
- ``uq_symfonic_events_one_escalation``: one ``interrupt.escalated`` per (thread, interrupt).

Partial unique indexes, as ``uq_symfonic_events_one_mint`` and ``..._one_ending`` of
0001: the sweep decides under the thread's lock, and the database keeps "once" whatever
races it. Both types are new with this revision, so no row can break the indexes when
they are built. The downgrade drops them; the events stay (they are not endings, and
the fold reads them as any other event).

Revision ID: 0017_chase_once
Revises: 0016_one_call_append
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_chase_once"
down_revision: str | None = "0016_one_call_append"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "uq_symfonic_events_one_reminder": "interrupt.reminded",
    "uq_symfonic_events_one_escalation": "interrupt.escalated",
}


def upgrade() -> None:
    for name, kind in INDEXES.items():
        where = sa.text(f"type = '{kind}'")
        op.create_index(
            name,
            "symfonic_events",
            ["thread_id", "interrupt_id"],
            unique=True,
            sqlite_where=where,
            postgresql_where=where,
        )


def downgrade() -> None:
    for name in reversed(list(INDEXES)):
        op.drop_index(name, table_name="symfonic_events")
