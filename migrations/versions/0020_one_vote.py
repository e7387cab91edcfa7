"""One vote per principal on an interrupt (SPEC §15 "Quorum").

Frozen: this file imports nothing from ``symfonic_store``.

- ``uq_symfonic_events_one_vote``: one ``interrupt.voted`` per (thread, interrupt, actor).

A partial unique index, as ``uq_symfonic_events_one_reminder`` of 0017: the store decides
a vote under the thread's lock, and the database keeps "once per principal" whatever
races it. The type is new with this revision, so no row can break the index when it is
built. The downgrade drops it; the events stay (votes are not endings).

Revision ID: 0020_one_vote
Revises: 0019_tenants
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_one_vote"
down_revision: str | None = "0019_tenants"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "uq_symfonic_events_one_vote"


def upgrade() -> None:
    where = sa.text("type = 'interrupt.voted'")
    op.create_index(
        NAME,
        "symfonic_events",
        ["thread_id", "interrupt_id", "actor"],
        unique=True,
        sqlite_where=where,
        postgresql_where=where,
    )


def downgrade() -> None:
    op.drop_index(NAME, table_name="symfonic_events")
