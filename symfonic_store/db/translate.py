"""Driver errors into the store's error tree, in exactly one place.

Errors are classified by the codes the drivers expose, never by their message text
(PostgreSQL words its messages in the server's ``lc_messages`` language):

- PostgreSQL (psycopg): the SQLSTATE (``orig.sqlstate``) and the constraint's name
  (``orig.diag.constraint_name``);
- SQLite (``sqlite3``, also under aiosqlite): the extended result code
  (``orig.sqlite_errorcode``, Python 3.11+).

A unique violation of one of the store's concurrency guards (:data:`RACE_CONSTRAINTS`) is
a lost race, :class:`~symfonic_store.ConcurrencyConflictError`, which the write path
retries. Every other integrity error -- a trigger (the event table is append-only), NOT
NULL, CHECK, a foreign key, someone else's unique index -- is the database refusing the
write, :class:`~symfonic_store.ConstraintViolationError`, which no retry can fix.

A driver's exception that reaches a public call unwrapped -- raised on a cursor of the
driver's own (LangGraph's savers inside ``store.checkpointer()``), or by an engine event
hook -- is classified the same way (:func:`as_dbapi_error`): no driver exception escapes.

The driver's exception stays reachable as the ``__cause__`` (``symfonic-store
--traceback`` prints it), or a copy with password-like text masked when it has any.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import (
    ConcurrencyConflictError,
    ConstraintViolationError,
    DatabaseConfigurationError,
    DatabaseError,
    DatabaseUnreachableError,
    SchemaNotMigratedError,
    SymfonicStoreError,
)
from .backends import BACKENDS
from .backends.base import RACE_CONSTRAINTS as RACE_CONSTRAINTS  # re-exported: its old home
from .backends.base import Backend, DriverCode
from .backends.postgres import PG_REFUSED_SETTINGS
from .urls import scrub

if TYPE_CHECKING:
    from .pgstartup import StartupFailure

UPGRADE_HINT = "run `symfonic-store db upgrade` (or call store.setup())"

class ScrubbedDriverError(Exception):
    """Stands in as the cause for a driver error whose text had to be masked."""


class SchemaSuspectError(DatabaseError):
    """A statement failed in a way a missing or older schema would explain.

    SQLite reports a missing table with its generic ``SQLITE_ERROR`` (as it does a syntax
    error), and PostgreSQL an older schema as an undefined column: the runner asks the
    database for its schema revision before settling on this error (see
    :func:`symfonic_store.store.execute.execute`).
    """


@dataclass
class WritePhase:
    """Where a write transaction is: an error after ``committing`` may have committed."""

    committing: bool = False


def driver_code(exc: BaseException) -> tuple[type[Backend], DriverCode]:
    """The backend whose driver raised ``exc`` (a SQLAlchemy-wrapped driver exception, or
    a driver one) and its codes; the base :class:`Backend` with no code for a driver
    that gives none (it is then classified by its PEP 249 class)."""
    orig = getattr(exc, "orig", None) or exc
    for backend in BACKENDS.values():
        code = backend.driver_code(orig)
        if code is not None:
            return backend, code
    return Backend, DriverCode()


def outcome_note(*, may_have_committed: bool) -> str:
    """What a failed write left behind: the one wording, shared by every message."""
    if may_have_committed:
        return (
            "the connection failed while committing, so the write may or may not have "
            "been saved: check (e.g. `symfonic-store replay THREAD`) before retrying"
        )
    return "the transaction did not commit, so nothing of it was written: retry"


def connection_lost_message(detail: str, *, may_have_committed: bool) -> str:
    """The message for a database that could not be reached or dropped the connection."""
    return (
        f"cannot use the database ({detail}); check that it is running and reachable: "
        + outcome_note(may_have_committed=may_have_committed)
    )


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return scrub(text[0] if text else type(orig).__name__)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        e = pending.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        pending.extend(x for x in (e.__cause__, e.__context__, getattr(e, "orig", None)) if isinstance(x, BaseException))


def scrubbed_cause(exc: BaseException) -> BaseException:
    """``exc`` itself, unless some text in its chain looks like a password: then a copy
    of its text with that masked, so chaining it cannot print a password."""
    for e in _chain(exc):
        for text in (str(e), repr(e)):
            if scrub(text) != text:
                return ScrubbedDriverError(f"{type(exc).__name__}: {scrub(str(exc))}")
    return exc


def _refusal(exc: BaseException, backend: type[Backend], code: DriverCode) -> ConstraintViolationError:
    what, label = backend.refusal(code)
    where = f" on {code.constraint}" if code.constraint else ""
    return ConstraintViolationError(
        f"the database refused the write: {what} [{label}{where}] ({_first_line(exc)}); "
        "this is not a race, so it was not retried, and the transaction was rolled back",
        code=code.code,
        constraint=code.constraint,
    )


def _refused_settings(sqlstate: str, failure: StartupFailure | None) -> DatabaseConfigurationError:
    where = f" at {failure.where}" if failure is not None else ""
    database = repr(failure.database) if failure is not None else "named in the URL"
    role = repr(failure.user) if failure is not None else "named in the URL"
    what = {
        "3D000": f"the database {database} does not exist on the PostgreSQL server{where}: "
        "check the database name in the URL, or create the database",
        "28P01": f"the PostgreSQL server{where} refused the password of role {role}: check "
        "the password in the URL (or the password file)",
        "42501": f"role {role} may not connect to the database {database}{where}: grant it "
        "CONNECT, or use another role",
    }.get(
        sqlstate,
        f"the PostgreSQL server{where} refused role {role}: the role does not exist or may "
        "not connect from here (pg_hba.conf); check the user name in the URL",
    )
    label = PG_REFUSED_SETTINGS.get(sqlstate, "invalid_authorization_specification")
    return DatabaseConfigurationError(
        f"{what} [{sqlstate} {label}]; this is a configuration error, not a passing fault "
        "(no connection was opened)",
        code=sqlstate,
    )


def _unreachable(failure: StartupFailure) -> DatabaseUnreachableError:
    assert failure.errno is not None
    why = os.strerror(failure.errno) if failure.errno > 0 else "its host name does not resolve"
    name = errno.errorcode.get(failure.errno)
    return DatabaseUnreachableError(
        f"the PostgreSQL server at {failure.where} is unreachable ({why}"
        f"{f' [{name}]' if name else ''}): check that it is running and that the URL's host "
        "and port are right; no connection was opened, so the transaction did not start and "
        "nothing of it was written: retry once it answers",
        errno=failure.errno,
    )


def _never_connected(exc: BaseException) -> Any | None:
    """The libpq connection of a psycopg error raised while connecting, else None.

    Connecting runs no statement, and libpq's backend process id stays 0 until the
    server has accepted the session (a connection lost later keeps its id).
    """
    if getattr(exc, "statement", None) is not None:
        return None
    pgconn = getattr(getattr(exc, "orig", None), "pgconn", None)
    if pgconn is None or getattr(pgconn, "backend_pid", None) != 0:
        return None
    return pgconn


def connect_failure(exc: BaseException) -> DatabaseError | None:
    """A PostgreSQL connection that could not be opened, told by code: the settings it
    was refused for (a configuration error) or a server that is unreachable; None when
    ``exc`` is something else, or nothing says which.

    psycopg gives no SQLSTATE for a refused connection; the startup probe
    (:mod:`symfonic_store.db.pgstartup`) asks the server for it.
    """
    pgconn = _never_connected(exc)
    if pgconn is None:
        return None
    _, code = driver_code(exc)
    if code.code is not None:  # a driver (or a release) that tells the code itself
        return _refused_settings(code.code, None) if code.code in PG_REFUSED_SETTINGS else None
    from .pgstartup import startup_failure  # only on this failure path

    failure = startup_failure(pgconn)
    if failure is None:
        return None
    if failure.errno is not None:
        return _unreachable(failure)
    if failure.sqlstate is not None and (
        failure.sqlstate in PG_REFUSED_SETTINGS or failure.sqlstate.startswith("28")
    ):
        return _refused_settings(failure.sqlstate, failure)
    return None


def classify(exc: sa.exc.DBAPIError, *, may_have_committed: bool = False) -> SymfonicStoreError:
    """The store's error for a driver error, chosen by its codes (see the module doc)."""
    backend, code = driver_code(exc)
    message = _first_line(exc)
    if backend.is_race(code):
        return ConcurrencyConflictError(
            f"a concurrent writer changed the same thread first ({message}); "
            "retry the operation"
        )
    if backend.is_integrity(exc, code):
        return _refusal(exc, backend, code)
    if backend.is_missing_schema(code):
        return SchemaNotMigratedError(
            f"the database has no symfonic-store schema ({message}): {UPGRADE_HINT}"
        )
    if backend.is_busy(code):
        return DatabaseError(
            "the SQLite database stayed locked by another writer past the busy timeout; "
            + outcome_note(may_have_committed=may_have_committed)
            + ", or raise busy_timeout",
            outcome_unknown=may_have_committed,
        )
    label = f" [{code.code}]" if code.code else ""
    if backend.is_schema_suspect(code):
        return SchemaSuspectError(f"the database refused the operation{label}: {message}")
    # No code: psycopg's own (client-side) failures; SQLite's I/O, open, full.
    if getattr(exc, "connection_invalidated", False) or backend.is_connection_lost(exc, code):
        return DatabaseError(
            connection_lost_message(message, may_have_committed=may_have_committed),
            outcome_unknown=may_have_committed,
        )
    return DatabaseError(f"the database refused the operation{label}: {message}")


DRIVER_MODULES = ("psycopg", "pg8000")
"""PostgreSQL drivers whose DB-API errors may reach the store unwrapped (only one already
imported can have raised; SQLite's ``sqlite3``, aiosqlite's too, is always there)."""


def as_dbapi_error(exc: BaseException) -> sa.exc.DBAPIError | None:
    """A driver's own DB-API error wrapped as SQLAlchemy would (its PEP 249 class kept,
    e.g. ``OperationalError``); None when ``exc`` is not a driver's error."""
    if isinstance(exc, sa.exc.DBAPIError):
        return exc
    bases: list[type[Exception]] = [sqlite3.Error]
    for name in DRIVER_MODULES:
        base = getattr(sys.modules.get(name), "Error", None)
        if isinstance(base, type) and issubclass(base, Exception):
            bases.append(base)
    for base in bases:
        if isinstance(exc, base):
            wrapped = sa.exc.DBAPIError.instance(None, None, exc, base)
            return wrapped if isinstance(wrapped, sa.exc.DBAPIError) else None
    return None


def translated(exc: BaseException, *, may_have_committed: bool = False) -> SymfonicStoreError | None:
    """The store's error for a driver's or SQLAlchemy's exception (None for any other)."""
    wrapped = as_dbapi_error(exc)
    if wrapped is not None:
        return connect_failure(wrapped) or classify(wrapped, may_have_committed=may_have_committed)
    if isinstance(exc, sa.exc.SQLAlchemyError):
        return DatabaseError(
            f"database error: {_first_line(exc)}; "
            + outcome_note(may_have_committed=may_have_committed),
            outcome_unknown=may_have_committed,
        )
    return None


@contextlib.contextmanager
def translate_errors() -> Iterator[WritePhase]:
    """Turn driver exceptions into the store's error tree, with what to do about them.

    Yields a :class:`WritePhase`: a write sets ``committing`` just before its COMMIT, so
    a connection lost from then on is not reported as "nothing was written".
    """
    phase = WritePhase()
    try:
        yield phase
    except SymfonicStoreError:
        raise
    except Exception as exc:
        error = translated(exc, may_have_committed=phase.committing)
        if error is None:
            raise
        # The cause is SQLAlchemy's wrapping of the driver's error, however it arrived.
        raise error from scrubbed_cause(as_dbapi_error(exc) or exc)
