"""Tenants (SPEC §15): the tenant an interrupt was minted for, in a column of its mint.

Frozen: this file imports nothing from ``symfonic_store``.

``symfonic_events.tenant`` holds the tenant of an ``interrupt.minted`` event (NULL on
every other event, and on the mints before this revision: existing interrupts have no
tenant, so a principal without tenants still sees them all and one with tenants sees
none of them). It is not part of the hashed data: the mint's hash does not change, and
the column says who may see the interrupt, not what it is. ``ix_symfonic_events_tenant``
holds the mints that have a tenant, so a read of one tenant's interrupts does not scan the
log. The reads of open interrupts (the thread row, the open LangGraph interrupts) find
the tenant through the mint's unique index (``uq_symfonic_events_one_mint``).

On PostgreSQL the one-call append (``symfonic_append``, ``0016_one_call_append``) names
the event columns it inserts: it is replaced by one that inserts ``tenant`` too, and its
``search_path`` pinned again.

The downgrade refuses while any tenant is recorded (dropping the column would hand every
tenant's interrupts to every principal without tenants): it says how many and stops.
Without recorded tenants it drops the index and the column and restores the function of
``0016_one_call_append``.

Revision ID: 0019_tenants
Revises: 0018_audit_refusals
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_tenants"
down_revision: str | None = "0018_audit_refusals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT_MINTS = "tenant IS NOT NULL"

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
        audit_decisions, audit_reason, audit_error, audit_authenticated_by)
    SELECT e.thread_id, e.version, e.type, e.interrupt_id, e.run_id, e.actor, e.data,
        e.occurred_at, e.hash, e.audit_name, e.audit_payload, e.audit_minted_at,
        e.audit_native, e.audit_response, e.audit_decisions, e.audit_reason, e.audit_error,
        e.audit_authenticated_by
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


def upgrade() -> None:
    op.add_column("symfonic_events", sa.Column("tenant", sa.String(255), nullable=True))
    op.create_index(
        "ix_symfonic_events_tenant",
        "symfonic_events",
        ["tenant", "thread_id", "interrupt_id"],
        sqlite_where=sa.text(TENANT_MINTS),
        postgresql_where=sa.text(TENANT_MINTS),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(APPEND_FUNCTION)
        op.execute(PIN_SEARCH_PATH)


def downgrade() -> None:
    bind = op.get_bind()
    recorded = bind.execute(
        sa.text("SELECT count(*) FROM symfonic_events WHERE tenant IS NOT NULL")
    ).scalar_one()
    if recorded:
        raise RuntimeError(
            f"cannot downgrade below 0019_tenants: {recorded} interrupt(s) were minted with a "
            "tenant; dropping the column would show them to every principal without tenants. "
            "Archive or keep them; nothing was changed"
        )
    op.drop_index("ix_symfonic_events_tenant", table_name="symfonic_events")
    if bind.dialect.name == "postgresql":
        op.execute(PREVIOUS_APPEND_FUNCTION)
        op.execute(PIN_SEARCH_PATH)
    op.drop_column("symfonic_events", "tenant")
