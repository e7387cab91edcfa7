"""Parallel writers on PostgreSQL: each event's read key, so readers need no writer lock.

Frozen: this file imports nothing from ``symfonic_store``.

Until now every append on PostgreSQL held one advisory lock per schema until its commit,
so positions committed in order and a reader paging by position skipped nothing (I11),
at the price of appends committing one at a time. From this revision writers run in
parallel and gap-safe readers order and page on ``(tx_id, position)``:

- ``tx_id`` (BIGINT, NULL on SQLite) is set on PostgreSQL by a ``BEFORE INSERT`` trigger:
  the inserting transaction's 64-bit id (``pg_current_xact_id()``), raised to the previous
  event's ``tx_id`` on the same thread, so each thread stays in version order;
- existing rows get ``tx_id = 0`` (older than every transaction to come), so the read
  order of everything already committed is unchanged (position order) and every stored
  cursor keeps pointing at the same place; the column is added with a constant default,
  which PostgreSQL records in the catalogue without rewriting the table or touching a row
  (the append-only trigger never sees an UPDATE); the default then becomes the inserting
  transaction's id, so a row inserted with the triggers disabled still gets a read key;
- ``ix_symfonic_events_tx`` is the read order's index (on SQLite a partial index that
  stays empty).

Downgrading removes the column, its index and the trigger; nothing of the history is
lost (the older release orders by position and serialises its writers again).

Revision ID: 0010_parallel_writers
Revises: 0009_archive
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_parallel_writers"
down_revision: str | None = "0009_archive"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TX_ID_DEFAULT = "(pg_current_xact_id()::text::bigint)"
POSTGRES_TX_ID_TRIGGER = (
    """
    CREATE FUNCTION symfonic_events_tx_id() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        NEW.tx_id := GREATEST(
            pg_current_xact_id()::text::bigint,
            (SELECT e.tx_id FROM symfonic_events e
              WHERE e.thread_id = NEW.thread_id AND e.version = NEW.version - 1)
        );
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE TRIGGER symfonic_events_tx_id
    BEFORE INSERT ON symfonic_events
    FOR EACH ROW EXECUTE FUNCTION symfonic_events_tx_id()
    """,
)
POSTGRES_DROP_TX_ID_TRIGGER = (
    "DROP TRIGGER IF EXISTS symfonic_events_tx_id ON symfonic_events",
    "DROP FUNCTION IF EXISTS symfonic_events_tx_id()",
)


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        # A constant default fills the existing rows from the catalogue: no table
        # rewrite, no UPDATE for the append-only trigger to refuse.
        op.add_column(
            "symfonic_events",
            sa.Column("tx_id", sa.BigInteger(), nullable=True, server_default=sa.text("0")),
        )
        # From now on each row's own transaction id, even if the trigger below is
        # disabled (ALTER TABLE ... DISABLE TRIGGER ALL): an event without a read key
        # would be invisible to every gap-safe reader.
        op.alter_column("symfonic_events", "tx_id", server_default=sa.text(TX_ID_DEFAULT))
        for statement in POSTGRES_TX_ID_TRIGGER:
            op.execute(statement)
    else:
        op.add_column("symfonic_events", sa.Column("tx_id", sa.BigInteger(), nullable=True))
    op.create_index(
        "ix_symfonic_events_tx",
        "symfonic_events",
        ["tx_id", "position"],
        sqlite_where=sa.text("tx_id IS NOT NULL"),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRES_DROP_TX_ID_TRIGGER:
            op.execute(statement)
    op.drop_index("ix_symfonic_events_tx", table_name="symfonic_events")
    op.drop_column("symfonic_events", "tx_id")
