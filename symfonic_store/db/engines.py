"""Engines for both stores: made from a URL (or taken as given), their options checked,
and prepared once by their backend (:func:`symfonic_store.db.backends.prepare_engine`:
SQLite's pragmas and BEGIN IMMEDIATE, PostgreSQL's writers' lock at BEGIN)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from ..errors import InvalidInputError
from ..events import canonical_json
from .backends import EngineOptions, prepare_engine
from .backends.sqlite import SQLITE_SYNCHRONOUS
from .urls import async_url, prepare_for, scrub, sync_url

if TYPE_CHECKING:
    # Imported by create_asyncio_engine when called: it loads the ORM and asyncio.
    from sqlalchemy.ext.asyncio import AsyncEngine

MAX_BUSY_TIMEOUT = 2_000_000
"""Seconds; SQLite keeps its busy timeout in milliseconds in a 32-bit int."""



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
    prepare_for(url)
    try:
        return factory(url)
    except sa.exc.ArgumentError as exc:
        first = scrub(str(exc).strip().splitlines()[0]) if str(exc).strip() else "refused"
        raise InvalidInputError(
            "database URL",
            f"{first}; use sqlite:///relative/path.db, sqlite:////absolute/path.db or "
            "postgresql+psycopg://user@host:5432/dbname",
        ) from None


# Deliberately repeated: the sync twin of create_asyncio_engine (another engine type and factory);
# the options are checked once, in _check_sqlite_options.
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
    prepare_engine(engine, EngineOptions(mode, timeout_ms))
    return engine


# Deliberately repeated: the async twin of create_sync_engine; the options are checked once, in
# _check_sqlite_options.
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
    prepare_engine(engine.sync_engine, EngineOptions(mode, timeout_ms))
    return engine
