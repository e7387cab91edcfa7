"""The notifier's bookkeeping: a durable cursor per subscription, and its dead letters.

Frozen: this file imports nothing from ``symfonic_store``.

- ``symfonic_notify_cursors``: one row per subscription of a ``notify`` config: the
  position it is done with (read gap-safe, I11), the lease a ``notify`` process holds
  while it delivers, the failing tries of its next event, a 410's disabling, and the
  delivery counts ``/metrics`` shows (SPEC §14).
- ``symfonic_notify_dead_letters``: the events a subscription gave up on after its retry
  limits, until ``notify retry NAME`` sends them again.

Neither holds events: the log stays the record. The downgrade refuses while a dead letter
is not re-sent (dropping it would forget an event nobody was told about); the cursors
themselves can be dropped (a notifier on an older release starts again at the log's end).

Revision ID: 0015_notify_cursors
Revises: 0014_decision_audit
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

revision: str = "0015_notify_cursors"
down_revision: str | None = "0014_decision_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "symfonic_notify_cursors",
        sa.Column("subscription", sa.String(255), primary_key=True),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("failing_position", sa.BigInteger(), nullable=True),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("first_failed_at", sa.Float(), nullable=True),
        sa.Column("next_try_at", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivered", sa.BigInteger(), nullable=False),
        sa.Column("failed", sa.BigInteger(), nullable=False),
        sa.Column("dead_lettered", sa.BigInteger(), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "symfonic_notify_dead_letters",
        sa.Column("subscription", sa.String(255), primary_key=True),
        sa.Column("position", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("interrupt_id", sa.String(255), nullable=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("dead_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resent_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    letters = sa.table("symfonic_notify_dead_letters", sa.column("resent_at"))
    waiting = op.get_bind().execute(
        sa.select(sa.func.count()).select_from(letters).where(letters.c.resent_at.is_(None))
    ).scalar_one()
    if waiting:
        raise CommandError(
            f"refusing to downgrade past 0015_notify_cursors: symfonic_notify_dead_letters "
            f"holds {waiting} dead letter(s) not re-sent; below this revision they would be "
            "forgotten. Re-send them (`symfonic-store notify retry NAME --config FILE`), or "
            "delete the rows yourself (DELETE FROM symfonic_notify_dead_letters) to give them "
            "up, then downgrade again"
        )
    op.drop_table("symfonic_notify_dead_letters")
    op.drop_table("symfonic_notify_cursors")
