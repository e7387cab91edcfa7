"""The inbox's tenant scope and assignment filter cost the page: the projection carries them.

Frozen: this file imports nothing from ``symfonic_store``.

An interrupt's tenant lived only on its mint (``symfonic_events.tenant``, 0019_tenants) and
its assignee only in its ``interrupt.assigned`` events, so the inbox kept a page to some
tenants with a subquery per row, walking every open interrupt of the other tenants to fill
it, and could not filter by assignee at all (SPEC §17). From this revision both projection
tables carry two more columns, kept by every append and by ``rebuild_projection``:

- ``tenant``: the tenant of the interrupt's mint (of the pending marker's, on the thread
  row; NULL without a marker or without a tenant);
- ``assigned_to``: its latest assignment as the API shows it, a principal or
  ``role:<name>`` (NULL: unassigned, or no marker);

and four indexes page on them in the inbox's order:

- ``ix_symfonic_threads_pending_tenant`` (tenant, pending_since, thread_id) and
  ``ix_symfonic_threads_pending_assignee`` (assigned_to, pending_since, thread_id) over the
  threads with a pending marker (the latter over the assigned ones only);
- ``ix_symfonic_open_interrupts_tenant`` (tenant, minted_at, thread_id, interrupt_id) and
  ``ix_symfonic_open_interrupts_assignee`` (assigned_to, minted_at, thread_id,
  interrupt_id; the assigned ones only).

The upgrade adds the columns, fills them from the log for the interrupts open now (the
mint's tenant through its unique index, the latest assignment through the interrupt's
index), and builds the indexes, unless an operator built them beforehand (e.g. with
``CREATE INDEX CONCURRENTLY`` on a large PostgreSQL table, after adding the columns by
hand, which the upgrade then finds there too: see docs/operations.md). On PostgreSQL the one-call append (``symfonic_append``) names the
thread row's columns it writes: it is replaced by one that writes both, and its
``search_path`` pinned again. The downgrade restores the function of ``0019_tenants`` and
drops the indexes and the columns (the log keeps what they said).

Revision ID: 0024_projection_scope
Revises: 0023_inbox_pages
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_projection_scope"
down_revision: str | None = "0023_inbox_pages"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = "pending_interrupt_id IS NOT NULL"
ASSIGNED = "assigned_to IS NOT NULL"
TABLES = ("symfonic_threads", "symfonic_open_interrupts")

APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION symfonic_append(
    p_thread text, p_version integer, p_hash text, p_probe text,
    p_row json, p_events json, p_opened json, p_closed json
) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    -- The writers' lock first, before the transaction has an id (I11): the key of
    -- pg_horizon.WRITERS_LOCK, held in SHARE mode until the call commits.
    PERFORM pg_advisory_xact_lock_shared(1398361414, hashtext(current_schema()));
    IF p_probe IS NOT NULL AND EXISTS (
        SELECT 1 FROM symfonic_events
        WHERE thread_id = p_thread AND interrupt_id = p_probe AND type = 'interrupt.minted'
    ) THEN
        RETURN 2;  -- already minted (I4): nothing written
    END IF;
    IF p_version = 0 THEN
        INSERT INTO symfonic_threads (
            thread_id, version, last_hash, run_id, pending, pending_interrupt_id,
            pending_run_id, pending_minted_at, pending_since, tenant, assigned_to)
        SELECT r.thread_id, r.version, r.last_hash, r.run_id, r.pending,
            r.pending_interrupt_id, r.pending_run_id, r.pending_minted_at, r.pending_since,
            r.tenant, r.assigned_to
        FROM json_populate_record(NULL::symfonic_threads, p_row) AS r
        ON CONFLICT (thread_id) DO NOTHING;
    ELSE
        UPDATE symfonic_threads AS t SET
            version = r.version, last_hash = r.last_hash, run_id = r.run_id,
            pending = r.pending, pending_interrupt_id = r.pending_interrupt_id,
            pending_run_id = r.pending_run_id, pending_minted_at = r.pending_minted_at,
            pending_since = r.pending_since, tenant = r.tenant, assigned_to = r.assigned_to
        FROM json_populate_record(NULL::symfonic_threads, p_row) AS r
        WHERE t.thread_id = p_thread AND t.version = p_version AND t.last_hash = p_hash;
    END IF;
    IF NOT FOUND THEN
        RETURN 0;  -- the head moved, or the new thread exists: nothing written
    END IF;
    INSERT INTO symfonic_events (
        thread_id, version, type, interrupt_id, run_id, actor, data, occurred_at, hash,
        audit_name, audit_payload, audit_minted_at, audit_native, audit_response,
        audit_decisions, audit_reason, audit_error, audit_authenticated_by, tenant)
    SELECT e.thread_id, e.version, e.type, e.interrupt_id, e.run_id, e.actor, e.data,
        e.occurred_at, e.hash, e.audit_name, e.audit_payload, e.audit_minted_at,
        e.audit_native, e.audit_response, e.audit_decisions, e.audit_reason, e.audit_error,
        e.audit_authenticated_by, e.tenant
    FROM json_populate_recordset(NULL::symfonic_events, p_events) AS e;
    INSERT INTO symfonic_open_interrupts
    SELECT * FROM json_populate_recordset(NULL::symfonic_open_interrupts, p_opened);
    DELETE FROM symfonic_open_interrupts
    WHERE thread_id = p_thread AND interrupt_id IN (SELECT json_array_elements_text(p_closed));
    RETURN 1;
END
$$
"""
PREVIOUS_APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION symfonic_append(
    p_thread text, p_version integer, p_hash text, p_probe text,
    p_row json, p_events json, p_opened json, p_closed json
) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    -- The writers' lock first, before the transaction has an id (I11): the key of
    -- pg_horizon.WRITERS_LOCK, held in SHARE mode until the call commits.
    PERFORM pg_advisory_xact_lock_shared(1398361414, hashtext(current_schema()));
    IF p_probe IS NOT NULL AND EXISTS (
        SELECT 1 FROM symfonic_events
        WHERE thread_id = p_thread AND interrupt_id = p_probe AND type = 'interrupt.minted'
    ) THEN
        RETURN 2;  -- already minted (I4): nothing written
    END IF;
    IF p_version = 0 THEN
        INSERT INTO symfonic_threads (
            thread_id, version, last_hash, run_id, pending, pending_interrupt_id,
            pending_run_id, pending_minted_at, pending_since)
        SELECT r.thread_id, r.version, r.last_hash, r.run_id, r.pending,
            r.pending_interrupt_id, r.pending_run_id, r.pending_minted_at, r.pending_since
        FROM json_populate_record(NULL::symfonic_threads, p_row) AS r
        ON CONFLICT (thread_id) DO NOTHING;
    ELSE
        UPDATE symfonic_threads AS t SET
            version = r.version, last_hash = r.last_hash, run_id = r.run_id,
            pending = r.pending, pending_interrupt_id = r.pending_interrupt_id,
            pending_run_id = r.pending_run_id, pending_minted_at = r.pending_minted_at,
            pending_since = r.pending_since
        FROM json_populate_record(NULL::symfonic_threads, p_row) AS r
        WHERE t.thread_id = p_thread AND t.version = p_version AND t.last_hash = p_hash;
    END IF;
    IF NOT FOUND THEN
        RETURN 0;  -- the head moved, or the new thread exists: nothing written
    END IF;
    INSERT INTO symfonic_events (
        thread_id, version, type, interrupt_id, run_id, actor, data, occurred_at, hash,
        audit_name, audit_payload, audit_minted_at, audit_native, audit_response,
        audit_decisions, audit_reason, audit_error, audit_authenticated_by, tenant)
    SELECT e.thread_id, e.version, e.type, e.interrupt_id, e.run_id, e.actor, e.data,
        e.occurred_at, e.hash, e.audit_name, e.audit_payload, e.audit_minted_at,
        e.audit_native, e.audit_response, e.audit_decisions, e.audit_reason, e.audit_error,
        e.audit_authenticated_by, e.tenant
    FROM json_populate_recordset(NULL::symfonic_events, p_events) AS e;
    INSERT INTO symfonic_open_interrupts
    SELECT * FROM json_populate_recordset(NULL::symfonic_open_interrupts, p_opened);
    DELETE FROM symfonic_open_interrupts
    WHERE thread_id = p_thread AND interrupt_id IN (SELECT json_array_elements_text(p_closed));
    RETURN 1;
END
$$
"""
PIN_SEARCH_PATH = (
    "DO $pin$ BEGIN EXECUTE format("
    "'ALTER FUNCTION symfonic_append(text, integer, text, text, json, json, json, json) "
    "SET search_path = %I, pg_temp', current_schema()); END $pin$"
)


def _backfill(table: str, interrupt: str, where: str, sqlite: bool) -> str:
    """An UPDATE filling ``table``'s two columns from the log: the tenant of the mint of
    ``interrupt`` (a column of the row), and its latest assignment as the API shows it."""

    def field(key: str) -> str:
        return f"json_extract(a.data, '$.{key}')" if sqlite else f"(a.data ->> '{key}')"

    return f"""
        UPDATE {table} SET
            tenant = (
                SELECT m.tenant FROM symfonic_events m
                WHERE m.thread_id = {table}.thread_id AND m.interrupt_id = {table}.{interrupt}
                  AND m.type = 'interrupt.minted'
            ),
            assigned_to = (
                SELECT CASE WHEN {field("kind")} = 'role' THEN 'role:' || {field("to")}
                            ELSE {field("to")} END
                FROM symfonic_events a
                WHERE a.thread_id = {table}.thread_id AND a.interrupt_id = {table}.{interrupt}
                  AND a.type = 'interrupt.assigned'
                ORDER BY a.version DESC LIMIT 1
            )
        WHERE {where}
    """


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    for table in TABLES:
        # An operator may have added them beforehand, to build the indexes CONCURRENTLY.
        there = {c["name"] for c in sa.inspect(bind).get_columns(table)}
        if "tenant" not in there:
            op.add_column(table, sa.Column("tenant", sa.String(255), nullable=True))
        if "assigned_to" not in there:
            op.add_column(table, sa.Column("assigned_to", sa.Text(), nullable=True))
    op.execute(_backfill("symfonic_threads", "pending_interrupt_id", PENDING, sqlite))
    op.execute(_backfill("symfonic_open_interrupts", "interrupt_id", "1 = 1", sqlite))
    # An operator may have built them beforehand, CONCURRENTLY (docs/operations.md).
    op.create_index(
        "ix_symfonic_threads_pending_tenant", "symfonic_threads",
        ["tenant", "pending_since", "thread_id"],
        sqlite_where=sa.text(PENDING), postgresql_where=sa.text(PENDING), if_not_exists=True,
    )
    op.create_index(
        "ix_symfonic_threads_pending_assignee", "symfonic_threads",
        ["assigned_to", "pending_since", "thread_id"],
        sqlite_where=sa.text(ASSIGNED), postgresql_where=sa.text(ASSIGNED), if_not_exists=True,
    )
    op.create_index(
        "ix_symfonic_open_interrupts_tenant", "symfonic_open_interrupts",
        ["tenant", "minted_at", "thread_id", "interrupt_id"], if_not_exists=True,
    )
    op.create_index(
        "ix_symfonic_open_interrupts_assignee", "symfonic_open_interrupts",
        ["assigned_to", "minted_at", "thread_id", "interrupt_id"],
        sqlite_where=sa.text(ASSIGNED), postgresql_where=sa.text(ASSIGNED), if_not_exists=True,
    )
    if not sqlite:
        op.execute(APPEND_FUNCTION)
        op.execute(PIN_SEARCH_PATH)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PREVIOUS_APPEND_FUNCTION)
        op.execute(PIN_SEARCH_PATH)
    op.drop_index("ix_symfonic_open_interrupts_assignee", table_name="symfonic_open_interrupts")
    op.drop_index("ix_symfonic_open_interrupts_tenant", table_name="symfonic_open_interrupts")
    op.drop_index("ix_symfonic_threads_pending_assignee", table_name="symfonic_threads")
    op.drop_index("ix_symfonic_threads_pending_tenant", table_name="symfonic_threads")
    for table in reversed(TABLES):
        op.drop_column(table, "assigned_to")
        op.drop_column(table, "tenant")
