"""Counts for ``/metrics`` that the writes keep, and the log's counters kept in the database.

Frozen: this file imports nothing from ``symfonic_store``.

A scrape read every open interrupt (for the open gauges and the oldest age), and every new
process folded the whole event log from position 0 (for the answer, expiry and event
counters and the mint-to-answer histogram). SPEC §17 asks for a scrape that costs the
same at a thousand open interrupts and at a million. This revision adds:

- ``symfonic_open_count_deltas``: ``+1``/``-1`` rows appended by triggers on the
  projection when a thread's pending marker appears or goes (``symfonic_threads``, source
  ``marker``) and when a LangGraph interrupt's row is inserted or deleted
  (``symfonic_open_interrupts``, source ``langgraph``). Each writer inserts rows of its
  own: no row is shared, so PostgreSQL writers take no new lock against one another. On
  PostgreSQL a projection rebuild turns them off for its own transaction (the setting
  ``symfonic.recounting``) and recounts instead, leaving no dead rows behind.
- ``symfonic_open_counts``: the compacted totals by source and tenant (a scrape moves the
  deltas into them);
- ``symfonic_metric_counts`` and ``symfonic_metric_fold``: the counters' values and the
  log position they reach, advanced by scrapes.

The upgrade backfills all of it from the rows already there: the open counts from the
projection, the counters from the events (the fold position set to the last event), so
the first scrape after the upgrade is right and folds nothing old. The downgrade drops
the triggers and the tables.

Revision ID: 0026_metric_counts
Revises: 0025_audit_rows
Create Date: 2026-12-07
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0026_metric_counts"
down_revision: str | None = "0025_audit_rows"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DELTAS = "symfonic_open_count_deltas"

SQLITE_TRIGGERS = (
    f"""
    CREATE TRIGGER symfonic_open_count_marker_insert AFTER INSERT ON symfonic_threads
    WHEN NEW.pending_interrupt_id IS NOT NULL
    BEGIN
        INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
        VALUES ('marker', NEW.thread_id, NEW.pending_interrupt_id, 1);
    END
    """,
    f"""
    CREATE TRIGGER symfonic_open_count_marker_update
    AFTER UPDATE OF pending_interrupt_id ON symfonic_threads
    WHEN OLD.pending_interrupt_id IS NOT NEW.pending_interrupt_id
    BEGIN
        INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
        SELECT 'marker', OLD.thread_id, OLD.pending_interrupt_id, -1
        WHERE OLD.pending_interrupt_id IS NOT NULL;
        INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
        SELECT 'marker', NEW.thread_id, NEW.pending_interrupt_id, 1
        WHERE NEW.pending_interrupt_id IS NOT NULL;
    END
    """,
    f"""
    CREATE TRIGGER symfonic_open_count_marker_delete AFTER DELETE ON symfonic_threads
    WHEN OLD.pending_interrupt_id IS NOT NULL
    BEGIN
        INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
        VALUES ('marker', OLD.thread_id, OLD.pending_interrupt_id, -1);
    END
    """,
    f"""
    CREATE TRIGGER symfonic_open_count_native_insert AFTER INSERT ON symfonic_open_interrupts
    BEGIN
        INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
        VALUES ('langgraph', NEW.thread_id, NEW.interrupt_id, 1);
    END
    """,
    f"""
    CREATE TRIGGER symfonic_open_count_native_delete AFTER DELETE ON symfonic_open_interrupts
    BEGIN
        INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
        VALUES ('langgraph', OLD.thread_id, OLD.interrupt_id, -1);
    END
    """,
)
SQLITE_TRIGGER_NAMES = (
    "symfonic_open_count_marker_insert", "symfonic_open_count_marker_update",
    "symfonic_open_count_marker_delete", "symfonic_open_count_native_insert",
    "symfonic_open_count_native_delete",
)

POSTGRES_TRIGGERS = (
    f"""
    CREATE FUNCTION symfonic_open_count_marker() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF current_setting('symfonic.recounting', true) = 'on' THEN
            RETURN NULL;  -- a projection rebuild: it recounts from the rows it writes
        END IF;
        IF TG_OP <> 'INSERT' AND OLD.pending_interrupt_id IS NOT NULL
           AND (TG_OP = 'DELETE' OR NEW.pending_interrupt_id IS DISTINCT FROM OLD.pending_interrupt_id)
        THEN
            INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
            VALUES ('marker', OLD.thread_id, OLD.pending_interrupt_id, -1);
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.pending_interrupt_id IS NOT NULL
           AND (TG_OP = 'INSERT' OR NEW.pending_interrupt_id IS DISTINCT FROM OLD.pending_interrupt_id)
        THEN
            INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
            VALUES ('marker', NEW.thread_id, NEW.pending_interrupt_id, 1);
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER symfonic_open_count_marker
    AFTER INSERT OR UPDATE OF pending_interrupt_id OR DELETE ON symfonic_threads
    FOR EACH ROW EXECUTE FUNCTION symfonic_open_count_marker()
    """,
    f"""
    CREATE FUNCTION symfonic_open_count_native() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF current_setting('symfonic.recounting', true) = 'on' THEN
            RETURN NULL;
        END IF;
        IF TG_OP = 'INSERT' THEN
            INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
            VALUES ('langgraph', NEW.thread_id, NEW.interrupt_id, 1);
        ELSE
            INSERT INTO {DELTAS} (source, thread_id, interrupt_id, delta)
            VALUES ('langgraph', OLD.thread_id, OLD.interrupt_id, -1);
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER symfonic_open_count_native
    AFTER INSERT OR DELETE ON symfonic_open_interrupts
    FOR EACH ROW EXECUTE FUNCTION symfonic_open_count_native()
    """,
)
POSTGRES_DROP = (
    "DROP TRIGGER IF EXISTS symfonic_open_count_marker ON symfonic_threads",
    "DROP TRIGGER IF EXISTS symfonic_open_count_native ON symfonic_open_interrupts",
    "DROP FUNCTION IF EXISTS symfonic_open_count_marker()",
    "DROP FUNCTION IF EXISTS symfonic_open_count_native()",
)

MINT_TENANT = (
    "(SELECT m.tenant FROM symfonic_events m WHERE m.thread_id = {t} "
    "AND m.interrupt_id = {i} AND m.type = 'interrupt.minted')"
)
BACKFILL_OPEN = (
    "INSERT INTO symfonic_open_counts (source, tenant, total) "
    "SELECT 'marker', tenant, count(*) FROM (SELECT "
    + MINT_TENANT.format(t="x.thread_id", i="x.pending_interrupt_id")
    + " AS tenant FROM symfonic_threads x WHERE x.pending_interrupt_id IS NOT NULL) AS o "
    "GROUP BY tenant",
    "INSERT INTO symfonic_open_counts (source, tenant, total) "
    "SELECT 'langgraph', tenant, count(*) FROM (SELECT "
    + MINT_TENANT.format(t="x.thread_id", i="x.interrupt_id")
    + " AS tenant FROM symfonic_open_interrupts x) AS o GROUP BY tenant",
)

# The histogram's upper bounds, as server/metrics.py has them at this revision.
ANSWER_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0,
                  4 * 3600.0, 12 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0)


def upgrade() -> None:
    op.create_table(
        "symfonic_open_counts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=True),
        sa.Column("total", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        DELTAS,
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
            autoincrement=True,
        ),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("interrupt_id", sa.String(255), nullable=False),
        sa.Column("delta", sa.SmallInteger(), nullable=False),
    )
    op.create_table(
        "symfonic_metric_counts",
        sa.Column("metric", sa.String(32), primary_key=True),
        sa.Column("label", sa.String(255), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
    )
    op.create_table(
        "symfonic_metric_fold",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
    )
    conn = op.get_bind()
    for statement in SQLITE_TRIGGERS if conn.dialect.name == "sqlite" else POSTGRES_TRIGGERS:
        op.execute(statement)
    for statement in BACKFILL_OPEN:
        op.execute(statement)
    _backfill_counters(conn)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in SQLITE_TRIGGER_NAMES:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    else:
        for statement in POSTGRES_DROP:
            op.execute(statement)
    for table in ("symfonic_metric_fold", "symfonic_metric_counts", DELTAS, "symfonic_open_counts"):
        op.drop_table(table)


# --- the counters, folded once from the events already there ---------------------------


def _moment(value: Any) -> datetime:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _data(value: Any) -> dict[str, Any]:
    data = json.loads(value) if isinstance(value, str | bytes) else value
    return data if isinstance(data, dict) else {}


def _refused_assignment(data: dict[str, Any]) -> bool:
    """A refused assignment is no answer (as symfonic_store.events has it at this revision)."""
    why = data.get("why")
    if why == "assign_not_allowed":
        return True
    response = data.get("response")
    return (
        why == "not_allowed" and isinstance(response, dict) and set(response) == {"assign"}
        and isinstance(response["assign"], str)
    )


def _backfill_counters(conn: sa.Connection) -> None:
    values: Counter[tuple[str, str]] = Counter()
    for type_, count in conn.execute(sa.text("SELECT type, count(*) FROM symfonic_events GROUP BY type")):
        values[("events", type_)] += count
    answered = conn.execute(sa.text(
        "SELECT type, data FROM symfonic_events "
        "WHERE type IN ('interrupt.resumed', 'interrupt.resume_rejected', 'interrupt.expired')"
    ))
    for type_, raw in answered:
        if type_ == "interrupt.resumed":
            values[("answers", "resumed")] += 1
            continue
        data = _data(raw)
        if type_ == "interrupt.expired":
            values[("expiries", str(data.get("reason")))] += 1
        elif not _refused_assignment(data):
            values[("answers", str(data.get("why")))] += 1
    waits = conn.execute(sa.text(
        "SELECT r.occurred_at, m.occurred_at FROM symfonic_events r JOIN symfonic_events m "
        "ON m.thread_id = r.thread_id AND m.interrupt_id = r.interrupt_id "
        "AND m.type = 'interrupt.minted' WHERE r.type = 'interrupt.resumed'"
    ))
    total = 0.0
    for resumed, minted in waits:
        waited = max(0.0, (_moment(resumed) - _moment(minted)).total_seconds())
        total += waited
        le = next((str(b) for b in ANSWER_BUCKETS if waited <= b), "+Inf")
        values[("answer_seconds_bucket", le)] += 1
    counts = sa.table("symfonic_metric_counts", sa.column("metric"), sa.column("label"), sa.column("value"))
    rows = [{"metric": m, "label": label, "value": float(v)} for (m, label), v in values.items()]
    rows.append({"metric": "answer_seconds_sum", "label": "", "value": total})
    conn.execute(counts.insert(), rows)
    # The fold goes on after the last event in the order gap-safe readers read (I11).
    order = "position DESC" if conn.dialect.name == "sqlite" else "tx_id DESC NULLS LAST, position DESC"
    last = conn.execute(
        sa.text(f"SELECT position FROM symfonic_events ORDER BY {order} LIMIT 1")  # noqa: S608
    ).scalar()
    fold = sa.table("symfonic_metric_fold", sa.column("id"), sa.column("position"))
    conn.execute(fold.insert(), [{"id": 1, "position": int(last or 0)}])
