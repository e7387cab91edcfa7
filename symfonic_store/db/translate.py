"""Driver errors into the store's error tree, in exactly one place."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import sqlalchemy as sa

from ..errors import (
    ConcurrencyConflictError,
    DatabaseError,
    SchemaNotMigratedError,
    SymfonicStoreError,
)
from .urls import scrub

UPGRADE_HINT = "run `symfonic-store db upgrade` (or call store.setup())"


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return scrub(text[0] if text else type(orig).__name__)


@contextlib.contextmanager
def translate_errors(*, at_commit: bool = False) -> Iterator[None]:
    """Turn driver exceptions into the store's error tree, with what to do about them.

    ``at_commit``: the block sends COMMIT. A failure there (the connection lost while
    committing) may come after the server committed, so it is a
    :class:`DatabaseError` with ``outcome_unknown`` and never says nothing was written.
    """
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
        if at_commit:
            raise DatabaseError(
                f"the database failed at commit ({message}): the outcome of the last "
                "transaction is unknown, it may have committed; check that the database is "
                "running and reachable, and look at what was written before you retry",
                outcome_unknown=True,
            ) from None
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
                "the transaction was rolled back, nothing of it was written: retry, or raise "
                "busy_timeout"
            ) from None
        if getattr(exc, "connection_invalidated", False) or isinstance(
            exc, sa.exc.OperationalError | sa.exc.InterfaceError
        ):
            raise DatabaseError(
                f"cannot use the database ({message}); check that it is running and "
                "reachable, then retry: the transaction was rolled back, nothing of it was "
                "written"
            ) from None
        raise DatabaseError(f"the database refused the operation: {message}") from None
    except sa.exc.SQLAlchemyError as exc:
        raise DatabaseError(f"database error: {scrub(str(exc).splitlines()[0])}") from None
