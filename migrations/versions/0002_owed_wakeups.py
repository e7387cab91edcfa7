"""Owed wake-ups: the sweep's record of expiries whose graphs it has not woken yet.

Frozen: this file imports nothing from ``symfonic_store``.

The downgrade refuses while rows exist: each is a graph still waiting for its timeout
wake-up, and dropping the table would forget it for good. Deliver them first
(``symfonic-store sweep --graph MODULE:ATTR``) or, to give them up knowingly,
``DELETE FROM symfonic_wakeups`` and downgrade again.

Revision ID: 0002_owed_wakeups
Revises: 0001_event_log
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

revision: str = "0002_owed_wakeups"
down_revision: str | None = "0001_event_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "symfonic_wakeups",
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("interrupt_id", sa.String(255), primary_key=True),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("expired_version", sa.Integer(), nullable=False),
        sa.Column("expired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("claimed_by", sa.String(64), nullable=True),
        sa.Column("claimed_until", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    table = sa.table("symfonic_wakeups")
    owed = op.get_bind().execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    if owed:
        raise CommandError(
            f"symfonic_wakeups holds {owed} owed wake-up(s): downgrading below "
            "0002_owed_wakeups would forget them and leave those graphs waiting for good. "
            "Deliver them first (`symfonic-store sweep --graph MODULE:ATTR`), or delete the "
            "rows yourself (DELETE FROM symfonic_wakeups) to give them up, then downgrade again"
        )
    op.drop_table("symfonic_wakeups")
