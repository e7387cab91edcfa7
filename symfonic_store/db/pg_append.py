"""PostgreSQL's one-call append (since ``0016_one_call_append``): the function the
single-append path calls, as the migrations made it, and the statement that pins its
``search_path`` (``verify`` checks both: :mod:`.backends.pg_guards`)."""

from __future__ import annotations

APPEND_FUNCTION = "symfonic_append"
POSTGRES_APPEND_SIGNATURE = "symfonic_append(text, integer, text, text, json, json, json, json)"
POSTGRES_APPEND_FUNCTION = """
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
"""The one-call append on PostgreSQL since ``0016_one_call_append`` (see
:mod:`symfonic_store.db.statements.append_call`). Its ``search_path`` is pinned to the
schema it was made in; ``verify`` checks both (:mod:`.backends.pg_guards`). A later
migration that adds a column to the event table replaces it (``0019_tenants``: ``tenant``)."""
POSTGRES_PIN_APPEND_PATH = (
    "DO $pin$ BEGIN EXECUTE format("
    "'ALTER FUNCTION symfonic_append(text, integer, text, text, json, json, json, json) "
    "SET search_path = %I, pg_temp', current_schema()); END $pin$"
)
