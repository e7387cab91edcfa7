"""Engines for both stores: SQLite's pragmas and BEGIN IMMEDIATE, PostgreSQL's writers'
lock at BEGIN, option checks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine

from ..errors import InvalidInputError
from ..events import canonical_json
from .executor import (
    in_driver_transaction,
    leave_pipeline_for_sqlalchemy,
    postgres_begin,
)
from .urls import _prepare_sqlite_path, async_url, scrub, sync_url

if TYPE_CHECKING:
    # Imported by create_asyncio_engine when called: it loads the ORM and asyncio.
    from sqlalchemy.ext.asyncio import AsyncEngine

SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SYNCHRONOUS_PRAGMA = {mode: "PRAGMA synchronous=" + mode for mode in SQLITE_SYNCHRONOUS}
MAX_BUSY_TIMEOUT = 2_000_000
"""Seconds; SQLite keeps its busy timeout in milliseconds in a 32-bit int."""



def _driver_error(connection: Connection, sql: str, exc: Exception) -> sa.exc.DBAPIError:
    """A driver's error met in an event hook, as SQLAlchemy raises its own: wrapped, and,
    when it means the connection is gone, flagged so with the connection invalidated (the
    pool will not hand it out again, nor try to reset it)."""
    dialect = connection.dialect
    lost = dialect.is_disconnect(exc, connection.connection.dbapi_connection, None)  # type: ignore[arg-type]
    error = sa.exc.DBAPIError.instance(
        sql, (), exc, dialect.loaded_dbapi.Error, dialect=dialect, connection_invalidated=lost
    )
    if lost and not connection.invalidated:
        connection.invalidate(exc)
    assert isinstance(error, sa.exc.DBAPIError)
    return error


def _run_on_driver(connection: Connection, sql: str) -> None:
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
        raise _driver_error(connection, sql, exc) from exc
    finally:
        if cursor is not None:
            cursor.close()


def _install_postgres_behaviour(engine: Engine) -> None:
    """BEGIN sent by the store, so a write transaction takes the writers' lock with it.

    psycopg runs in autocommit mode and the BEGIN comes from SQLAlchemy's ``begin``
    event (as on SQLite), at the isolation level psycopg was given; a write transaction
    of the store's (``symfonic_write``) sends the writers' lock in SHARE mode with it, in
    one round trip, before the transaction has an id. COMMIT and
    ROLLBACK stay psycopg's, which send them whenever a transaction is open. Every
    transaction that inserts events must take the lock before it gets a transaction id:
    readers rely on it to know which transactions may still commit events below their
    cursor (I11). (The fast path, :class:`~symfonic_store.db.executor.PostgresCursorExecutor`,
    runs its own transactions and takes the lock the same way.)
    """
    if getattr(engine, "_symfonic_postgres", False):
        return

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
            # that transaction, after the pipeline has delivered what it holds. SQLAlchemy
            # calls this hook outside its own error handling: the driver's error (the
            # queued statements met a dead connection) is wrapped here.
            try:
                leave_pipeline_for_sqlalchemy(connection)
            except connection.dialect.loaded_dbapi.Error as exc:
                raise _driver_error(connection, "(pipeline)", exc) from exc
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
        # transaction may not insert events (Executor.check_writer), so neither holds
        # readers or checkpoints back.
        statements = postgres_begin(
            dbapi_connection,
            write=bool(options.get("symfonic_write")),
            appends=bool(options.get("symfonic_appends", True)),
        )
        _run_on_driver(connection, "; ".join(statements))

    engine._symfonic_postgres = True  # type: ignore[attr-defined]


def _install_sqlite_behaviour(
    engine: Engine, *, synchronous: str, busy_timeout_ms: int
) -> None:
    """WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for writers.

    pysqlite's own transaction handling is switched off so SQLAlchemy's BEGIN is the
    real one: a write transaction takes the write lock at BEGIN (IMMEDIATE), so two
    writers queue on the busy timeout instead of deadlocking on a lock upgrade.
    """
    if getattr(engine, "_symfonic_sqlite", False):
        return
    engine._symfonic_sqlite = True  # type: ignore[attr-defined]

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            # PRAGMA values cannot be bound parameters: the timeout is an int and the
            # mode one of SQLITE_SYNCHRONOUS, both checked by _check_sqlite_options.
            cursor.execute("PRAGMA busy_timeout=" + str(int(busy_timeout_ms)))
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(_SYNCHRONOUS_PRAGMA[synchronous])
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if in_driver_transaction(connection):
            return  # a statement through SQLAlchemy joins the fast path's transaction
        write = connection.get_execution_options().get("symfonic_write")
        _run_on_driver(connection, "BEGIN IMMEDIATE" if write else "BEGIN")


def _check_sqlite_options(synchronous: str, busy_timeout: float) -> tuple[str, int]:
    mode = synchronous.upper() if isinstance(synchronous, str) else ""
    if mode not in SQLITE_SYNCHRONOUS:
        raise InvalidInputError("sqlite_synchronous", f"must be one of {SQLITE_SYNCHRONOUS}")
    if (
        isinstance(busy_timeout, bool)
        or not isinstance(busy_timeout, int | float)
        or not 0 <= busy_timeout <= MAX_BUSY_TIMEOUT
    ):
        raise InvalidInputError(
            "busy_timeout", f"must be a number of seconds from 0 to {MAX_BUSY_TIMEOUT}"
        )
    return mode, int(busy_timeout * 1000)


E = TypeVar("E", "Engine", "AsyncEngine")

_OPTIONS: dict[str, Any] = {"json_serializer": canonical_json}
"""How the store makes its engines: JSON columns hold canonical JSON (sorted keys, no
spaces), the text an event's hash covers, whichever path wrote them."""


def _engine_for(url: URL, factory: Callable[[URL], E]) -> E:
    """Make the engine, turning SQLAlchemy's refusal of the URL into a store error."""
    if url.get_backend_name() == "sqlite":
        _prepare_sqlite_path(url)
    try:
        return factory(url)
    except sa.exc.ArgumentError as exc:
        first = scrub(str(exc).strip().splitlines()[0]) if str(exc).strip() else "refused"
        raise InvalidInputError(
            "database URL",
            f"{first}; use sqlite:///relative/path.db, sqlite:////absolute/path.db or "
            "postgresql+psycopg://user@host:5432/dbname",
        ) from None


def create_sync_engine(
    url_or_engine: str | URL | Engine,
    *,
    sqlite_synchronous: str = "FULL",
    busy_timeout: float = 5.0,
) -> Engine:
    """An engine for :class:`~symfonic_store.InterruptStore` (or the one given, prepared)."""
    mode, timeout_ms = _check_sqlite_options(sqlite_synchronous, busy_timeout)
    if isinstance(url_or_engine, Engine):
        engine = url_or_engine
    else:
        engine = _engine_for(sync_url(url_or_engine), partial(sa.create_engine, **_OPTIONS))
    if engine.dialect.name == "sqlite":
        _install_sqlite_behaviour(engine, synchronous=mode, busy_timeout_ms=timeout_ms)
    elif engine.dialect.name == "postgresql":
        _install_postgres_behaviour(engine)
    return engine


def create_asyncio_engine(
    url_or_engine: str | URL | AsyncEngine,
    *,
    sqlite_synchronous: str = "FULL",
    busy_timeout: float = 5.0,
) -> AsyncEngine:
    """An engine for :class:`~symfonic_store.AsyncInterruptStore`."""
    from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

    mode, timeout_ms = _check_sqlite_options(sqlite_synchronous, busy_timeout)
    if isinstance(url_or_engine, AsyncEngine):
        engine = url_or_engine
    else:
        engine = _engine_for(async_url(url_or_engine), partial(create_async_engine, **_OPTIONS))
    if engine.dialect.name == "sqlite":
        _install_sqlite_behaviour(engine.sync_engine, synchronous=mode, busy_timeout_ms=timeout_ms)
    elif engine.dialect.name == "postgresql":
        _install_postgres_behaviour(engine.sync_engine)
    return engine
