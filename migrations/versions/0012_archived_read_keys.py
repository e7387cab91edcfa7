"""Archived events keep their place in the gap-safe readers' order.

Frozen: this file imports nothing from ``symfonic_store``.

Since ``0010_parallel_writers`` PostgreSQL readers page in ``(tx_id, position)`` order
and a consumer's cursor is the position of the last event it saw, which the store looks
up to find where in that order to resume. When an archive removes that event, the
lookup used to fall back to the nearest event below it by position, which in that order
may come after events the consumer has not seen: they were skipped. From this revision
an archive keeps each removed event's ``(position, tx_id)`` in
``symfonic_archived_read_keys`` first, so the cursor stays exact.

Events archived before this revision kept nothing (there is nothing left to fill the
table from); a cursor at one of them resumes as before.

Downgrading drops the table, which would make the stored cursors of consumers at
archived events inexact again: it is refused while the table holds rows.

Revision ID: 0012_archived_read_keys
Revises: 0011_audit_columns
Create Date: 2026-12-10
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

revision: str = "0012_archived_read_keys"
down_revision: str | None = "0011_audit_columns"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "symfonic_archived_read_keys",
        sa.Column("position", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("tx_id", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    table = sa.table("symfonic_archived_read_keys")
    kept = op.get_bind().execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    if kept:
        raise CommandError(
            f"refusing to downgrade past 0012_archived_read_keys: {kept} archived event(s) "
            "keep their place in the readers' order there; without it a consumer whose "
            "cursor is one of them could skip events. Keep this release"
        )
    op.drop_table("symfonic_archived_read_keys")
