"""LangGraph's own interrupts: the open-interrupts projection and the answer claims.

Frozen: this file imports nothing from ``symfonic_store``.

A thread may wait on several LangGraph interrupts at once (SPEC §8): each open one is
a row of ``symfonic_open_interrupts``, kept in the append's transaction like the thread
row. ``symfonic_claims`` holds the first phase of a gateway answer. Existing databases
hold only seed markers, so both tables start empty.

Downgrading refuses while the log holds any LangGraph interrupt: an older release
would read those mints as seed markers.

Revision ID: 0003_native_interrupts
Revises: 0002_owed_wakeups
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

revision: str = "0003_native_interrupts"
down_revision: str | None = "0002_owed_wakeups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "symfonic_open_interrupts",
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("interrupt_id", sa.String(255), primary_key=True),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("minted_at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(255), nullable=True),
        sa.Column("graph", sa.Text(), nullable=True),
        sa.Column("checkpoint_id", sa.Text(), nullable=True),
        sa.Column("checkpoint_ns", sa.Text(), nullable=True),
        sa.Column("task_id", sa.Text(), nullable=True),
        sa.Column("breakpoint", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    op.create_index(
        "ix_symfonic_open_interrupts_minted_at", "symfonic_open_interrupts", ["minted_at"]
    )
    op.create_table(
        "symfonic_claims",
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("interrupt_id", sa.String(255), primary_key=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("response", sa.JSON(), nullable=True),
        sa.Column("claimed_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    events = sa.table(
        "symfonic_events", sa.column("type", sa.String()), sa.column("data", sa.JSON())
    )
    native = op.get_bind().execute(
        sa.select(sa.func.count())
        .select_from(events)
        .where(events.c.type == "interrupt.minted")
        .where(events.c.data["source"].as_string() == "langgraph")
    ).scalar_one()
    if native:
        raise CommandError(
            f"refusing to downgrade past 0003_native_interrupts: the event log holds {native} "
            "LangGraph interrupt(s), which older releases would read as seed markers; "
            "keep this release (or archive those threads first)"
        )
    op.drop_table("symfonic_claims")
    op.drop_index("ix_symfonic_open_interrupts_minted_at", table_name="symfonic_open_interrupts")
    op.drop_table("symfonic_open_interrupts")
