"""The counts ``/metrics`` reads instead of the open interrupts and the whole log (SPEC
§17, since ``0026_metric_counts``), declared on the schema's metadata by
:func:`declare` (``db/schema.py`` calls it, so ``alembic check`` compares them too).

Open interrupts, by source and tenant, without a row every writer updates:

- ``symfonic_open_count_deltas``: one row per change, appended by the migration's
  triggers on the projection tables: ``+1`` when a thread's
  pending marker appears or a LangGraph interrupt's row is inserted, ``-1`` when it goes.
  Writers only insert here (a new key each), so they never wait for one another.
- ``symfonic_open_counts``: the deltas compacted so far, by source and tenant. Only a
  compaction writes it, one at a time (the fold row's lock); the count is the total plus
  the deltas not compacted yet, read in one statement.

The persisted fold of the log's counters (answers, expiries, events by type, the
mint-to-answer histogram):

- ``symfonic_metric_counts``: each counter's value by ``(metric, label)``;
- ``symfonic_metric_fold``: one row, the log position those values reach. Scrapers lock
  it to fold the events after it (or to compact), one at a time; writers never touch it.
"""

from __future__ import annotations

import sqlalchemy as sa

OPEN_COUNTS_TABLE = "symfonic_open_counts"
OPEN_COUNT_DELTAS_TABLE = "symfonic_open_count_deltas"
METRIC_COUNTS_TABLE = "symfonic_metric_counts"
METRIC_FOLD_TABLE = "symfonic_metric_fold"
FOLD_ROW = 1
"""The key of the fold's one row."""


def declare(metadata: sa.MetaData) -> tuple[sa.Table, sa.Table, sa.Table, sa.Table]:
    """The four tables, on ``metadata``: totals, deltas, counters, fold position."""
    totals = sa.Table(
        OPEN_COUNTS_TABLE,
        metadata,
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=True),
        sa.Column("total", sa.BigInteger(), nullable=False),
    )
    deltas = sa.Table(
        OPEN_COUNT_DELTAS_TABLE,
        metadata,
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
            autoincrement=True,
        ),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("interrupt_id", sa.String(255), nullable=False),
        sa.Column("delta", sa.SmallInteger(), nullable=False),
    )
    counts = sa.Table(
        METRIC_COUNTS_TABLE,
        metadata,
        sa.Column("metric", sa.String(32), primary_key=True),
        sa.Column("label", sa.String(255), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
    )
    fold = sa.Table(
        METRIC_FOLD_TABLE,
        metadata,
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
    )
    return totals, deltas, counts, fold
