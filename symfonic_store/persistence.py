"""Connecting to the database: URLs, engines, SQLite pragmas, migrations, driver errors.

Everything backend-specific about *connections* lives here; the SQL the store runs
lives in :mod:`symfonic_store.statements`. Driver exceptions are translated into the
store's error tree in exactly one place, :func:`translate_errors`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .errors import (
    ConcurrencyConflictError,
    DatabaseError,
    InvalidInputError,
    SchemaNotMigratedError,
    SymfonicStoreError,
)
from .schema import VERSION_TABLE

DEFAULT_URL = "sqlite:///symfonic_store.db"
UPGRADE_HINT = "run `symfonic-store db upgrade` (or call store.setup())"

SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SYNCHRONOUS_PRAGMA = {mode: "PRAGMA synchronous=" + mode for mode in SQLITE_SYNCHRONOUS}
MAX_BUSY_TIMEOUT = 2_000_000
"""Seconds; SQLite keeps its busy timeout in milliseconds in a 32-bit int."""


# --- URLs --------------------------------------------------------------------------


def parse_url(url: str | URL) -> URL:
    """Parse a database URL, failing with an error that never shows the password."""
    if isinstance(url, URL):
        _check_url_text(url.render_as_string(hide_password=False))
        return _password_out_of_query(url)
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError("database URL", "give a URL such as sqlite:///symfonic_store.db")
    _check_url_text(url)
    try:
        return _password_out_of_query(make_url(url.strip()))
    except Exception:
        raise InvalidInputError(
            "database URL",
            "not a database URL; use sqlite:///path/to/file.db or "
            "postgresql+psycopg://user@host:5432/dbname",
        ) from None


def _password_out_of_query(url: URL) -> URL:
    # libpq also takes the password as a query parameter (`?password=`), which
    # SQLAlchemy's reprs do not mask: move it to where every repr hides it.
    password = url.query.get("password")
    if password is None or url.get_backend_name() != "postgresql":
        return url
    if isinstance(password, tuple):
        password = password[-1]  # as libpq does, the last one wins
    return url.difference_update_query(["password"]).set(password=password)


def _check_url_text(text: str) -> None:
    # Drivers and the file system fail on these with errors of their own; say it here.
    if "\x00" in text:
        raise InvalidInputError("database URL", "must not contain NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("database URL", "is not valid Unicode text") from None


def safe_url(url: str | URL) -> str:
    """The URL as text with any password masked: for messages and logs."""
    try:
        return parse_url(url).render_as_string(hide_password=True)
    except InvalidInputError:
        return "<unparseable URL>"


def _backend(url: URL) -> str:
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise InvalidInputError(
            "database URL",
            f"unsupported database {backend!r}: symfonic-store runs on SQLite "
            "(sqlite:///file.db) and PostgreSQL (postgresql+psycopg://...)",
        )
    return backend


def sync_url(url: str | URL) -> URL:
    """The URL with the synchronous driver the store uses (pysqlite, psycopg 3)."""
    parsed = parse_url(url)
    if _backend(parsed) == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite")
    return parsed.set(drivername="postgresql+psycopg")


def async_url(url: str | URL) -> URL:
    """The URL with the asyncio driver the store uses (aiosqlite, psycopg 3 async)."""
    parsed = parse_url(url)
    if _backend(parsed) == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    return parsed.set(drivername="postgresql+psycopg")


def _prepare_sqlite_path(url: URL) -> None:
    # A newcomer's `sqlite:///data/store.db` should just work: create the folder.
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        folder = Path(database).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:
            raise InvalidInputError(
                "database URL",
                f"cannot create the folder {str(folder)!r} for the SQLite file "
                f"({getattr(exc, 'strerror', None) or exc}); choose a writable path",
            ) from None


# --- engines -----------------------------------------------------------------------


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
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(sql)
        except connection.dialect.loaded_dbapi.Error as exc:
            raise sa.exc.DBAPIError.instance(
                sql, (), exc, connection.dialect.loaded_dbapi.Error, dialect=connection.dialect
            ) from exc
        finally:
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


E = TypeVar("E", Engine, AsyncEngine)


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
    mode, timeout_ms = _check_sqlite_options(sqlite_synchronous, busy_timeout)
    if isinstance(url_or_engine, AsyncEngine):
        engine = url_or_engine
    else:
        engine = _engine_for(async_url(url_or_engine), create_async_engine)
    if engine.dialect.name == "sqlite":
        _install_sqlite_behaviour(engine.sync_engine, synchronous=mode, busy_timeout_ms=timeout_ms)
    return engine


# --- driver errors -----------------------------------------------------------------

_PASSWORD_IN_TEXT = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")
_PASSWORD_SETTING = re.compile(r"(\b(?:ssl)?password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def scrub(text: str) -> str:
    """Mask anything that looks like a password in ``text``: in a URL, or ``password=...``."""
    return _PASSWORD_SETTING.sub(r"\1***", _PASSWORD_IN_TEXT.sub(r"\1***@", text))


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return scrub(text[0] if text else type(orig).__name__)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn driver exceptions into the store's error tree, with what to do about them."""
    try:
        yield
    except SymfonicStoreError:
        raise
    except sa.exc.IntegrityError as exc:
        raise ConcurrencyConflictError(
            f"a concurrent writer changed the same thread first ({_first_line(exc)}); "
            "retry the operation"
        ) from None
    except sa.exc.DBAPIError as exc:
        message = _first_line(exc)
        lowered = message.lower()
        if "no such table" in lowered or (
            "relation" in lowered and "does not exist" in lowered
        ):
            raise SchemaNotMigratedError(
                f"the database has no symfonic-store schema ({message}): {UPGRADE_HINT}"
            ) from None
        if "database is locked" in lowered or "database is busy" in lowered:
            raise DatabaseError(
                "the SQLite database stayed locked by another writer past the busy timeout; "
                "nothing was written: retry, or raise busy_timeout"
            ) from None
        if getattr(exc, "connection_invalidated", False) or isinstance(
            exc, sa.exc.OperationalError | sa.exc.InterfaceError
        ):
            raise DatabaseError(
                f"cannot use the database ({message}); check that it is running and "
                "reachable, then retry: nothing was written"
            ) from None
        raise DatabaseError(f"the database refused the operation: {message}") from None
    except sa.exc.SQLAlchemyError as exc:
        raise DatabaseError(f"database error: {scrub(str(exc).splitlines()[0])}") from None


# --- migrations ----------------------------------------------------------------------


def migrations_path() -> str:
    """Where the Alembic scripts are: inside the installed package, else the checkout."""
    spec = importlib.util.find_spec("symfonic_store.migrations")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if (Path(location) / "env.py").exists():
                return str(location)
    checkout = Path(__file__).resolve().parent.parent / "migrations"
    if (checkout / "env.py").exists():
        return str(checkout)
    raise DatabaseError("the symfonic-store migrations are missing from this installation")


def alembic_config(connection: Connection | None = None) -> Any:
    """An Alembic ``Config`` for the store's migrations, sharing ``connection`` if given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", migrations_path())
    config.set_main_option("version_table", VERSION_TABLE)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest migration shipped with this version of the package."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships migrations
        raise DatabaseError("the symfonic-store migrations have no head revision")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None when it has no store schema."""
    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    version_table = sa.table(VERSION_TABLE, sa.column("version_num"))
    row = connection.execute(sa.select(version_table.c.version_num)).first()
    return None if row is None else str(row[0])


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (``head`` by default)."""
    from alembic import command

    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, revision: str) -> None:
    """Migrate the database down to ``revision`` (``base`` removes the schema)."""
    from alembic import command

    command.downgrade(alembic_config(connection), revision)


def require_current_schema(connection: Connection) -> None:
    """Raise :class:`SchemaNotMigratedError` unless the database is at the head revision."""
    current = current_revision(connection)
    head = head_revision()
    if current == head:
        return
    if current is None:
        raise SchemaNotMigratedError(
            f"the database has no symfonic-store schema (head is {head}): {UPGRADE_HINT}"
        )
    raise SchemaNotMigratedError(
        f"the schema is at revision {current}, head is {head}: {UPGRADE_HINT}"
    )
