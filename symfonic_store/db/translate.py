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
