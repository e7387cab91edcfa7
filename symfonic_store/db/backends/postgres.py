"""PostgreSQL (psycopg 3): BEGIN sent by the store with the writers' lock, advisory locks,
gap-safe reads below the writers' horizon, its triggers as ``pg_trigger`` shows them,
errors by SQLSTATE, and ``PostgresSaver``'s checkpoint tables.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from ...errors import DatabaseError
from ..checkpoint_tables import POSTGRES, Layout
from ..executors.base import Executor, in_driver_transaction, state_of
from ..executors.postgres import (
    PostgresCursorExecutor,
    PostgresExecutor,
    leave_pipeline_for_sqlalchemy,
)
from . import pg_connect, pg_guards, pg_horizon
from .base import (
    RACE_CONSTRAINTS,
    Backend,
    DriverCode,
    EngineOptions,
    Horizon,
    WritersBusyError,
    driver_error,
    run_on_driver,
)
from .pg_horizon import WRITERS_LOCK, WRITERS_LOCK_KEY

SETUP_LOCK_KEY = 0x53594D47  # "SYMG": two processes running setup() at once
EVIDENCE_LOCK_KEY = 0x53594D45  # "SYME": checkpoints and archive removals, per schema
STEPS_LOCK_KEY = 0x53594D54  # "SYMT": one thread's checkpointer steps, in turn
CHECKPOINT_SETUP_LOCK_KEY = 0x53594D43  # "SYMC": two processes creating the checkpoint tables

EVIDENCE_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
"""The BEGIN of a transaction begun with ``appends=False`` (a checkpoint, an archive
removal): each statement its own snapshot, so what it reads after waiting for the
writers includes what they committed meanwhile (see :meth:`PostgresBackend.writers_shut_out`)."""

WRITERS_WAIT_TIMEOUT = "10s"
"""How long a checkpoint or an archive removal waits for the write transactions in
flight (each of the store's own lasts milliseconds). Meanwhile new appends queue behind
it, so the wait is bounded: past it the checkpoint is refused, and appends go on."""

_LOCK_SETUP = sa.select(sa.func.pg_advisory_xact_lock(SETUP_LOCK_KEY))
_LOCK_EVIDENCE = sa.select(
    sa.func.pg_advisory_xact_lock(
        sa.literal(EVIDENCE_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.func.current_schema())
    )
)
_LOCK_THREAD_STEPS = sa.select(
    sa.func.pg_advisory_xact_lock(
        sa.literal(STEPS_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.bindparam("t"))
    )
)
_SET_LOCK_TIMEOUT = sa.select(sa.func.set_config("lock_timeout", sa.bindparam("value"), True))
_UNLOCK_WRITERS = f"SELECT pg_advisory_unlock({WRITERS_LOCK_KEY}, hashtext(current_schema()))"


def checkpoint_setup_lock() -> sa.Select[Any]:
    """Try to take the setup lock of this schema's checkpoint tables (session lock);
    selects whether it was taken.

    ``PostgresSaver.setup()`` creates its indexes ``CONCURRENTLY``, outside a
    transaction, so a transaction-scoped lock cannot cover it. The caller polls instead of
    waiting inside one statement: ``CREATE INDEX CONCURRENTLY`` waits for every statement
    in flight in the database, a blocked ``pg_advisory_lock`` included, so a second
    ``setup()`` waiting on the lock would deadlock with the first. The lock is per schema:
    stores in other schemas of the database never wait for each other.
    """
    return sa.select(
        sa.func.pg_try_advisory_lock(
            sa.literal(CHECKPOINT_SETUP_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.func.current_schema())
        )
    )


def checkpoint_setup_unlock() -> sa.Select[Any]:
    return sa.select(
        sa.func.pg_advisory_unlock(
            sa.literal(CHECKPOINT_SETUP_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.func.current_schema())
        )
    )


# --- error codes: SQLSTATEs (Appendix A of PostgreSQL's manual) -----------------------

PG_UNIQUE_VIOLATION = "23505"
PG_INTEGRITY_CLASS = "23"
PG_UNDEFINED_TABLE = "42P01"
PG_SCHEMA_SUSPECT = frozenset({"42703", "42883"})  # undefined_column, undefined_function
PG_RETRYABLE = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
PG_CONNECTION_CLASSES = ("08", "57P")  # connection_exception; admin/crash shutdown
PG_NAMES = {
    "23000": "integrity_constraint_violation",
    "23001": "restrict_violation",
    "23502": "not_null_violation",
    "23503": "foreign_key_violation",
    "23505": "unique_violation",
    "23514": "check_violation",
    "23P01": "exclusion_violation",
}
PG_REFUSALS = {
    "23001": "a trigger refused it (the event table is append-only)",
    "23502": "a required column got no value (NOT NULL)",
    "23503": "a foreign key has no matching row",
    "23514": "a CHECK constraint failed",
    "23505": "a unique index that is not one of the store's concurrency guards",
}


class PostgresBackend(Backend):
    """PostgreSQL: writers in parallel, readers below the writers' horizon (I11)."""

    name = "postgresql"
    driver_modules = ("psycopg", "pg8000")
    sync_driver = async_driver = "postgresql+psycopg"  # psycopg 3 serves both
    reads_below_horizon = True
    single_writer = False
    appends_in_one_call = True
    password_in_query = True

    checkpoint_saver = "postgres"
    async_checkpoint_saver = True
    checkpoint_setup_autocommit = True
    checkpoint_reads_autocommit = True
    checkpoint_saver_prunes = True

    # --- the engine hooks -------------------------------------------------------------

    def prepare(self, engine: Engine, options: EngineOptions) -> None:
        """BEGIN sent by the store, so a write transaction takes the writers' lock with it.

        psycopg runs in autocommit mode and the BEGIN comes from SQLAlchemy's ``begin``
        event (as on SQLite), at the isolation level psycopg was given; a write
        transaction of the store's (``symfonic_write``) sends the writers' lock in SHARE
        mode with it, in one round trip, before the transaction has an id. COMMIT and
        ROLLBACK stay psycopg's, which send them whenever a transaction is open. Every
        transaction that inserts events must take the lock before it gets a transaction
        id: readers rely on it to know which transactions may still commit events below
        their cursor (I11). (The fast path, :class:`PostgresCursorExecutor`, runs its own
        transactions and takes the lock the same way.)
        """

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            if not dbapi_connection.autocommit and dbapi_connection.info.transaction_status:
                # A connect listener of the caller's ran first (a SET ROLE, a SET of a
                # setting) and psycopg opened a transaction for it: keep what it set.
                dbapi_connection.commit()
            dbapi_connection.autocommit = True

        @event.listens_for(engine, "checkout")
        def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
            # A connection used with isolation_level="AUTOCOMMIT" comes back from
            # SQLAlchemy's reset with psycopg's autocommit off; the fast path's statements
            # outside a transaction would then open one. Idle here, so it may switch.
            if not dbapi_connection.autocommit:
                dbapi_connection.autocommit = True

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            if in_driver_transaction(connection):
                # A statement through SQLAlchemy inside a fast-path transaction: it joins
                # that transaction, after the pipeline has delivered what it holds.
                # SQLAlchemy calls this hook outside its own error handling: the driver's
                # error (the queued statements met a dead connection) is wrapped here.
                try:
                    leave_pipeline_for_sqlalchemy(connection)
                except connection.dialect.loaded_dbapi.Error as exc:
                    raise driver_error(connection, "(pipeline)", exc) from exc
                return
            options = connection.get_execution_options()
            if options.get("isolation_level") == "AUTOCOMMIT" and "symfonic_write" not in options:
                # Asked for by the caller (PostgresSaver's CREATE INDEX CONCURRENTLY, reads
                # outside a transaction): SQLAlchemy's "transaction" is then no transaction.
                # The store's own transactions (Executor.begin) still get their BEGIN: a
                # write's events and projection commit together, a read's server-side
                # cursor has its transaction (psycopg sends the COMMIT of an open one).
                return
            dbapi_connection = connection.connection.dbapi_connection
            assert dbapi_connection is not None
            if not dbapi_connection.autocommit:
                # A connection pooled before the store prepared this engine (one given by
                # the caller): idle between transactions, so it may switch now.
                dbapi_connection.autocommit = True
            # A write of the store's (Executor.begin) joins the writers, unless it appends
            # nothing (a checkpoint, an archive removal); a read or a caller's own
            # transaction may not insert events (check_writer), so neither holds readers
            # or checkpoints back.
            statements = self.begin_statements(
                dbapi_connection,
                write=bool(options.get("symfonic_write")),
                appends=bool(options.get("symfonic_appends", True)),
            )
            run_on_driver(connection, "; ".join(statements))

    def begin_statements(self, dbapi_connection: Any, *, write: bool, appends: bool) -> tuple[str, ...]:
        """- a write that may append: BEGIN, then the writers' lock in SHARE mode, before
          the transaction has an id (I11);
        - a write with ``appends=False`` (a checkpoint, an archive removal): not among
          the writers, and :data:`EVIDENCE_BEGIN` whatever the caller's level;
        - anything else: BEGIN, at the isolation level psycopg was told (by the caller's
          engine or its ``execution_options``): the store sends BEGIN itself, so psycopg
          would not.
        """
        if write and not appends:
            return (EVIDENCE_BEGIN,)
        # The asyncio engine's is SQLAlchemy's adapter around psycopg's AsyncConnection.
        level = getattr(dbapi_connection, "driver_connection", dbapi_connection).isolation_level
        begin = "BEGIN" if level is None else "BEGIN ISOLATION LEVEL " + str(level.name).replace("_", " ")
        return (begin, WRITERS_LOCK) if write else (begin,)

    # --- executors ----------------------------------------------------------------

    def _core_executor(self) -> Executor:
        return PostgresExecutor(self)

    def _fast_executor(self) -> Executor | None:
        # psycopg's synchronous connection only (the asyncio one runs through Core).
        if self.dialect.driver == "psycopg" and not self.dialect.is_async:
            return PostgresCursorExecutor(self)
        return None

    # --- locks ----------------------------------------------------------------------

    def check_writer(self, conn: Connection) -> None:
        # Readers trust that every transaction inserting events took the writers' lock at
        # its BEGIN, before it had a transaction id: the fast path's BEGIN, or the one the
        # store's engines send for its write transactions (symfonic_write).
        # A transaction begun with appends=False did not take it, and must not insert.
        tx = state_of(conn).tx
        if tx is not None:
            ok = tx == "write"
        else:
            options = conn.get_execution_options()
            ok = bool(
                self.prepared
                and conn.in_transaction()
                and options.get("symfonic_write")
                and options.get("symfonic_appends", True)
            )
        if ok and tx is None:
            # The server's word, not SQLAlchemy's: a BEGIN was sent (not an AUTOCOMMIT no-op).
            dbapi = conn.connection.dbapi_connection
            ok = dbapi is not None and dbapi.info.transaction_status != 0  # not IDLE
        if not ok:
            raise AssertionError(
                "events must be appended in a write transaction of an engine prepared by "
                "symfonic_store.db.engines (run_write on a store's engine, appends=True)"
            )

    def lock_setup(self, conn: Connection) -> None:
        conn.execute(_LOCK_SETUP)

    def lock_evidence(self, conn: Connection) -> None:
        conn.execute(_LOCK_EVIDENCE)

    def lock_thread_steps(self, conn: Connection, thread_id: str) -> None:
        # A lock on the thread id, not its projection row: a new thread has no row yet.
        # Through the executor: on the fast path the transaction keeps its pipeline.
        self.executor_for(conn).fetch(conn, _LOCK_THREAD_STEPS, {"t": thread_id})

    def writers_shut_out(self, conn: Connection) -> AbstractContextManager[None]:
        """The writers' lock taken EXCLUSIVE at session level (it waits for every write
        transaction in flight, at most :data:`WRITERS_WAIT_TIMEOUT`, then raises
        :class:`~symfonic_store.db.backends.base.WritersBusyError`; new appends queue
        meanwhile), let go on the way out; only from a transaction begun with
        ``appends=False``, which holds no share of it."""
        return _writers_shut_out(conn)

    # --- gap-safe reads -----------------------------------------------------------

    def read_horizon(self, conn: Connection, *, after: int = 0) -> Horizon:
        return pg_horizon.read_horizon(self.executor_for(conn), conn, after=after)

    def events_below_horizon(
        self, conn: Connection, horizon: Horizon, limit: int | None
    ) -> Sequence[Sequence[Any]]:
        return pg_horizon.events_below_horizon(self.executor_for(conn), conn, horizon, limit)

    def events_behind_horizon(self, conn: Connection, horizon: Horizon) -> int:
        return pg_horizon.events_behind_horizon(self.executor_for(conn), conn, horizon)

    # --- guards -------------------------------------------------------------------

    def guard_problems(self, conn: Connection) -> list[str]:
        return pg_guards.guard_problems(conn)

    def restore_guards(self, conn: Connection) -> None:
        pg_guards.restore_guards(conn)

    def remove_archived(self, conn: Connection, heads: Sequence[dict[str, Any]]) -> int:
        return pg_guards.remove_archived(conn, heads)

    def pause_open_count_deltas(self, conn: Connection) -> None:
        # The triggers of migration 0026 read it (transaction-local: is_local true).
        conn.execute(sa.select(sa.func.set_config("symfonic.recounting", "on", sa.true())))

    # --- error codes --------------------------------------------------------------

    # Alike sqlite.py's driver_code in shape only: each reads its own driver's error attributes.
    @classmethod
    def driver_code(cls, orig: BaseException) -> DriverCode | None:
        sqlstate = getattr(orig, "sqlstate", None)
        if not isinstance(sqlstate, str):
            return None
        diag = getattr(orig, "diag", None)
        constraint = getattr(diag, "constraint_name", None) if diag is not None else None
        return DriverCode(code=sqlstate, constraint=constraint if isinstance(constraint, str) else None)

    @classmethod
    def connect_failure(cls, exc: BaseException) -> DatabaseError | None:
        return pg_connect.connect_failure(exc)

    @classmethod
    def is_race(cls, code: DriverCode) -> bool:
        if code.code in PG_RETRYABLE:
            return True
        return code.code == PG_UNIQUE_VIOLATION and code.constraint in RACE_CONSTRAINTS

    @classmethod
    def is_integrity(cls, exc: BaseException, code: DriverCode) -> bool:
        return (code.code or "").startswith(PG_INTEGRITY_CLASS)

    @classmethod
    def is_missing_schema(cls, code: DriverCode) -> bool:
        return code.code == PG_UNDEFINED_TABLE

    @classmethod
    def is_schema_suspect(cls, code: DriverCode) -> bool:
        return code.code in PG_SCHEMA_SUSPECT

    @classmethod
    def is_connection_lost(cls, exc: BaseException, code: DriverCode) -> bool:
        return (code.code or "").startswith(PG_CONNECTION_CLASSES)

    @classmethod
    def refusal(cls, code: DriverCode) -> tuple[str, str]:
        what, label = super().refusal(code)
        return PG_REFUSALS.get(code.code or "", what), PG_NAMES.get(code.code or "", label)

    # --- LangGraph's checkpoint tables ----------------------------------------------

    @property
    def checkpoint_layout(self) -> Layout:
        return POSTGRES

    def checkpoint_setup_lock(self) -> sa.Select[Any] | None:
        return checkpoint_setup_lock()

    def checkpoint_setup_unlock(self) -> sa.Select[Any] | None:
        return checkpoint_setup_unlock()


@contextmanager
def _writers_shut_out(conn: Connection) -> Iterator[None]:
    if conn.get_execution_options().get("symfonic_appends", True) and state_of(conn).tx != "write, no events":
        raise AssertionError("writers_shut_out needs a transaction begun with appends=False")
    isolation = conn.exec_driver_sql("SELECT current_setting('transaction_isolation')").scalar_one()
    if isolation != "read committed":  # one snapshot for the whole transaction
        raise AssertionError("writers_shut_out needs a READ COMMITTED transaction")
    previous = conn.exec_driver_sql("SELECT current_setting('lock_timeout')").scalar_one()
    try:
        conn.exec_driver_sql(
            f"SELECT set_config('lock_timeout', '{WRITERS_WAIT_TIMEOUT}', true), "
            f"pg_advisory_lock({WRITERS_LOCK_KEY}, hashtext(current_schema()))"
        )
    except sa.exc.DBAPIError as exc:
        # lock_not_available: our lock_timeout; query_canceled: a shorter statement_timeout.
        if getattr(exc.orig, "sqlstate", None) in ("55P03", "57014"):
            raise WritersBusyError(
                f"a write transaction of this store stayed open longer than the wait for "
                f"the writers ({WRITERS_WAIT_TIMEOUT}, or the session's shorter "
                "statement_timeout; see pg_stat_activity): nothing was signed; try again"
            ) from None
        raise
    failed: BaseException | None = None
    try:
        conn.execute(_SET_LOCK_TIMEOUT, {"value": previous})
        yield  # a later statement: a newer snapshot, taken with every writer shut out
    except BaseException as exc:
        failed = exc
        raise
    finally:
        try:
            conn.exec_driver_sql(_UNLOCK_WRITERS)
        except BaseException:
            # A session lock outlives the transaction: never hand the connection back
            # to the pool holding it (closing it ends the session, and the lock). The
            # error worth reporting is the first one (an aborted transaction fails the
            # unlock too).
            if not conn.invalidated:
                conn.invalidate()
            if failed is None:
                raise
