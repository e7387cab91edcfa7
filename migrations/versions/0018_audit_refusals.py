"""The refused answers are found through an index of their own.

Frozen: this file imports nothing from ``symfonic_store``.

``audit()`` reads every ``interrupt.resume_rejected`` event (each record's ``attempts``)
in one statement. No index held the events by type, so that statement read the whole
event table, however few refusals there were: at 10,000 threads, a fifth of the audit's
time for no row. ``ix_symfonic_events_refusals`` is a partial index of those events
only, in the order the audit reads them, ``(thread_id, version)``: the other events'
appends do not touch it.

The upgrade builds it from the events already there (an index has nothing to fill in by
hand); the downgrade drops it, and the audit reads the table as before.

Revision ID: 0018_audit_refusals
Revises: 0017_chase_once
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_audit_refusals"
down_revision: str | None = "0017_chase_once"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REFUSED = "type = 'interrupt.resume_rejected'"


def upgrade() -> None:
    op.create_index(
        "ix_symfonic_events_refusals",
        "symfonic_events",
        ["thread_id", "version"],
        sqlite_where=sa.text(REFUSED),
        postgresql_where=sa.text(REFUSED),
    )


def downgrade() -> None:
    op.drop_index("ix_symfonic_events_refusals", table_name="symfonic_events")
