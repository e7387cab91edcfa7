"""The one-call append on PostgreSQL (SPEC §16): the function ``symfonic_append``.

Frozen: this file imports nothing from ``symfonic_store``.

A store method that appends to one thread outside a caller's transaction calls it once,
in autocommit: it takes the writers' lock in SHARE mode first (before its transaction
has an id, I11), answers "already minted?" for a mint, compares and swaps the thread's
head (``UPDATE ... WHERE version = v AND last_hash = h``, or an insert that does nothing
if the thread exists), and inserts the events and the open LangGraph interrupts it is
given as JSON. It returns 1 when it wrote, 0 when the head moved, 2 when the mint was
already recorded; the store then runs its transactional path. Its ``search_path`` is
pinned to the schema it is made in (``verify`` checks the body and the pin).

SQLite has no such function: nothing changes there. The downgrade drops the function;
the store of the revision below never calls it.

Revision ID: 0016_one_call_append
Revises: 0015_notify_cursors
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016_one_call_append"
down_revision: str | None = "0015_notify_cursors"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SIGNATURE = "symfonic_append(text, integer, text, text, json, json, json, json)"
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
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(APPEND_FUNCTION)
    op.execute(PIN_SEARCH_PATH)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
