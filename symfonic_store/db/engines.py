"""Engines for both stores: SQLite's pragmas and BEGIN IMMEDIATE, option checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine

from ..errors import InvalidInputError
from .urls import _prepare_sqlite_path, async_url, scrub, sync_url

if TYPE_CHECKING:
    # Imported by create_asyncio_engine when called: it loads the ORM and asyncio.
    from sqlalchemy.ext.asyncio import AsyncEngine

SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SYNCHRONOUS_PRAGMA = {mode: "PRAGMA synchronous=" + mode for mode in SQLITE_SYNCHRONOUS}
MAX_BUSY_TIMEOUT = 2_000_000
"""Seconds; SQLite keeps its busy timeout in milliseconds in a 32-bit int."""




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
        # Straight on the driver's cursor: this runs once per transaction, and going
        # through exec_driver_sql costs as much as the BEGIN itself.
        sql = "BEGIN IMMEDIATE" if connection.get_execution_options().get("symfonic_write") else "BEGIN"
        dbapi_connection = connection.connection.dbapi_connection
        assert dbapi_connection is not None
        cursor = None
        try:
            # cursor() inside the try: on a connection that died it raises the driver's
            # error, which must reach translate_errors wrapped like any other.
            cursor = dbapi_connection.cursor()
            cursor.execute(sql)
        except connection.dialect.loaded_dbapi.Error as exc:
            raise sa.exc.DBAPIError.instance(
                sql, (), exc, connection.dialect.loaded_dbapi.Error, dialect=connection.dialect
            ) from exc
        finally:
            if cursor is not None:
                cursor.close()


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
        engine = _engine_for(sync_url(url_or_engine), sa.create_engine)
    if engine.dialect.name == "sqlite":
        _install_sqlite_behaviour(engine, synchronous=mode, busy_timeout_ms=timeout_ms)
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
        engine = _engine_for(async_url(url_or_engine), create_async_engine)
    if engine.dialect.name == "sqlite":
        _install_sqlite_behaviour(engine.sync_engine, synchronous=mode, busy_timeout_ms=timeout_ms)
    return engine
