"""The sweep finds the threads whose run moved on through an index of their own.

Frozen: this file imports nothing from ``symfonic_store``.

A seed marker is stale when its TTL passed or when the thread's run moved on (SPEC §1,
rule P3: the marker names another run than the thread's ``run_id``). The sweep found both
in one statement paged by ``thread_id``, so a sweep that found nothing stale still read
every thread with a pending marker. From this revision each test reads an index:

- the TTL test reads ``ix_symfonic_threads_pending_since`` (already there: a marker's
  ``pending_since`` is its numeric ``minted_at``, the TTL's clock), from the oldest up
  to the cutoff;
- the run test reads ``ix_symfonic_threads_run_moved_on``, a partial index of the
  threads whose pending marker names another run than the thread's, which holds the
  stale ones only: the other appends never enter it.

The upgrade builds it from the projection rows already there; the downgrade drops it,
and the sweep of the release before reads the table as before.

Revision ID: 0022_bounded_reads
Revises: 0021_ignore_audit
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_bounded_reads"
down_revision: str | None = "0021_ignore_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_MOVED_ON = (
    "pending_interrupt_id IS NOT NULL AND pending_run_id IS NOT NULL"
    " AND (run_id IS NULL OR run_id != pending_run_id)"
)


def upgrade() -> None:
    op.create_index(
        "ix_symfonic_threads_run_moved_on",
        "symfonic_threads",
        ["thread_id"],
        sqlite_where=sa.text(RUN_MOVED_ON),
        postgresql_where=sa.text(RUN_MOVED_ON),
        # An operator may have built it beforehand, CONCURRENTLY (docs/operations.md).
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_index("ix_symfonic_threads_run_moved_on", table_name="symfonic_threads")
