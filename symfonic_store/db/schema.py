"""The SQL schema: the append-only event table, the projection, the wake-ups the sweep
owes, and the evidence beside them (archives, checkpoints); :mod:`.count_tables` the rest.

The migrations in ``migrations/`` create exactly this (``alembic check`` in the test
suite proves there is no drift). The database keeps the promises:

- ``uq_symfonic_events_thread_version``: two writers never win the same version (I2);
- ``uq_symfonic_events_one_mint``: one ``interrupt.minted`` per (thread, interrupt) (I4);
- ``uq_symfonic_events_one_ending``: one terminal event per (thread, interrupt) (I3);
- ``uq_symfonic_events_one_reminder`` and ``uq_symfonic_events_one_escalation``: the
  sweep reminds of and escalates an interrupt at most once each (SPEC §14);
- ``uq_symfonic_events_one_vote``: one ``interrupt.voted`` per (thread, interrupt, actor);
- triggers refuse ``UPDATE``, ``DELETE`` (and on PostgreSQL ``TRUNCATE``) (I1);
- the primary key of ``symfonic_wakeups``: at most one owed wake-up per interrupt;
- ``symfonic_checkpoints.seq``: two checkpoints never both follow the same one (a fork);
- on PostgreSQL, archived events leave only through ``symfonic_archive_remove``, a
  ``SECURITY DEFINER`` function of the tables' owner (SPEC §10).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from .count_tables import declare as declare_count_tables
from .marker_name import MarkerName
from .pg_append import APPEND_FUNCTION as APPEND_FUNCTION
from .pg_append import POSTGRES_APPEND_FUNCTION as POSTGRES_APPEND_FUNCTION
from .pg_append import POSTGRES_APPEND_SIGNATURE as POSTGRES_APPEND_SIGNATURE
from .pg_append import POSTGRES_PIN_APPEND_PATH as POSTGRES_PIN_APPEND_PATH

EVENTS_TABLE = "symfonic_events"
THREADS_TABLE = "symfonic_threads"
OPEN_INTERRUPTS_TABLE = "symfonic_open_interrupts"
AUDIT_ROWS_TABLE = "symfonic_audit_rows"
CLAIMS_TABLE = "symfonic_claims"
WAKEUPS_TABLE = "symfonic_wakeups"
ARCHIVES_TABLE = "symfonic_archives"
ARCHIVED_THREADS_TABLE = "symfonic_archived_threads"
ARCHIVED_READ_KEYS_TABLE = "symfonic_archived_read_keys"
CHECKPOINTS_TABLE = "symfonic_checkpoints"
CHECKPOINT_HEADS_TABLE = "symfonic_checkpoint_heads"
CHECKPOINT_BUCKETS_TABLE = "symfonic_checkpoint_buckets"
NOTIFY_CURSORS_TABLE = "symfonic_notify_cursors"
NOTIFY_DEAD_LETTERS_TABLE = "symfonic_notify_dead_letters"
VERSION_TABLE = "symfonic_store_alembic_version"
"""Alembic's table, named apart so that an application's own migrations may share the database."""

metadata = sa.MetaData()


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timestamp that goes in and comes out timezone-aware UTC on every backend.

    SQLite has no time zone type: values are stored as naive UTC and read back with
    ``tzinfo=UTC``. Naive datetimes are refused on the way in.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)
        # SQLite returns the stored text ("YYYY-MM-DD HH:MM:SS.ffffff", naive UTC):
        # parse it with fromisoformat instead of the generic DateTime regex.
        fromisoformat = datetime.fromisoformat

        def process(value: Any) -> datetime | None:
            if value is None:
                return None
            if isinstance(value, str):
                moment = fromisoformat(value)
                return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
            return self.process_result_value(value, dialect)

        return process

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment: datetime = (
            datetime.fromisoformat(value) if isinstance(value, str) else value
        )
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)


# One row per event, never updated or deleted. The column names are public.
events = sa.Table(
    EVENTS_TABLE,
    metadata,
    sa.Column(
        "position",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("thread_id", sa.String(255), nullable=False),
    sa.Column("version", sa.Integer(), nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("interrupt_id", sa.String(255), nullable=True),
    sa.Column("run_id", sa.Text(), nullable=True),
    sa.Column("actor", sa.String(255), nullable=True),
    sa.Column("data", sa.JSON(), nullable=False),
    sa.Column("occurred_at", UTCDateTime(), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    # PostgreSQL only (NULL on SQLite): the key gap-safe readers order and page on (I11,
    # SPEC §11), set by the trigger of POSTGRES_TX_ID_TRIGGER (its default, the inserting
    # transaction's id, when the trigger is off), never by the application.
    sa.Column("tx_id", sa.BigInteger(), nullable=True),
    # The audit columns (symfonic_store/audit_columns.py, since 0011_audit_columns): what
    # audit() reports, copied from ``data`` by the append's own INSERT. Not covered by the
    # hash; verify() recomputes them from the data. NULL where they do not apply.
    sa.Column("audit_name", sa.Text(), nullable=True),
    sa.Column("audit_payload", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("audit_minted_at", UTCDateTime(), nullable=True),
    sa.Column("audit_native", sa.Boolean(), nullable=True),
    sa.Column("audit_response", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("audit_decisions", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("audit_reason", sa.Text(), nullable=True),
    sa.Column("audit_error", sa.Text(), nullable=True),
    sa.Column("audit_authenticated_by", sa.Text(), nullable=True),
    # The tenant an interrupt was minted for (SPEC §15, since 0019_tenants): set on its
    # ``interrupt.minted`` only, NULL elsewhere and on the mints before it. Not in the hashed
    # data: who may see the interrupt, not what it is.
    sa.Column("tenant", sa.String(255), nullable=True),
    sa.UniqueConstraint("thread_id", "version", name="uq_symfonic_events_thread_version"),
    sa.Index("ix_symfonic_events_interrupt", "thread_id", "interrupt_id"),
    sa.Index("ix_symfonic_events_actor", "actor", "occurred_at"),
    # The read order of PostgreSQL's gap-safe readers; SQLite (tx_id always NULL) keeps
    # no entries, so its appends do not pay for it.
    sa.Index(
        "ix_symfonic_events_tx",
        "tx_id",
        "position",
        sqlite_where=sa.text("tx_id IS NOT NULL"),
    ),
    sa.Index(
        "uq_symfonic_events_one_mint",
        "thread_id",
        "interrupt_id",
        unique=True,
        sqlite_where=sa.text("type = 'interrupt.minted'"),
        postgresql_where=sa.text("type = 'interrupt.minted'"),
    ),
    sa.Index(
        "uq_symfonic_events_one_ending",
        "thread_id",
        "interrupt_id",
        unique=True,
        sqlite_where=sa.text("type IN ('interrupt.resumed', 'interrupt.expired')"),
        postgresql_where=sa.text("type IN ('interrupt.resumed', 'interrupt.expired')"),
    ),
    sa.Index(
        "uq_symfonic_events_one_reminder",
        "thread_id",
        "interrupt_id",
        unique=True,
        sqlite_where=sa.text("type = 'interrupt.reminded'"),
        postgresql_where=sa.text("type = 'interrupt.reminded'"),
    ),
    sa.Index(
        "uq_symfonic_events_one_escalation",
        "thread_id",
        "interrupt_id",
        unique=True,
        sqlite_where=sa.text("type = 'interrupt.escalated'"),
        postgresql_where=sa.text("type = 'interrupt.escalated'"),
    ),
    # One vote per principal on an interrupt (SPEC §15, since 0020_one_vote): racing votes
    # of one principal count once.
    sa.Index(
        "uq_symfonic_events_one_vote",
        "thread_id",
        "interrupt_id",
        "actor",
        unique=True,
        sqlite_where=sa.text("type = 'interrupt.voted'"),
        postgresql_where=sa.text("type = 'interrupt.voted'"),
    ),
    # The refused answers, in the order audit() reads them (since 0018_audit_refusals):
    # without it that read scans every event; no other event's append touches it.
    sa.Index(
        "ix_symfonic_events_refusals",
        "thread_id",
        "version",
        sqlite_where=sa.text("type = 'interrupt.resume_rejected'"),
        postgresql_where=sa.text("type = 'interrupt.resume_rejected'"),
    ),
    # The mints that have a tenant: one tenant's interrupts without scanning the log.
    sa.Index(
        "ix_symfonic_events_tenant",
        "tenant",
        "thread_id",
        "interrupt_id",
        sqlite_where=sa.text("tenant IS NOT NULL"),
        postgresql_where=sa.text("tenant IS NOT NULL"),
    ),
)

RUN_MOVED_ON = (
    "pending_interrupt_id IS NOT NULL AND pending_run_id IS NOT NULL"
    " AND (run_id IS NULL OR run_id != pending_run_id)"
)
"""The predicate of ``ix_symfonic_threads_run_moved_on``; a query spells it the same way
(:func:`~symfonic_store.db.statements.threads.stale_candidates`) to read that index."""

# One row per thread: the fold of its events, updated in the append's transaction.
threads = sa.Table(
    THREADS_TABLE,
    metadata,
    sa.Column("thread_id", sa.String(255), primary_key=True),
    sa.Column("version", sa.Integer(), nullable=False),
    sa.Column("last_hash", sa.String(64), nullable=False),
    sa.Column("run_id", sa.Text(), nullable=True),
    sa.Column("pending", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("pending_interrupt_id", sa.String(255), nullable=True),
    sa.Column("pending_run_id", sa.Text(), nullable=True),
    sa.Column("pending_minted_at", sa.Float(), nullable=True),
    sa.Column("pending_since", sa.Float(), nullable=True),
    # Versions 1..archived_version of the thread were moved into an archive (SPEC §10):
    # the head stays here, so a later event chains on from it; NULL for a thread whose
    # events are all in the table. The append path never writes it.
    sa.Column("archived_version", sa.Integer(), nullable=True),
    # The pending marker's tenant (its mint's ``tenant``) and latest assignee as the API
    # shows it (a principal, or ``role:<name>``), NULL without a marker (since
    # 0024_projection_scope): the inbox's tenant scope and assignment filter page on them.
    sa.Column("tenant", sa.String(255), nullable=True),
    sa.Column("assigned_to", sa.Text(), nullable=True),
    sa.Index(
        "ix_symfonic_threads_pending_since",
        "pending_since",
        sqlite_where=sa.text("pending_interrupt_id IS NOT NULL"),
        postgresql_where=sa.text("pending_interrupt_id IS NOT NULL"),
    ),
    # The threads whose pending marker names another run than the thread's (stale by
    # rule P3, since 0022_bounded_reads): the sweep's run test reads only these.
    sa.Index(
        "ix_symfonic_threads_run_moved_on",
        "thread_id",
        sqlite_where=sa.text(RUN_MOVED_ON),
        postgresql_where=sa.text(RUN_MOVED_ON),
    ),
)

# The inbox's name filter on seed markers pages on it (since 0023_inbox_pages).
sa.Index(
    "ix_symfonic_threads_pending_name", MarkerName(threads.c.pending), threads.c.pending_since,
    threads.c.thread_id, sqlite_where=sa.text("pending_interrupt_id IS NOT NULL"),
    postgresql_where=sa.text("pending_interrupt_id IS NOT NULL"),
)

# The inbox's tenant scope (one keyset branch per tenant) and assignment filter page on
# them, in the order of the pending markers' pages (since 0024_projection_scope).
sa.Index(
    "ix_symfonic_threads_pending_tenant", threads.c.tenant, threads.c.pending_since,
    threads.c.thread_id, sqlite_where=sa.text("pending_interrupt_id IS NOT NULL"),
    postgresql_where=sa.text("pending_interrupt_id IS NOT NULL"),
)
sa.Index(
    "ix_symfonic_threads_pending_assignee", threads.c.assigned_to, threads.c.pending_since,
    threads.c.thread_id, sqlite_where=sa.text("assigned_to IS NOT NULL"),
    postgresql_where=sa.text("assigned_to IS NOT NULL"),
)

# One row per open LangGraph interrupt (SPEC §8): the fold of the native mints without an
# ending, updated in the append's transaction like the thread row. A thread may hold
# several; the seed marker keeps its one slot in the thread row (I5).
open_interrupts = sa.Table(
    OPEN_INTERRUPTS_TABLE,
    metadata,
    sa.Column("thread_id", sa.String(255), primary_key=True),
    sa.Column("interrupt_id", sa.String(255), primary_key=True),
    sa.Column("name", sa.Text(), nullable=True),
    sa.Column("payload", sa.JSON(), nullable=True),
    sa.Column("minted_at", sa.Float(), nullable=False),
    sa.Column("actor", sa.String(255), nullable=True),
    sa.Column("graph", sa.Text(), nullable=True),
    sa.Column("checkpoint_id", sa.Text(), nullable=True),
    sa.Column("checkpoint_ns", sa.Text(), nullable=True),
    sa.Column("task_id", sa.Text(), nullable=True),
    sa.Column("breakpoint", sa.Boolean(), nullable=False),
    sa.Column("version", sa.Integer(), nullable=False),
    # The mint's tenant and the latest assignee as the API shows it (a principal, or
    # ``role:<name>``; NULL: unassigned), since 0024_projection_scope.
    sa.Column("tenant", sa.String(255), nullable=True),
    sa.Column("assigned_to", sa.Text(), nullable=True),
    sa.Index("ix_symfonic_open_interrupts_minted_at", "minted_at"),
    # The inbox's name filter pages on it in minting order (since 0023_inbox_pages).
    sa.Index("ix_symfonic_open_interrupts_name", "name", "minted_at", "thread_id", "interrupt_id"),
    # The tenant scope and the assignment filter, likewise (since 0024_projection_scope).
    sa.Index(
        "ix_symfonic_open_interrupts_tenant", "tenant", "minted_at", "thread_id", "interrupt_id"
    ),
    sa.Index(
        "ix_symfonic_open_interrupts_assignee", "assigned_to", "minted_at", "thread_id",
        "interrupt_id", sqlite_where=sa.text("assigned_to IS NOT NULL"),
        postgresql_where=sa.text("assigned_to IS NOT NULL"),
    ),
)

# One row per interrupt, kept by triggers on the event table (since 0025_audit_rows): what
# the audit's filters page on (SPEC §17), each an index walked in the audit's order
# (minted_at, then the mint's position). Not evidence: a copy of the mint and its ending,
# rebuilt from the log by rebuild_projection().
audit_rows = sa.Table(
    AUDIT_ROWS_TABLE,
    metadata,
    sa.Column("position", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
              autoincrement=False),
    sa.Column("thread_id", sa.String(255), nullable=False),
    sa.Column("interrupt_id", sa.String(255), nullable=False),
    sa.Column("minted_at", UTCDateTime(), nullable=False),
    sa.Column("tenant", sa.String(255), nullable=True),
    # A batched HITL request's number of action requests (one record each), else NULL.
    sa.Column("actions", sa.Integer(), nullable=True),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("actor", sa.String(255), nullable=True),
    # The decision every record of the interrupt reports, or "*": its records differ, or
    # the word is derived when read (an answer that recorded none).
    sa.Column("decision", sa.String(64), nullable=True),
    # A superseded marker's expiry: the interrupt that superseded it (its requester is the
    # expiry's actor, hidden from a reader who may not see that interrupt: SPEC §15).
    sa.Column("superseded_by", sa.String(255), nullable=True),
    *(
        sa.Index(f"ix_symfonic_audit_rows_{key}", *cols, "minted_at", "position")
        for key, cols in (("thread", ("thread_id",)), ("actor", ("actor",)),
                          ("decision", ("decision",)), ("tenant", ("tenant",)), ("minted_at", ()),
                          ("tenant_actor", ("tenant", "actor")))
    ),
)

# The first phase of a gateway answer (SPEC §8): a claim commits before the graph runs;
# the primary key lets one answer claim an interrupt at a time. A claim is not an event:
# it becomes one (``interrupt.resumed`` or a ``not_taken`` rejection) when it settles.
claims = sa.Table(
    CLAIMS_TABLE,
    metadata,
    sa.Column("thread_id", sa.String(255), primary_key=True),
    sa.Column("interrupt_id", sa.String(255), primary_key=True),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("response", sa.JSON(), nullable=True),
    sa.Column("claimed_at", sa.Float(), nullable=False),
    # How the service established ``actor`` (SPEC §12), and the decision the answer was
    # admitted with, held until the claim settles into ``interrupt.resumed``.
    sa.Column("authenticated_by", sa.String(255), nullable=True),
    sa.Column("decided", sa.JSON(none_as_null=True), nullable=True),
)

# One row per sweep expiry whose wake-up (``on_expired``) is still owed: inserted in the
# expiry's own transaction, deleted once ``on_expired`` returned. A commit whose
# acknowledgement was lost leaves its rows here, so the next sweep still wakes those
# graphs. Delivery bookkeeping: delivered rows are deleted (the events are the record);
# a row an operator dropped stays, saying who gave the wake-up up and when.
wakeups = sa.Table(
    WAKEUPS_TABLE,
    metadata,
    sa.Column("thread_id", sa.String(255), primary_key=True),
    sa.Column("interrupt_id", sa.String(255), primary_key=True),
    sa.Column("reason", sa.String(64), nullable=False),
    # The expiry event is (thread_id, expired_version) in symfonic_events.
    sa.Column("expired_version", sa.Integer(), nullable=False),
    sa.Column("expired_at", UTCDateTime(), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False),
    sa.Column("last_error", sa.Text(), nullable=True),
    # A sweep delivering the wake-up holds it until claimed_until (Unix seconds, the
    # Python clock), so a concurrent sweep does not deliver it at the same time.
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claimed_until", sa.Float(), nullable=True),
    # The graph the wake-up is owed to: the name the interrupt's mint recorded (NULL when
    # it names none, e.g. a seed marker). A sweep waking graph X delivers only X's and
    # the unnamed ones X's checkpointer holds (since 0013_wakeup_drops).
    sa.Column("graph", sa.Text(), nullable=True),
    # An operator gave the wake-up up (``wakeups --drop``): who and when. A dropped row
    # is no longer owed; it stays as the record of that decision.
    sa.Column("dropped_by", sa.String(255), nullable=True),
    sa.Column("dropped_at", UTCDateTime(), nullable=True),
)

# --- the notifier's bookkeeping (SPEC §14, symfonic_store/notify/) --------------------

# One row per subscription of a `notify` config: its durable cursor (the position of the
# last event it is done with, read gap-safe as events(after=...) reads, I11), the lease a
# notify process holds while it delivers (``lease_owner`` until ``lease_until``, Unix
# seconds of the Python clock: two processes never deliver to one subscription at once),
# the failing tries of the event after the cursor, and the counts /metrics shows. Not
# events: bookkeeping of deliveries, which the log does not need to be true.
notify_cursors = sa.Table(
    NOTIFY_CURSORS_TABLE,
    metadata,
    sa.Column("subscription", sa.String(255), primary_key=True),
    sa.Column("position", sa.BigInteger(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("lease_owner", sa.String(64), nullable=True),
    sa.Column("lease_until", sa.Float(), nullable=True),
    # A 410 Gone disabled it (``notify enable`` clears both; the cursor did not move).
    sa.Column("disabled_at", UTCDateTime(), nullable=True),
    sa.Column("disabled_reason", sa.Text(), nullable=True),
    # The event after the cursor that is failing: its tries so far, since when, and when
    # the next try is due (capped exponential backoff).
    sa.Column("failing_position", sa.BigInteger(), nullable=True),
    sa.Column("tries", sa.Integer(), nullable=False),
    sa.Column("first_failed_at", sa.Float(), nullable=True),
    sa.Column("next_try_at", sa.Float(), nullable=True),
    sa.Column("last_error", sa.Text(), nullable=True),
    sa.Column("delivered", sa.BigInteger(), nullable=False),
    sa.Column("failed", sa.BigInteger(), nullable=False),
    sa.Column("dead_lettered", sa.BigInteger(), nullable=False),
    sa.Column("delivered_at", UTCDateTime(), nullable=True),
)

# An event a subscription gave up on after its retry limits: the subscription went on
# with the next one; ``notify retry NAME`` sends it again (``resent_at`` once delivered).
notify_dead_letters = sa.Table(
    NOTIFY_DEAD_LETTERS_TABLE,
    metadata,
    sa.Column("subscription", sa.String(255), primary_key=True),
    sa.Column("position", sa.BigInteger(), primary_key=True, autoincrement=False),
    sa.Column("thread_id", sa.String(255), nullable=False),
    sa.Column("interrupt_id", sa.String(255), nullable=True),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("tries", sa.Integer(), nullable=False),
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("dead_at", UTCDateTime(), nullable=False),
    sa.Column("resent_at", UTCDateTime(), nullable=True),
)

# The counts /metrics reads (since 0026_metric_counts): see db/count_tables.py.
open_counts, open_count_deltas, metric_counts, metric_fold = declare_count_tables(metadata)

# --- evidence: archives and signed checkpoints (SPEC §10) ----------------------------

# One row per archive whose threads were removed from the event table: the signed
# manifest that was written and verified before the removal (services/archive.py).
archives = sa.Table(
    ARCHIVES_TABLE,
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("root", sa.String(64), nullable=False),
    sa.Column("before", UTCDateTime(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("threads", sa.Integer(), nullable=False),
    sa.Column("events", sa.BigInteger(), nullable=False),
    sa.Column("key_id", sa.String(64), nullable=True),
    sa.Column("manifest", sa.JSON(), nullable=False),
    sa.UniqueConstraint("root", name="uq_symfonic_archives_root"),
)

# One row per (thread, archived head): versions first_version..version of the thread left
# the event table in archive ``archive_id``. The latest row of a thread is the base its
# later events chain on from; the rebuild and verify start there.
# Tables alike in shape only, deliberately spelled out: each is the frozen shape its migration
# creates.
archived_threads = sa.Table(
    ARCHIVED_THREADS_TABLE,
    metadata,
    sa.Column("thread_id", sa.String(255), primary_key=True),
    sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column(
        "archive_id",
        sa.Integer(),
        sa.ForeignKey(f"{ARCHIVES_TABLE}.id", name="fk_symfonic_archived_threads_archive"),
        nullable=False,
    ),
    sa.Column("first_version", sa.Integer(), nullable=False),
    sa.Column("position", sa.BigInteger(), nullable=False),
    sa.Column("last_hash", sa.String(64), nullable=False),
    sa.Column("run_id", sa.Text(), nullable=True),
    sa.Index("ix_symfonic_archived_threads_archive", "archive_id"),
)

# Where each archived event sat in the gap-safe readers' order on PostgreSQL (its tx_id),
# kept when its row is removed: a consumer whose cursor is an archived event's position
# resumes exactly after it (SPEC §11), instead of after the nearest event below it by
# position, which in (tx_id, position) order may come after events it has not seen.
# Empty on SQLite, whose readers read in position order.
archived_read_keys = sa.Table(
    ARCHIVED_READ_KEYS_TABLE,
    metadata,
    sa.Column("position", sa.BigInteger(), primary_key=True, autoincrement=False),
    sa.Column("tx_id", sa.BigInteger(), nullable=False),
)

# Every signed checkpoint taken (services/evidence/taking.py), in order: ``seq`` is the previous
# one's plus one, so two checkpoints racing from the same previous one cannot both commit.
checkpoints = sa.Table(
    CHECKPOINTS_TABLE,
    metadata,
    sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("id", sa.String(64), nullable=False),
    sa.Column("position", sa.BigInteger(), nullable=False),
    sa.Column("root", sa.String(64), nullable=False),
    sa.Column("previous_id", sa.String(64), nullable=True),
    sa.Column("key_id", sa.String(64), nullable=False),
    sa.Column("taken_at", UTCDateTime(), nullable=False),
    sa.Column("archives", sa.Integer(), nullable=False),
    sa.Column("statement", sa.JSON(), nullable=False),
    sa.Column("heads", sa.JSON(), nullable=False),
    sa.UniqueConstraint("id", name="uq_symfonic_checkpoints_id"),
)

# The per-thread heads of the latest checkpoint, grouped into buckets by a hash of the
# thread id: the next checkpoint recomputes only the buckets of the threads that changed.
# Tables alike in shape only, deliberately spelled out: each is the frozen shape its migration
# creates.
checkpoint_heads = sa.Table(
    CHECKPOINT_HEADS_TABLE,
    metadata,
    sa.Column("thread_id", sa.String(255), primary_key=True),
    sa.Column("bucket", sa.Integer(), nullable=False),
    sa.Column("version", sa.Integer(), nullable=False),
    sa.Column("position", sa.BigInteger(), nullable=False),
    sa.Column("last_hash", sa.String(64), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("base", sa.Integer(), nullable=False),
    sa.Column("leaf_hash", sa.String(64), nullable=False),
    sa.Index("ix_symfonic_checkpoint_heads_bucket", "bucket"),
)
checkpoint_buckets = sa.Table(
    CHECKPOINT_BUCKETS_TABLE,
    metadata,
    sa.Column("bucket", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("threads", sa.Integer(), nullable=False),
)

# --- append-only triggers (I1) ---------------------------------------------------
#
# The migrations hold their own frozen copies; these are what `verify` compares the
# catalog with (services/verify.py), and what the SQLite archive recreates in the
# transaction that removes archived events (db/guards.py).

SQLITE_APPEND_ONLY_TRIGGERS = (
    """
    CREATE TRIGGER symfonic_events_no_update BEFORE UPDATE ON symfonic_events
    BEGIN SELECT RAISE(ABORT, 'symfonic_events is append-only: UPDATE is not allowed'); END
    """,
    """
    CREATE TRIGGER symfonic_events_no_delete BEFORE DELETE ON symfonic_events
    BEGIN SELECT RAISE(ABORT, 'symfonic_events is append-only: DELETE is not allowed'); END
    """,
)
SQLITE_DROP_TRIGGERS = (
    "DROP TRIGGER IF EXISTS symfonic_events_no_update",
    "DROP TRIGGER IF EXISTS symfonic_events_no_delete",
)

POSTGRES_APPEND_ONLY_TRIGGERS = (
    """
    CREATE FUNCTION symfonic_events_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'symfonic_events is append-only: % is not allowed', TG_OP
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    """
    CREATE TRIGGER symfonic_events_no_update_delete
    BEFORE UPDATE OR DELETE ON symfonic_events
    FOR EACH ROW EXECUTE FUNCTION symfonic_events_append_only()
    """,
    """
    CREATE TRIGGER symfonic_events_no_truncate
    BEFORE TRUNCATE ON symfonic_events
    FOR EACH STATEMENT EXECUTE FUNCTION symfonic_events_append_only()
    """,
)
# --- the read key of gap-safe readers on PostgreSQL (I11, SPEC §11) -------------------
#
# Each event's tx_id is at least the id of the transaction that inserted it
# (pg_current_xact_id(), a 64-bit xid8 that never wraps), and at least the tx_id of the
# event before it on its thread, so ordering by (tx_id, position) keeps each thread in
# version order even when a transaction that got its id earlier commits on the thread
# after one that got a later id. Readers only return events whose tx_id is below every
# transaction still writing (symfonic_store.db.backends.pg_horizon.read_horizon): a late commit
# always lands above the reader's cursor, never behind it.
POSTGRES_TX_ID_TRIGGER_NAME = "symfonic_events_tx_id"
POSTGRES_TX_ID_TRIGGER = (
    """
    CREATE FUNCTION symfonic_events_tx_id() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        NEW.tx_id := GREATEST(
            pg_current_xact_id()::text::bigint,
            (SELECT e.tx_id FROM symfonic_events e
              WHERE e.thread_id = NEW.thread_id AND e.version = NEW.version - 1)
        );
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE TRIGGER symfonic_events_tx_id
    BEFORE INSERT ON symfonic_events
    FOR EACH ROW EXECUTE FUNCTION symfonic_events_tx_id()
    """,
)
POSTGRES_DROP_TX_ID_TRIGGER = (
    "DROP TRIGGER IF EXISTS symfonic_events_tx_id ON symfonic_events",
    "DROP FUNCTION IF EXISTS symfonic_events_tx_id()",
)

POSTGRES_DROP_TRIGGERS = (
    "DROP TRIGGER IF EXISTS symfonic_events_no_truncate ON symfonic_events",
    "DROP TRIGGER IF EXISTS symfonic_events_no_update_delete ON symfonic_events",
    "DROP FUNCTION IF EXISTS symfonic_events_append_only()",
)

POSTGRES_APPEND_ONLY_FUNCTION = """
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
"""The trigger function since ``0009_archive``: still refuses every UPDATE, DELETE and
TRUNCATE, except the archive's own removal (``symfonic_archive_remove``)."""

POSTGRES_APPEND_ONLY_TRIGGER_NAMES = (
    "symfonic_events_no_update_delete",
    "symfonic_events_no_truncate",
)
SQLITE_APPEND_ONLY_TRIGGER_NAMES = ("symfonic_events_no_update", "symfonic_events_no_delete")
ARCHIVE_REMOVE_FUNCTION = "symfonic_archive_remove"
