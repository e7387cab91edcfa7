"""The inbox's name filter pages on indexes of the open interrupts' names.

Frozen: this file imports nothing from ``symfonic_store``.

The inbox (``GET /api/interrupts?name=...`` and the HTML inbox) pages the open interrupts
in minting order with a keyset cursor (SPEC §17). Without an index keyed by name first, a
page of a rare name walked ``ix_symfonic_open_interrupts_minted_at`` past every other
open interrupt, and a page of seed markers read every pending marker's JSON. Two indexes
let a page of one name start at its cursor and stop at its limit:

- ``ix_symfonic_open_interrupts_name`` (name, minted_at, thread_id, interrupt_id), for
  LangGraph's own interrupts;
- ``ix_symfonic_threads_pending_name`` (the marker's name, pending_since, thread_id) over
  the threads with a pending marker, for seed markers. The name is an expression on the
  marker's JSON, spelled as the store's reads spell it (``json_extract(pending,
  '$.name')`` on SQLite, ``(pending ->> 'name')`` on PostgreSQL).

The upgrade builds them from the rows already there (unless an operator built them
beforehand, e.g. with ``CREATE INDEX CONCURRENTLY`` on a large PostgreSQL table, under
these names and definitions); the downgrade drops them.

Revision ID: 0023_inbox_pages
Revises: 0022_bounded_reads
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023_inbox_pages"
down_revision: str | None = "0022_bounded_reads"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = "pending_interrupt_id IS NOT NULL"


def upgrade() -> None:
    op.create_index(
        "ix_symfonic_open_interrupts_name",
        "symfonic_open_interrupts",
        ["name", "minted_at", "thread_id", "interrupt_id"],
        if_not_exists=True,  # an operator may have built it beforehand, CONCURRENTLY
    )
    sqlite = op.get_bind().dialect.name == "sqlite"
    name = sa.text("json_extract(pending, '$.name')" if sqlite else "(pending ->> 'name')")
    op.create_index(
        "ix_symfonic_threads_pending_name",
        "symfonic_threads",
        [name, "pending_since", "thread_id"],
        sqlite_where=sa.text(PENDING),
        postgresql_where=sa.text(PENDING),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_index("ix_symfonic_threads_pending_name", table_name="symfonic_threads")
    op.drop_index("ix_symfonic_open_interrupts_name", table_name="symfonic_open_interrupts")
