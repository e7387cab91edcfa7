"""Evidence that survives a database administrator: archives and signed checkpoints.

Frozen: this file imports nothing from ``symfonic_store``.

- ``symfonic_threads.archived_version``: the versions of a thread moved into an archive;
  its projection head stays, so a later event chains on from it.
- ``symfonic_archives`` / ``symfonic_archived_threads``: each archive's signed manifest,
  and per thread the archived head (the base the rebuild and verify start from).
- ``symfonic_checkpoints`` / ``symfonic_checkpoint_heads`` / ``symfonic_checkpoint_buckets``:
  the checkpoints taken, and the per-thread heads of the latest one, so the next one costs
  the threads changed since.
- PostgreSQL: the append-only trigger function lets one DELETE through, the one that
  ``symfonic_archive_remove(jsonb)`` runs: a ``SECURITY DEFINER`` function owned by the
  role running this migration (the tables' owner), which removes only whole threads
  recorded as archived, at exactly their archived head. EXECUTE is revoked from PUBLIC:
  grant it to the application's role, which needs no DELETE on the event table.

The downgrade refuses while any thread has an archived head: older releases would read
such a head as events removed behind the store's back (verify fails, rebuild refuses).

Revision ID: 0009_archive
Revises: 0003_native_interrupts
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

revision: str = "0009_archive"
down_revision: str | None = "0003_native_interrupts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION symfonic_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- symfonic_archive_remove() (SECURITY DEFINER, the tables' owner) turns this on for
    -- its own DELETE; a role that is not the owner cannot pass, whatever it sets.
    IF TG_OP = 'DELETE'
       AND current_setting('symfonic.archive_removal', true) = 'on'
       AND current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID)
    THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'symfonic_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$
"""

# The function as 0001_event_log created it, restored by the downgrade.
APPEND_ONLY_FUNCTION_0001 = """
CREATE OR REPLACE FUNCTION symfonic_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'symfonic_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$
"""

ARCHIVE_REMOVE_FUNCTION = """
CREATE FUNCTION symfonic_archive_remove(heads jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    head jsonb;
    t text;
    v integer;
    h text;
    n bigint;
    removed bigint := 0;
BEGIN
    FOR head IN SELECT value FROM jsonb_array_elements(heads) LOOP
        t := head->>'thread_id';
        v := (head->>'version')::integer;
        h := head->>'last_hash';
        -- Only a thread recorded as archived at this head, whose last event is that head:
        -- the caller cannot remove part of a thread, nor one nobody archived.
        IF NOT EXISTS (
            SELECT 1 FROM symfonic_archived_threads a
            WHERE a.thread_id = t AND a.version = v AND a.last_hash = h
        ) OR NOT EXISTS (
            SELECT 1 FROM symfonic_events e WHERE e.thread_id = t AND e.version = v AND e.hash = h
        ) OR EXISTS (
            SELECT 1 FROM symfonic_events e WHERE e.thread_id = t AND e.version > v
        ) THEN
            RAISE EXCEPTION 'symfonic_archive_remove: thread % is not recorded as archived at its last event', t
                USING ERRCODE = 'restrict_violation';
        END IF;
        PERFORM set_config('symfonic.archive_removal', 'on', true);
        DELETE FROM symfonic_events WHERE thread_id = t AND version <= v;
        GET DIAGNOSTICS n = ROW_COUNT;
        PERFORM set_config('symfonic.archive_removal', 'off', true);
        removed := removed + n;
    END LOOP;
    RETURN removed;
END
$$
"""
# A SECURITY DEFINER function must not resolve names through its caller's search_path.
PIN_SEARCH_PATH = """
DO $$ BEGIN
    EXECUTE format(
        'ALTER FUNCTION symfonic_archive_remove(jsonb) SET search_path = %I, pg_temp',
        current_schema()
    );
END $$
"""


def upgrade() -> None:
    op.add_column("symfonic_threads", sa.Column("archived_version", sa.Integer(), nullable=True))
    op.create_table(
        "symfonic_archives",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("root", sa.String(64), nullable=False),
        sa.Column("before", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.UniqueConstraint("root", name="uq_symfonic_archives_root"),
    )
    op.create_table(
        "symfonic_archived_threads",
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column(
            "archive_id",
            sa.Integer(),
            sa.ForeignKey("symfonic_archives.id", name="fk_symfonic_archived_threads_archive"),
            nullable=False,
        ),
        sa.Column("first_version", sa.Integer(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
    )
    op.create_index(
        "ix_symfonic_archived_threads_archive", "symfonic_archived_threads", ["archive_id"]
    )
    op.create_table(
        "symfonic_checkpoints",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.String(64), nullable=False),
        sa.Column("previous_id", sa.String(64), nullable=True),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("archives", sa.Integer(), nullable=False),
        sa.Column("statement", sa.JSON(), nullable=False),
        sa.Column("heads", sa.JSON(), nullable=False),
        sa.UniqueConstraint("id", name="uq_symfonic_checkpoints_id"),
    )
    op.create_table(
        "symfonic_checkpoint_heads",
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("bucket", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("base", sa.Integer(), nullable=False),
        sa.Column("leaf_hash", sa.String(64), nullable=False),
    )
    op.create_index(
        "ix_symfonic_checkpoint_heads_bucket", "symfonic_checkpoint_heads", ["bucket"]
    )
    op.create_table(
        "symfonic_checkpoint_buckets",
        sa.Column("bucket", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(APPEND_ONLY_FUNCTION)
        op.execute(ARCHIVE_REMOVE_FUNCTION)
        op.execute(PIN_SEARCH_PATH)
        op.execute("REVOKE ALL ON FUNCTION symfonic_archive_remove(jsonb) FROM PUBLIC")


def downgrade() -> None:
    table = sa.table("symfonic_archived_threads")
    archived = op.get_bind().execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    if archived:
        raise CommandError(
            f"refusing to downgrade past 0009_archive: {archived} archived thread head(s) "
            "are kept in the projection while their events live in archive files; older "
            "releases would read each as events removed behind the store's back (verify "
            "fails, the rebuild refuses). Keep this release, or restore the archived events "
            "into a fresh store first"
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS symfonic_archive_remove(jsonb)")
        op.execute(APPEND_ONLY_FUNCTION_0001)
    op.drop_table("symfonic_checkpoint_buckets")
    op.drop_index("ix_symfonic_checkpoint_heads_bucket", table_name="symfonic_checkpoint_heads")
    op.drop_table("symfonic_checkpoint_heads")
    op.drop_table("symfonic_checkpoints")
    op.drop_index(
        "ix_symfonic_archived_threads_archive", table_name="symfonic_archived_threads"
    )
    op.drop_table("symfonic_archived_threads")
    op.drop_table("symfonic_archives")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite (3.35+) drops an unindexed column in place; a batch copy of the table
        # would have to rebuild its partial index from reflection.
        op.execute("ALTER TABLE symfonic_threads DROP COLUMN archived_version")
    else:
        op.drop_column("symfonic_threads", "archived_version")
