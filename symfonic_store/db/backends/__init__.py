"""The backends: one object per engine that knows everything the store does differently
per database (:class:`~.base.Backend`), chosen once, by the engine's dialect.

Adding a backend: a module here with a :class:`~.base.Backend` subclass (its engine hooks,
BEGIN statements and locks, executor, gap-safe reads, guards, error codes and checkpoint
layout), its entry in :data:`BACKENDS`, and a subclass of the contract tests in
``tests/core/test_backends.py``.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.engine import URL, Connection, Dialect, Engine

from .base import Backend, EngineOptions
from .postgres import PostgresBackend
from .sqlite import SQLiteBackend

BACKENDS: dict[str, type[Backend]] = {
    SQLiteBackend.name: SQLiteBackend,
    PostgresBackend.name: PostgresBackend,
}
"""The backends by SQLAlchemy dialect name. A dialect without one gets the base
:class:`~.base.Backend`: SQLAlchemy Core, no hooks (it cannot hold a store's schema)."""

ALIASES = {"postgres": PostgresBackend}
"""URL schemes SQLAlchemy no longer reads, by the backend they mean (Heroku-style
``postgres://`` URLs still use SQLAlchemy's dropped alias)."""


def backend_for_url(url: URL) -> type[Backend] | None:
    """The backend of the database ``url`` names (None: one the store does not run on)."""
    return BACKENDS.get(url.get_backend_name())


def misread_scheme(url: URL) -> str | None:
    """What to write instead of ``url``'s scheme, when it is an alias SQLAlchemy dropped."""
    meant = ALIASES.get(url.get_backend_name())
    if meant is None:
        return None
    return (
        f"{url.get_backend_name()}:// is not a scheme SQLAlchemy reads; write {meant.sync_driver}:// "
        f"instead ({meant.sync_driver}://user@host:5432/dbname)"
    )


_BACKEND = "_symfonic_backend"
"""The attribute of a dialect that holds its backend. Not a WeakKeyDictionary keyed by
the dialect: the backend refers to its dialect, so such an entry would never be dropped,
and every engine ever made would stay alive with its backend and compiled statements."""
_CHOOSING = threading.Lock()


def backend_of(bind: Connection | Engine | Dialect | Any) -> Backend:
    """The backend of an engine (or of a connection's engine, or of a dialect), made the
    first time it is asked for and kept for the engine's lifetime (on its dialect, which
    the engine's option copies and asyncio wrapper share, and goes with it)."""
    dialect: Dialect = bind if isinstance(bind, Dialect) else bind.dialect
    backend: Backend | None = getattr(dialect, _BACKEND, None)
    if backend is None:
        with _CHOOSING:  # one backend per dialect, even when two threads ask first
            backend = getattr(dialect, _BACKEND, None)
            if backend is None:
                backend = BACKENDS.get(dialect.name, Backend)(dialect)
                setattr(dialect, _BACKEND, backend)
    return backend


def prepare_engine(engine: Engine, options: EngineOptions) -> Backend:
    """Install the engine's backend hooks, once per engine (a second call, say with an
    engine the caller made and passed again, changes nothing)."""
    backend = backend_of(engine)
    if not backend.prepared:
        backend.prepare(engine, options)
        backend.prepared = True
    return backend


__all__ = [
    "ALIASES",
    "BACKENDS",
    "Backend",
    "EngineOptions",
    "backend_for_url",
    "backend_of",
    "misread_scheme",
    "prepare_engine",
]
