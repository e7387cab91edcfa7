"""Running one :class:`~symfonic_store.store.plan.Op` on a synchronous connection.

Both runners end here: the sync store on a pooled connection, the async store inside
``AsyncConnection.run_sync``. A write runs in a retried write transaction
(:func:`~symfonic_store.store.append.run_write`), a read in a plain one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection

from ..db.executor import choose_executor_again, executor_for
from ..db.migrate import require_current_schema, upgrade
from ..db.translate import SchemaSuspectError, translate_errors
from ..errors import SchemaNotMigratedError
from .append import Heads, run_write
from .plan import Op
from .single import FALLBACK, run_single

T = TypeVar("T")


def _read_in_tx(conn: Connection, fn: Callable[[Connection], T]) -> T:
    executor = executor_for(conn)
    tx = executor.begin(conn, write=False)
    try:
        result = fn(conn)
    except BaseException:
        executor.rollback(conn, tx)
        raise
    executor.commit(conn, tx)
    return result


def _settle(conn: Connection, settled: Callable[[Connection], tuple[bool, T]]) -> tuple[bool, T]:
    """Run a read-only check. Where the executor allows it (SQLite's cursor path) its
    statements run outside any transaction, each one atomic on its own (the checks read
    one fact that, once true, stays true), which spares a BEGIN and COMMIT; elsewhere in
    a read transaction."""
    if not executor_for(conn).reads_outside_transaction:
        return _read_in_tx(conn, settled)
    try:
        return settled(conn)
    finally:
        if conn.in_transaction():  # a statement that went through SQLAlchemy after all
            conn.commit()


def execute(conn: Connection, op: Op[T], heads: Heads | None = None) -> T:
    """Run ``op`` on ``conn``: a write in a retried write transaction, a read in a plain one.

    ``heads``: the store's cache of thread heads. With it, a write to one thread
    (:attr:`Op.thread <.plan.Op.thread>`) first tries the single-append path
    (:mod:`.single`), and falls back to the transactional one.

    A write's read-only check (``op.settled``), when it has one, runs first: the checks
    guard the calls that are usually repeats (a node re-run after a resume, an answer
    admitted before the graph ran), so a repeat commits nothing. Where the executor
    allows it the check's statements run outside a transaction (one round trip each).
    The hot append path (route decisions, resumes) has no check and writes at once.

    Raises:
        SchemaNotMigratedError: a statement failed on a missing table, and the database's
            revision (asked again: it may have changed since the store checked) says why.
    """
    try:
        with translate_errors():
            choose_executor_again(conn)
            if not op.write:
                return _read_in_tx(conn, op.fn)
            if heads is not None and op.thread is not None:
                result: T = run_single(conn, op, heads)
                if result is not FALLBACK:
                    return result
            else:
                heads = None  # only a store method's write to one thread feeds the cache
            if op.settled is not None:
                done, result = _settle(conn, op.settled)
                if done:
                    return result
            return run_write(conn, op.fn, appends=op.appends, heads=heads)
    except (SchemaSuspectError, SchemaNotMigratedError):
        # The codes say "no such table" (or, on SQLite, a generic SQL error): whether
        # the schema is behind is the version table's to say, not the message's.
        if conn.in_transaction():
            conn.rollback()
        check_schema(conn)
        raise


def setup(conn: Connection) -> None:
    """Migrate to head; two processes running it at once do not both create the tables."""
    with translate_errors() as phase:
        with conn.begin():
            executor_for(conn).lock_setup(conn)
            upgrade(conn)
            phase.committing = True


def check_schema(conn: Connection) -> None:
    """Raise :class:`~symfonic_store.SchemaNotMigratedError` unless the schema is at head."""
    with translate_errors():
        with conn.begin():
            require_current_schema(conn)
