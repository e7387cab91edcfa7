"""The executor of a connection: how the store's statements run on it, chosen by its
engine's backend (:mod:`symfonic_store.db.backends`).

Every statement in :mod:`symfonic_store.db.statements` is SQLAlchemy Core and
backend-blind; it runs through the executor of its connection
(:mod:`symfonic_store.db.executors`: Core, or a backend's fast path on the driver's
cursor), chosen once per ``Connection`` by :func:`executor_for` and kept on it. The fast
path is chosen only while nobody listens: an engine with
``before_cursor_execute``/``after_cursor_execute`` listeners, or created with the
execution option ``symfonic_fast_path=False``, gets the Core executor, so nothing the
store runs is hidden from instrumentation.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from .backends import backend_of
from .backends.base import FAST_PATH_OPTION, WritersBusyError
from .backends.pg_horizon import WRITERS_LOCK, WRITERS_LOCK_KEY
from .backends.postgres import (
    EVIDENCE_BEGIN,
    EVIDENCE_LOCK_KEY,
    SETUP_LOCK_KEY,
    WRITERS_WAIT_TIMEOUT,
)
from .executors.base import CoreExecutor, Executor, JsonText, in_driver_transaction, state_of
from .executors.cursor import CursorExecutor, Prepared, SQLiteCursorExecutor
from .executors.postgres import (
    PostgresCursorExecutor,
    PostgresExecutor,
    leave_pipeline_for_sqlalchemy,
)


def choose_executor(conn: Connection) -> Executor:
    """The executor for ``conn``'s backend and settings (see the module docstring)."""
    return backend_of(conn).choose_executor(conn)


def choose_executor_again(conn: Connection) -> Executor:
    """Choose ``conn``'s executor anew (at the start of each operation): a connection the
    store holds for a long time must notice a statement listener added since."""
    executor = state_of(conn).executor = choose_executor(conn)
    return executor


def executor_for(conn: Connection) -> Executor:
    """The executor of ``conn``, chosen once per ``Connection`` and kept on it."""
    executor = state_of(conn).executor
    return executor if executor is not None else backend_of(conn).executor_for(conn)


__all__ = [
    "EVIDENCE_BEGIN",
    "EVIDENCE_LOCK_KEY",
    "FAST_PATH_OPTION",
    "SETUP_LOCK_KEY",
    "WRITERS_LOCK",
    "WRITERS_LOCK_KEY",
    "WRITERS_WAIT_TIMEOUT",
    "CoreExecutor",
    "CursorExecutor",
    "Executor",
    "JsonText",
    "PostgresCursorExecutor",
    "PostgresExecutor",
    "Prepared",
    "SQLiteCursorExecutor",
    "WritersBusyError",
    "choose_executor",
    "choose_executor_again",
    "executor_for",
    "in_driver_transaction",
    "leave_pipeline_for_sqlalchemy",
    "state_of",
]
