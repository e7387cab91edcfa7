"""What a backend is: every decision the store makes differently per database, behind
one object chosen once per engine (:func:`symfonic_store.db.backends.backend_of`).

A backend owns the engine hooks (what a new connection is told, what BEGIN is sent), the
BEGIN statements and the locks, the choice of executor, gap-safe reading of the whole
log (the writers' horizon), the append-only guards as the catalog shows them, the
driver's error codes, and the layout of LangGraph's checkpoint tables. The statement
modules (:mod:`symfonic_store.db.statements`) are backend-blind: where the backends
differ they ask the backend of their connection.

This base class is the contract, with the answers of a database that needs nothing
special (one writer at a time, positions committed in order, no locks beyond its own
write lock); :mod:`.sqlite` and :mod:`.postgres` fill it in. Adding a backend is one
module next to them, registered in :data:`symfonic_store.db.backends.BACKENDS`, and one
subclass of the contract tests (``tests/core/test_backends.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Dialect, Engine

from ...compat import dbapi_error, has_cursor_listeners, invalidate_lost
from ...errors import DatabaseError
from ..executors.base import CoreExecutor, Executor, state_of

if TYPE_CHECKING:
    from ..checkpoint_tables import Layout


FAST_PATH_OPTION = "symfonic_fast_path"
"""Engine execution option: ``False`` runs every statement through SQLAlchemy Core."""

RACE_CONSTRAINTS = frozenset(
    {
        "uq_symfonic_events_thread_version",  # two writers took the same version (I2)
        "uq_symfonic_events_one_mint",  # two mints of one interrupt (I4)
        "uq_symfonic_events_one_ending",  # two endings of one interrupt (I3)
        "uq_symfonic_events_one_reminder",  # two sweeps reminded of one interrupt (SPEC §14)
        "uq_symfonic_events_one_escalation",  # two sweeps escalated one interrupt (SPEC §14)
        "uq_symfonic_events_one_vote",  # one principal's racing votes (SPEC §15)
        "symfonic_threads_pkey",  # two writers created the same thread's projection row
    }
)
"""Unique keys whose violation means a concurrent writer won: retry and decide again."""

GUARD_RESTORE = "`symfonic-store db guards --restore` recreates it"
"""What every guard problem advises: never a downgrade, which would drop the events."""
GUARD_CHECK = "check the signed checkpoints for what changed meanwhile"


def sql_words(sql: str) -> str:
    """SQL text compared word by word: the catalog may keep other whitespace."""
    return " ".join(sql.split()).rstrip(";").strip()


def trigger_missing(name: str, table: str) -> str:
    """The guard problem of an append-only trigger that is not there."""
    return (
        f"the append-only trigger {name} is missing from {table}: events can be "
        f"changed or deleted with plain SQL ({GUARD_RESTORE}; {GUARD_CHECK})"
    )


def _listened(conn: Connection) -> bool:
    return has_cursor_listeners(conn.engine)


# --- what the engine hooks share -------------------------------------------------------


def driver_error(connection: Connection, sql: str, exc: Exception) -> sa.exc.DBAPIError:
    """A driver's error met in an event hook, as SQLAlchemy raises its own: wrapped, and,
    when it means the connection is gone, flagged so with the connection invalidated (the
    pool will not hand it out again, nor try to reset it, nor any other it opened to the
    lost server)."""
    dialect = connection.dialect
    lost = dialect.is_disconnect(exc, connection.connection.dbapi_connection, None)  # type: ignore[arg-type]
    error = dbapi_error(
        sql, (), exc, dialect.loaded_dbapi.Error, dialect=dialect, connection_invalidated=lost
    )
    if lost:
        invalidate_lost(connection, exc)
    assert isinstance(error, sa.exc.DBAPIError)
    return error


def run_on_driver(connection: Connection, sql: str) -> None:
    """Run ``sql`` straight on the driver's cursor, its errors wrapped like SQLAlchemy's.

    Used for BEGIN, once per transaction: going through exec_driver_sql costs as much as
    the BEGIN itself.
    """
    dbapi_connection = connection.connection.dbapi_connection
    assert dbapi_connection is not None
    cursor = None
    try:
        # cursor() inside the try: on a connection that died it raises the driver's
        # error, which must reach translate_errors wrapped like any other.
        cursor = dbapi_connection.cursor()
        cursor.execute(sql)
    except connection.dialect.loaded_dbapi.Error as exc:
        raise driver_error(connection, sql, exc) from exc
    finally:
        if cursor is not None:
            cursor.close()


class WritersBusyError(Exception):
    """The writers' lock could not be taken EXCLUSIVE within the wait (the caller says
    what it means for its operation)."""


@dataclass(frozen=True, slots=True)
class Horizon:
    """What a gap-safe read may return: events with ``tx_id`` below ``below``."""

    below: int
    """Every transaction that may still insert events has an id >= this."""
    cursor: tuple[int, int]
    """``(tx_id, position)`` of the consumer's cursor event; (-1, 0) before everything."""
    writers: int
    """This schema's write transactions in flight (that have written) when it was read."""
    oldest_writer_seconds: float | None
    """How long the oldest of them has been open (None: none, or not visible to this role)."""


@dataclass(frozen=True, slots=True)
class DriverCode:
    """What a driver says about an error, by code only (never its message text)."""

    code: str | None = None
    """The backend's code as text: PostgreSQL's SQLSTATE, SQLite's extended code name."""
    number: int | None = None
    """A numeric code, where the driver gives one (SQLite's extended result code)."""
    constraint: str | None = None
    """The constraint the error names, where the driver says (PostgreSQL)."""


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """The options a store's engine is prepared with (checked by ``db.engines``)."""

    sqlite_synchronous: str = "FULL"
    busy_timeout_ms: int = 5000


class Backend:
    """One database's behaviour, for one engine (one SQLAlchemy dialect instance)."""

    name: ClassVar[str] = "generic"
    """The SQLAlchemy dialect name this backend serves (its key in the registry)."""
    sync_driver: ClassVar[str] = ""
    """The URL drivername of the synchronous store's engine (``sqlite+pysqlite``)."""
    async_driver: ClassVar[str] = ""
    """The URL drivername of the asyncio store's engine (``sqlite+aiosqlite``)."""

    in_process: ClassVar[bool] = False
    """Does the database run inside this process (SQLite)? Its reads then wait on the
    CPU only, never on round trips to a server (the service sizes its threads by it)."""
    password_in_query: ClassVar[bool] = False
    """Does the driver also take the password from the URL's query (libpq's
    ``?password=``)? The URL parser then moves it to where every repr masks it."""

    @classmethod
    def prepare_url(cls, url: URL) -> None:
        """Whatever the URL needs before an engine is made from it (nothing here)."""

    @classmethod
    def database_file(cls, url: URL) -> Path | None:
        """The file ``url``'s database lives in, as written (not user-expanded); None for
        a server's database, one in memory, or one whose name the driver resolves itself."""
        return None

    # --- transactions and locks -----------------------------------------------------

    reads_below_horizon: ClassVar[bool] = False
    """Must readers of the whole log stay below the writers' horizon (I11)? True where
    positions can commit out of order (PostgreSQL's writers run in parallel); with one
    writer at a time positions commit in order and position order is safe."""
    single_writer: ClassVar[bool] = True
    """Does the database let one write transaction in at a time (SQLite)? The
    checkpointer then queues its writes instead of letting them wait in the database."""
    appends_in_one_call: ClassVar[bool] = False
    """Has the schema a function that appends to one thread in one call, the writers'
    lock, the "already minted?" check and the compare-and-swap of the thread's head
    inside (PostgreSQL's ``symfonic_append``)? Else the single-append path is one short
    write transaction that swaps the head with its UPDATE (SQLite)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.prepared = False
        """Has :meth:`prepare` installed the hooks on this backend's engine?"""
        self.core: Executor = self._core_executor()
        self._fast: Executor | None = None

    def prepare(self, engine: Engine, options: EngineOptions) -> None:
        """Install the backend's engine hooks (called once per engine: see
        :func:`symfonic_store.db.backends.prepare_engine`)."""

    def begin_statements(self, dbapi_connection: Any, *, write: bool, appends: bool) -> tuple[str, ...]:
        """The statements that start a transaction of the store, sent in one round trip
        (or queued in a pipeline): a write one takes the backend's write lock with it.

        ``appends=False`` promises the write inserts no events (a checkpoint, an archive
        removal): a backend whose readers rely on the writers' lock leaves it out.
        """
        return ("BEGIN",)

    def check_writer(self, conn: Connection) -> None:
        """Refuse to insert events in a transaction the backend cannot keep gap-safe."""

    def lock_setup(self, conn: Connection) -> None:
        """Keep two concurrent ``setup()`` calls from both creating the tables."""

    def lock_evidence(self, conn: Connection) -> None:
        """Serialise checkpoints and archive removals until commit, where the backend needs
        it (SQLite's write transaction already holds the database lock)."""

    def lock_thread_steps(self, conn: Connection, thread_id: str) -> None:
        """Until commit, no other step transaction of ``thread_id`` (the store's
        checkpointer) takes its deferred records. Nothing to do where a write transaction
        already shuts every other writer out (SQLite's BEGIN IMMEDIATE)."""

    def writers_shut_out(self, conn: Connection) -> AbstractContextManager[None]:
        """While inside, no write transaction is in flight and none can start, so the
        log's last position read inside is final: no event can commit later below it.

        With one writer at a time, the caller's write transaction is that writer already.
        """
        return nullcontext()

    # --- executors ----------------------------------------------------------------

    def _core_executor(self) -> Executor:
        return CoreExecutor(self)

    def _fast_executor(self) -> Executor | None:
        """The backend's fast path (Core statements compiled once, run on the driver's
        cursor), or None where its driver has none."""
        return None

    def choose_executor(self, conn: Connection) -> Executor:
        """The executor for ``conn`` now: the fast path only while nobody listens to its
        statements (no ``before/after_cursor_execute`` listener, no
        ``symfonic_fast_path=False`` option), so nothing is hidden from instrumentation."""
        fast = conn.engine.get_execution_options().get(FAST_PATH_OPTION, True) and not _listened(conn)
        return self.executor(conn, fast=bool(fast))

    def executor_for(self, conn: Connection) -> Executor:
        """The executor of ``conn``, chosen once per ``Connection`` and kept on it."""
        state = state_of(conn)
        executor = state.executor
        if executor is None:
            executor = state.executor = self.choose_executor(conn)
        return executor

    def executor(self, conn: Connection, *, fast: bool) -> Executor:
        """The executor for ``conn``: the fast path when ``fast`` (nobody listens to
        statements) and the driver has one, else SQLAlchemy Core."""
        if fast:
            if self._fast is None:
                self._fast = self._fast_executor()
            if self._fast is not None:
                return self._fast
        return self.core

    # --- gap-safe reads of the whole log (I11) ------------------------------------

    def read_horizon(self, conn: Connection, *, after: int = 0) -> Horizon:
        """The writers' horizon now, and where the cursor ``after`` sits. With positions
        committed in order nothing is held back: every committed event is below it."""
        return Horizon(below=2**63 - 1, cursor=(-1, after), writers=0, oldest_writer_seconds=None)

    def events_below_horizon(
        self, conn: Connection, horizon: Horizon, limit: int | None
    ) -> Sequence[Sequence[Any]]:
        """Event rows after the horizon's cursor and below it, in read order (only
        called where :attr:`reads_below_horizon`: the others read in position order)."""
        raise NotImplementedError

    def events_behind_horizon(self, conn: Connection, horizon: Horizon) -> int:
        """Committed events a gap-safe reader cannot return yet (none: see above)."""
        return 0

    # --- the append-only guards (I1, SPEC §10) --------------------------------------

    def guard_problems(self, conn: Connection) -> list[str]:
        """What is wrong with the append-only triggers of the event table (empty: none)."""
        raise NotImplementedError(f"no guard checks for {self.name}")

    def restore_guards(self, conn: Connection) -> None:
        """Recreate the event table's guards exactly as the migrations define them."""
        raise NotImplementedError(f"no guard restore for {self.name}")

    def remove_archived(self, conn: Connection, heads: Sequence[dict[str, Any]]) -> int:
        """Delete the events of whole archived threads, up to each head (see
        :func:`symfonic_store.db.guards.remove_archived`)."""
        raise NotImplementedError(f"no archive removal for {self.name}")

    def pause_open_count_deltas(self, conn: Connection) -> None:
        """Until the caller's transaction ends, write no open-count deltas (a projection
        rebuild, which recounts instead). Only PostgreSQL needs it: the deltas its rebuild
        would write and delete stay dead in the heap, to be read past until a vacuum."""

    # --- the driver's error codes ---------------------------------------------------

    driver_modules: ClassVar[tuple[str, ...]] = ()
    """The modules of the backend's drivers, whose DB-API ``Error`` may reach the store
    unwrapped (raised on a cursor of the driver's own, or by an engine hook)."""

    @classmethod
    def connect_failure(cls, exc: BaseException) -> DatabaseError | None:
        """Why a connection of this backend's driver could not be opened, told by code,
        or None (``exc`` is something else, or nothing says which)."""
        return None

    @classmethod
    def driver_code(cls, orig: BaseException) -> DriverCode | None:
        """The codes of a driver exception of this backend's, else None."""
        return None

    # The error-code hooks, alike in shape only: each default is what a backend without the notion
    # answers.
    @classmethod
    def is_race(cls, code: DriverCode) -> bool:
        """A lost race (a concurrency guard's unique key, a serialization failure)."""
        return False

    @classmethod
    def is_integrity(cls, exc: BaseException, code: DriverCode) -> bool:
        """The database refusing the write (constraint, trigger); by the exception's
        class where the driver gives no code."""
        return isinstance(exc, sa.exc.IntegrityError)

    @classmethod
    def is_missing_schema(cls, code: DriverCode) -> bool:
        """A statement met a table that does not exist, and the code says so."""
        return False

    @classmethod
    def is_busy(cls, code: DriverCode) -> bool:
        """The database stayed locked by another writer past the busy timeout."""
        return False

    # Alike the hooks above in shape only (see is_race).
    @classmethod
    def is_schema_suspect(cls, code: DriverCode) -> bool:
        """A failure an older or missing schema would explain (the runner then asks)."""
        return False

    @classmethod
    def is_connection_lost(cls, exc: BaseException, code: DriverCode) -> bool:
        """The connection failed or is gone (by code where the backend has one)."""
        return isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError)

    @classmethod
    def refusal(cls, code: DriverCode) -> tuple[str, str]:
        """``(what refused the write, the code's label)`` for an integrity error."""
        return "an integrity rule of the database", code.code or "integrity error"

    # --- LangGraph's checkpoint tables ----------------------------------------------

    @property
    def checkpoint_layout(self) -> Layout:
        """The tables of the LangGraph saver shipped for this backend."""
        raise NotImplementedError(f"no LangGraph checkpoint saver for {self.name}")

    checkpoint_saver: ClassVar[str] = ""
    """Which of LangGraph's savers keeps the checkpoints: ``"sqlite"`` or ``"postgres"``."""
    async_checkpoint_saver: ClassVar[bool] = False
    """Does LangGraph ship an async saver the asyncio store awaits (PostgreSQL)? Else the
    asyncio store drives the sync one through ``run_sync``."""
    checkpoint_setup_autocommit: ClassVar[bool] = False
    """Does the saver's ``setup()`` run outside a transaction (PostgreSQL creates its
    indexes CONCURRENTLY), under :meth:`checkpoint_setup_lock`?"""
    checkpoint_reads_autocommit: ClassVar[bool] = False
    """Are the checkpointer's reads single statements outside a transaction, as the
    saver reads (PostgreSQL: no BEGIN and COMMIT round trips)?"""
    checkpoint_saver_prunes: ClassVar[bool] = False
    """Does the saver implement ``prune`` (PostgreSQL) or does the store (SQLite)?"""

    def checkpoint_setup_lock(self) -> sa.Select[Any] | None:
        """A statement that tries to take the checkpoint tables' setup lock and selects
        whether it did (None: the backend needs none)."""
        return None

    def checkpoint_setup_unlock(self) -> sa.Select[Any] | None:
        return None
