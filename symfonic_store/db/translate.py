"""Driver errors into the store's error tree, in exactly one place.

Errors are classified by the codes the drivers expose, never by their message text
(PostgreSQL words its messages in the server's ``lc_messages`` language). Each backend
reads its driver's codes and keeps their tables (:mod:`symfonic_store.db.backends`);
this module turns its answers into the store's errors and their advice:

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
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import sqlalchemy as sa

from ..compat import dbapi_error
from ..errors import (
    ConcurrencyConflictError,
    ConstraintViolationError,
    DatabaseError,
    SchemaNotMigratedError,
    SymfonicStoreError,
)
from .backends import BACKENDS
from .backends.base import RACE_CONSTRAINTS as RACE_CONSTRAINTS  # re-exported: its old home
from .backends.base import Backend, DriverCode
from .urls import scrub

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


def connect_failure(exc: BaseException) -> DatabaseError | None:
    """A connection that could not be opened, told by code by its backend (the settings it
    was refused for, a server that is unreachable); None when ``exc`` is something else,
    or nothing says which."""
    for backend in BACKENDS.values():
        failure = backend.connect_failure(exc)
        if failure is not None:
            return failure
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
            f"a table of the symfonic-store schema is missing ({message}): {UPGRADE_HINT}; "
            "if `symfonic-store db current` says it is at head, the table was dropped and "
            "`symfonic-store db guards --restore` recreates it, empty"
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


def as_dbapi_error(exc: BaseException) -> sa.exc.DBAPIError | None:
    """A driver's own DB-API error wrapped as SQLAlchemy would (its PEP 249 class kept,
    e.g. ``OperationalError``); None when ``exc`` is not a driver's error."""
    if isinstance(exc, sa.exc.DBAPIError):
        return exc
    # Only a driver already imported can have raised.
    bases: list[type[Exception]] = []
    for name in (m for backend in BACKENDS.values() for m in backend.driver_modules):
        base = getattr(sys.modules.get(name), "Error", None)
        if isinstance(base, type) and issubclass(base, Exception):
            bases.append(base)
    for base in bases:
        if isinstance(exc, base):
            wrapped = dbapi_error(None, None, exc, base)
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
