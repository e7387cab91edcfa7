"""The event log: the append-only event table, the thread projection, their keys.

Frozen: this file imports nothing from ``symfonic_store``.

Revision ID: 0001_event_log
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0001_event_log"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A revision is a snapshot: it imports nothing from the package, so a later change to
# the live schema cannot rewrite what this revision created.

SQLITE_APPEND_ONLY_TRIGGERS = (
    """
    CREATE TRIGGER symfonic_events_no_update BEFORE UPDATE ON symfonic_events
    BEGIN SELECT RAISE(ABORT, 'symfonic_events is append-only: UPDATE is not allowed'); END
    """,
    """
    CREATE TRIGGER symfonic_events_no_delete BEFORE DELETE ON symfonic_events
    BEGIN SELECT RAISE(ABORT, 'symfonic_events is append-only: DELETE is not allowed'); END
    """,
)
SQLITE_DROP_TRIGGERS = (
    "DROP TRIGGER IF EXISTS symfonic_events_no_update",
    "DROP TRIGGER IF EXISTS symfonic_events_no_delete",
)

POSTGRES_APPEND_ONLY_TRIGGERS = (
    """
    CREATE FUNCTION symfonic_events_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'symfonic_events is append-only: % is not allowed', TG_OP
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    """
    CREATE TRIGGER symfonic_events_no_update_delete
    BEFORE UPDATE OR DELETE ON symfonic_events
    FOR EACH ROW EXECUTE FUNCTION symfonic_events_append_only()
    """,
    """
    CREATE TRIGGER symfonic_events_no_truncate
    BEFORE TRUNCATE ON symfonic_events
    FOR EACH STATEMENT EXECUTE FUNCTION symfonic_events_append_only()
    """,
)
POSTGRES_DROP_TRIGGERS = (
    "DROP TRIGGER IF EXISTS symfonic_events_no_truncate ON symfonic_events",
    "DROP TRIGGER IF EXISTS symfonic_events_no_update_delete ON symfonic_events",
    "DROP FUNCTION IF EXISTS symfonic_events_append_only()",
)

_ONE_MINT = sa.text("type = 'interrupt.minted'")
_ONE_ENDING = sa.text("type IN ('interrupt.resumed', 'interrupt.expired')")
_PENDING = sa.text("pending_interrupt_id IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "symfonic_events",
        sa.Column(
            "position",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("interrupt_id", sa.String(255), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(255), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("thread_id", "version", name="uq_symfonic_events_thread_version"),
    )
    op.create_index("ix_symfonic_events_interrupt", "symfonic_events", ["thread_id", "interrupt_id"])
    op.create_index("ix_symfonic_events_actor", "symfonic_events", ["actor", "occurred_at"])
    op.create_index(
        "uq_symfonic_events_one_mint",
        "symfonic_events",
        ["thread_id", "interrupt_id"],
        unique=True,
        sqlite_where=_ONE_MINT,
        postgresql_where=_ONE_MINT,
    )
    op.create_index(
        "uq_symfonic_events_one_ending",
        "symfonic_events",
        ["thread_id", "interrupt_id"],
        unique=True,
        sqlite_where=_ONE_ENDING,
        postgresql_where=_ONE_ENDING,
    )

    op.create_table(
        "symfonic_threads",
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("pending", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("pending_interrupt_id", sa.String(255), nullable=True),
        sa.Column("pending_run_id", sa.Text(), nullable=True),
        sa.Column("pending_minted_at", sa.Float(), nullable=True),
        sa.Column("pending_since", sa.Float(), nullable=True),
    )
    op.create_index(
        "ix_symfonic_threads_pending_since",
        "symfonic_threads",
        ["pending_since"],
        sqlite_where=_PENDING,
        postgresql_where=_PENDING,
    )

    triggers = (
        SQLITE_APPEND_ONLY_TRIGGERS
        if op.get_bind().dialect.name == "sqlite"
        else POSTGRES_APPEND_ONLY_TRIGGERS
    )
    for statement in triggers:
        op.execute(statement)


def downgrade() -> None:
    drops = (
        SQLITE_DROP_TRIGGERS if op.get_bind().dialect.name == "sqlite" else POSTGRES_DROP_TRIGGERS
    )
    for statement in drops:
        op.execute(statement)
    op.drop_index("ix_symfonic_threads_pending_since", table_name="symfonic_threads")
    op.drop_table("symfonic_threads")
    op.drop_index("uq_symfonic_events_one_ending", table_name="symfonic_events")
    op.drop_index("uq_symfonic_events_one_mint", table_name="symfonic_events")
    op.drop_index("ix_symfonic_events_actor", table_name="symfonic_events")
    op.drop_index("ix_symfonic_events_interrupt", table_name="symfonic_events")
    op.drop_table("symfonic_events")
