"""The append-only guards of the event table (I1) as the catalog shows them, and the
archive's one way past them (SPEC §10).

Each backend knows how it guards the table (:mod:`symfonic_store.db.backends.sqlite`:
two triggers in ``sqlite_master``; :mod:`symfonic_store.db.backends.pg_guards`: two
triggers on one function, a read-order trigger and a ``SECURITY DEFINER`` removal
function); these functions ask the backend of the connection.

Every problem :func:`guard_problems` reports names ``db guards --restore``
(:func:`restore_guards`), which recreates the guards from the migrations' statements: a
downgrade would drop the events along with the triggers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from .backends import backend_of
from .backends.base import GUARD_CHECK as CHECK
from .backends.base import GUARD_RESTORE as RESTORE
from .backends.pg_guards import ENABLED


def guard_problems(conn: Connection) -> list[str]:
    """What is wrong with the append-only triggers of the event table (empty: none)."""
    return backend_of(conn).guard_problems(conn)


def restore_guards(conn: Connection) -> None:
    """Recreate the event table's guards exactly as the migrations define them at head.

    Every guard :func:`guard_problems` checks is dropped (if there) and created again
    from the statements the migrations run, in the caller's transaction (DDL is
    transactional on both backends): a missing, disabled or replaced trigger, or a
    replaced trigger function, is back as ``db upgrade`` made it. Events are untouched;
    what happened while a guard was off is for the signed checkpoints to show. The
    caller checks that the schema is at head first.
    """
    backend_of(conn).restore_guards(conn)


def remove_archived(conn: Connection, heads: Sequence[dict[str, Any]]) -> int:
    """Delete the events of whole archived threads, up to each ``{thread_id, version,
    last_hash}`` head; returns the number of events removed.

    The caller has recorded the archive (``symfonic_archived_threads``) in the same
    transaction. On PostgreSQL the function checks each head against that record and
    the thread's last event before it deletes anything.
    """
    if not heads:
        return 0
    return backend_of(conn).remove_archived(conn, heads)


__all__ = ["CHECK", "ENABLED", "RESTORE", "guard_problems", "remove_archived", "restore_guards"]
