"""The audit's pages read an audit row per interrupt, kept by triggers on the event table.

Frozen: this file imports nothing from ``symfonic_store``.

A page of the audit (SPEC §17) filtered by thread, actor, decision, tenant or time walked
the mints in log order and checked the ending's actor, the decision and the time on every
mint it met: a filter that matched little read the whole log. ``symfonic_audit_rows``
holds one row per interrupt -- its mint's position (the key), thread, interrupt id,
``minted_at``, tenant, the number of action requests of a batched HITL request, and of
its ending the outcome, the actor, the decision word and the interrupt that superseded a
marker -- with an index per filter in the audit's order (``minted_at``, position).

Triggers on ``symfonic_events`` keep it, so every writer does (the append's two paths,
the checkpointer, bulk loaders): an ``interrupt.minted`` inserts the row, an
``interrupt.resumed`` / ``interrupt.expired`` updates it (found through the unique index
of mints), and a deleted mint (the archive's removal) deletes it. No other event type
fires them. The decision word is the one the audit reports for every record of the
interrupt, or ``*`` where the records differ (a batch decided several ways) or the audit
derives it when read (an answer that recorded no decision).

The upgrade creates the table and the triggers (which holds appends until it commits),
fills the table from the log, then builds its indexes; the downgrade drops them all. The
table is new, so there is nothing to build beforehand: on a large log the upgrade holds
appends for as long as the fill and the index builds take (docs/operations.md).

Revision ID: 0025_audit_rows
Revises: 0024_projection_scope
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025_audit_rows"
down_revision: str | None = "0024_projection_scope"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "symfonic_audit_rows"
INDEXES = {
    "ix_symfonic_audit_rows_thread": ["thread_id"],
    "ix_symfonic_audit_rows_actor": ["actor"],
    "ix_symfonic_audit_rows_decision": ["decision"],
    "ix_symfonic_audit_rows_tenant": ["tenant"],
    "ix_symfonic_audit_rows_minted_at": [],
    # A scoped reader's actor filter: one walk per tenant it may see, whatever the actor
    # did for other tenants (a hidden name costs what an unknown one does).
    "ix_symfonic_audit_rows_tenant_actor": ["tenant", "actor"],
}
ENDINGS = "('interrupt.resumed', 'interrupt.expired')"
COLUMNS = "position, thread_id, interrupt_id, minted_at, tenant, actions, outcome"

# --- SQLite: expressions over an event row ``{e}`` (NEW, or the backfill's alias) --------


def _sqlite_reported(value: str) -> str:
    return f"CASE {value} WHEN 'approved' THEN 'approve' WHEN 'rejected' THEN 'reject' ELSE {value} END"


def _sqlite_actions(e: str) -> str:
    requests = f"json_extract({e}.audit_payload, '$.action_requests')"
    return (
        f"CASE WHEN {e}.audit_native AND json_type({e}.audit_payload, '$.action_requests') = 'array'"
        f" AND json_array_length({requests}) > 0 THEN json_array_length({requests}) END"
    )


def _sqlite_decision(e: str, actions: str) -> str:
    d = f"{e}.audit_decisions"
    erred = f"json_type({e}.data, '$.decision_error') IS NOT NULL"
    first = _sqlite_reported(f"json_extract({d}, '$[0]')")
    every = _sqlite_reported("value")
    return f"""CASE
        WHEN {e}.type = 'interrupt.expired' THEN
            CASE WHEN json_type({d}, '$[0]') = 'text' THEN {first} END
        WHEN {d} IS NULL OR json_type({d}) != 'array' THEN '*'
        WHEN {actions} IS NULL THEN
            CASE json_type({d}, '$[0]')
                WHEN 'text' THEN {first}
                WHEN 'null' THEN CASE WHEN {erred} THEN '*' END
                ELSE '*' END
        WHEN json_array_length({d}) != {actions} THEN '*'
        ELSE (SELECT CASE
                WHEN count(*) = sum(type = 'text') AND count(DISTINCT {every}) = 1 THEN min({every})
                WHEN count(*) = sum(type = 'null') AND NOT ({erred}) THEN NULL
                ELSE '*' END
              FROM json_each({d}))
    END"""


def _sqlite_superseded(e: str) -> str:
    return (
        f"CASE WHEN {e}.type = 'interrupt.expired' AND {e}.audit_reason = 'superseded'"
        f" AND json_type({e}.data, '$.superseded_by') = 'text'"
        f" THEN json_extract({e}.data, '$.superseded_by') END"
    )


def _sqlite_ending_set(e: str, actions: str) -> str:
    return (
        f"outcome = CASE {e}.type WHEN 'interrupt.resumed' THEN 'resumed' ELSE 'expired' END, "
        f"actor = {e}.actor, decision = {_sqlite_decision(e, actions)}, "
        f"superseded_by = {_sqlite_superseded(e)}"
    )


SQLITE_TRIGGERS = (
    f"""
    CREATE TRIGGER symfonic_audit_rows_mint AFTER INSERT ON symfonic_events
    WHEN NEW.type = 'interrupt.minted'
    BEGIN
        INSERT INTO {TABLE} ({COLUMNS}) VALUES (
            NEW.position, NEW.thread_id, NEW.interrupt_id,
            COALESCE(NEW.audit_minted_at, NEW.occurred_at), NEW.tenant, {_sqlite_actions("NEW")},
            'pending');
    END
    """,
    f"""
    CREATE TRIGGER symfonic_audit_rows_ending AFTER INSERT ON symfonic_events
    WHEN NEW.type IN {ENDINGS}
    BEGIN
        UPDATE {TABLE} SET {_sqlite_ending_set("NEW", f"{TABLE}.actions")}
        WHERE position = (
            SELECT m.position FROM symfonic_events m
            WHERE m.thread_id = NEW.thread_id AND m.interrupt_id = NEW.interrupt_id
              AND m.type = 'interrupt.minted');
    END
    """,
    f"""
    CREATE TRIGGER symfonic_audit_rows_removed AFTER DELETE ON symfonic_events
    WHEN OLD.type = 'interrupt.minted'
    BEGIN
        DELETE FROM {TABLE} WHERE position = OLD.position;
    END
    """,
)
SQLITE_TRIGGER_NAMES = ("symfonic_audit_rows_mint", "symfonic_audit_rows_ending", "symfonic_audit_rows_removed")
SQLITE_BACKFILL = (
    f"""
    INSERT INTO {TABLE} ({COLUMNS})
    SELECT e.position, e.thread_id, e.interrupt_id, COALESCE(e.audit_minted_at, e.occurred_at),
        e.tenant, {_sqlite_actions("e")}, 'pending'
    FROM symfonic_events e WHERE e.type = 'interrupt.minted'
    """,
    f"""
    UPDATE {TABLE} SET {_sqlite_ending_set("e", f"{TABLE}.actions")}
    FROM symfonic_events e
    WHERE e.thread_id = {TABLE}.thread_id AND e.interrupt_id = {TABLE}.interrupt_id
      AND e.type IN {ENDINGS}
    """,
)

# --- PostgreSQL: one function computes the decision, one trigger function keeps the rows --

POSTGRES_FUNCTIONS = (
    """
    CREATE OR REPLACE FUNCTION symfonic_audit_reported(p_word text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE p_word WHEN 'approved' THEN 'approve' WHEN 'rejected' THEN 'reject'
            ELSE p_word END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION symfonic_audit_decision(
        p_type text, p_decisions json, p_data json, p_actions integer
    ) RETURNS text
    LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE
        d jsonb := p_decisions::jsonb;
        n integer; texts integer; nulls integer; words integer; word text;
    BEGIN
        IF p_type = 'interrupt.expired' THEN
            IF jsonb_typeof(d) = 'array' AND jsonb_typeof(d -> 0) = 'string' THEN
                RETURN symfonic_audit_reported(d ->> 0);
            END IF;
            RETURN NULL;
        END IF;
        IF d IS NULL OR jsonb_typeof(d) <> 'array' THEN
            RETURN '*';
        END IF;
        IF p_actions IS NULL THEN
            IF jsonb_typeof(d -> 0) = 'string' THEN
                RETURN symfonic_audit_reported(d ->> 0);
            ELSIF jsonb_typeof(d -> 0) = 'null' AND (p_data -> 'decision_error') IS NULL THEN
                RETURN NULL;
            END IF;
            RETURN '*';
        END IF;
        IF jsonb_array_length(d) <> p_actions THEN
            RETURN '*';
        END IF;
        SELECT count(*),
            count(*) FILTER (WHERE jsonb_typeof(x) = 'string'),
            count(*) FILTER (WHERE jsonb_typeof(x) = 'null'),
            count(DISTINCT symfonic_audit_reported(x #>> '{}')) FILTER (WHERE jsonb_typeof(x) = 'string'),
            min(symfonic_audit_reported(x #>> '{}')) FILTER (WHERE jsonb_typeof(x) = 'string')
        INTO n, texts, nulls, words, word
        FROM jsonb_array_elements(d) AS x;
        IF texts = n AND words = 1 THEN
            RETURN word;
        ELSIF nulls = n AND (p_data -> 'decision_error') IS NULL THEN
            RETURN NULL;
        END IF;
        RETURN '*';
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION symfonic_audit_actions(p_native boolean, p_payload json)
    RETURNS integer
    LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN
        IF p_native AND json_typeof(p_payload) = 'object'
           AND json_typeof(p_payload -> 'action_requests') = 'array'
           AND json_array_length(p_payload -> 'action_requests') > 0 THEN
            RETURN json_array_length(p_payload -> 'action_requests');
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION symfonic_audit_superseded(p_type text, p_reason text, p_data json)
    RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN p_type = 'interrupt.expired' AND p_reason = 'superseded'
            AND json_typeof(p_data -> 'superseded_by') = 'string'
            THEN p_data ->> 'superseded_by' END
    $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION symfonic_audit_rows_keep() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            DELETE FROM {TABLE} WHERE position = OLD.position;
            RETURN NULL;
        END IF;
        IF NEW.type = 'interrupt.minted' THEN
            INSERT INTO {TABLE} ({COLUMNS}) VALUES (
                NEW.position, NEW.thread_id, NEW.interrupt_id,
                COALESCE(NEW.audit_minted_at, NEW.occurred_at), NEW.tenant,
                symfonic_audit_actions(NEW.audit_native, NEW.audit_payload), 'pending');
        ELSE
            UPDATE {TABLE} AS r SET
                outcome = CASE NEW.type WHEN 'interrupt.resumed' THEN 'resumed' ELSE 'expired' END,
                actor = NEW.actor,
                decision = symfonic_audit_decision(NEW.type, NEW.audit_decisions, NEW.data, r.actions),
                superseded_by = symfonic_audit_superseded(NEW.type, NEW.audit_reason, NEW.data)
            WHERE r.position = (
                SELECT m.position FROM symfonic_events m
                WHERE m.thread_id = NEW.thread_id AND m.interrupt_id = NEW.interrupt_id
                  AND m.type = 'interrupt.minted');
        END IF;
        RETURN NULL;
    END
    $$
    """,
)
POSTGRES_TRIGGERS = (
    f"""
    CREATE TRIGGER symfonic_audit_rows_insert AFTER INSERT ON symfonic_events
    FOR EACH ROW WHEN (NEW.type IN ('interrupt.minted', 'interrupt.resumed', 'interrupt.expired'))
    EXECUTE FUNCTION symfonic_audit_rows_keep()
    """,
    """
    CREATE TRIGGER symfonic_audit_rows_removed AFTER DELETE ON symfonic_events
    FOR EACH ROW WHEN (OLD.type = 'interrupt.minted')
    EXECUTE FUNCTION symfonic_audit_rows_keep()
    """,
)
POSTGRES_TRIGGER_NAMES = ("symfonic_audit_rows_insert", "symfonic_audit_rows_removed")
POSTGRES_FUNCTION_NAMES = (
    "symfonic_audit_rows_keep()",
    "symfonic_audit_superseded(text, text, json)",
    "symfonic_audit_actions(boolean, json)",
    "symfonic_audit_decision(text, json, json, integer)",
    "symfonic_audit_reported(text)",
)
POSTGRES_BACKFILL = (
    f"""
    INSERT INTO {TABLE} ({COLUMNS})
    SELECT e.position, e.thread_id, e.interrupt_id, COALESCE(e.audit_minted_at, e.occurred_at),
        e.tenant, symfonic_audit_actions(e.audit_native, e.audit_payload), 'pending'
    FROM symfonic_events e WHERE e.type = 'interrupt.minted'
    """,
    f"""
    UPDATE {TABLE} AS r SET
        outcome = CASE e.type WHEN 'interrupt.resumed' THEN 'resumed' ELSE 'expired' END,
        actor = e.actor,
        decision = symfonic_audit_decision(e.type, e.audit_decisions, e.data, r.actions),
        superseded_by = symfonic_audit_superseded(e.type, e.audit_reason, e.data)
    FROM symfonic_events e
    WHERE e.thread_id = r.thread_id AND e.interrupt_id = r.interrupt_id
      AND e.type IN {ENDINGS}
    """,
)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    position = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        TABLE,
        sa.Column("position", position, primary_key=True, autoincrement=False),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("interrupt_id", sa.String(255), nullable=False),
        sa.Column("minted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=True),
        sa.Column("actions", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(255), nullable=True),
        sa.Column("decision", sa.String(64), nullable=True),
        sa.Column("superseded_by", sa.String(255), nullable=True),
    )
    if not sqlite:
        for statement in POSTGRES_FUNCTIONS:
            op.execute(statement)
    # The triggers first: creating one locks the event table against appends until the
    # upgrade commits (PostgreSQL waits for the appends in flight), so the fill below
    # reads every event there will be, and no append slips between it and the triggers.
    for statement in SQLITE_TRIGGERS if sqlite else POSTGRES_TRIGGERS:
        op.execute(statement)
    for statement in SQLITE_BACKFILL if sqlite else POSTGRES_BACKFILL:
        op.execute(statement)
    # The indexes after the fill: one build each, not one insert per row each.
    for name, columns in INDEXES.items():
        op.create_index(name, TABLE, [*columns, "minted_at", "position"], if_not_exists=True)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        for name in SQLITE_TRIGGER_NAMES:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    else:
        for name in POSTGRES_TRIGGER_NAMES:
            op.execute(f"DROP TRIGGER IF EXISTS {name} ON symfonic_events")
        for signature in POSTGRES_FUNCTION_NAMES:
            op.execute(f"DROP FUNCTION IF EXISTS {signature}")
    for name in INDEXES:
        op.drop_index(name, table_name=TABLE)
    op.drop_table(TABLE)
