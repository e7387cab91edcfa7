"""The single-append path: a store method's write to one thread, from the head the store
kept of it, in one short step; the transactional path (:func:`.append.run_write`) is
its fallback.

A write ``Op`` that names its thread (:attr:`~.plan.Op.thread`: mint, route decisions,
resume, expire, a recorded refusal -- never a write inside a caller's transaction, the
checkpointer's steps, sweep batches or claims) runs its plan's rules in Python against
the thread's head from the store's :class:`~.append.Heads` (the state its own last
commit left; a thread it does not hold is taken for a new one when the write may create
it, and otherwise goes straight to the transactional path). Then one database step writes:

- SQLite: ``BEGIN IMMEDIATE``; ``UPDATE`` the thread's row ``WHERE version = ? AND
  last_hash = ?`` (or ``INSERT`` it for a new thread); the events; ``COMMIT``. The
  reads a rule needs (was this interrupt minted?) run inside that transaction;
- PostgreSQL: one call of ``symfonic_append`` in autocommit
  (:mod:`symfonic_store.db.statements.append_call`), which takes the writers' lock
  first, answers "already minted?" and swaps the head. A rule that needs another read
  falls back.

The result stands only when the head swap succeeded (the rules then decided on the
thread's true head, so the events are those the transactional path would write), or
when nothing was written for a reason that stays true whatever the head (a mint already
recorded). Anything else -- the head moved, the new thread exists, a rule needed the
database, a rule refused -- rolls back (nothing was written), drops the cached head and
returns :data:`FALLBACK`: the transactional path decides again under the lock. A
connection lost during the commit (SQLite) or the call (PostgreSQL) may have committed,
and is reported so, never retried.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from ..db.backends import backend_of
from ..db.executor import executor_for
from ..db.executors.base import NeedsDatabase, refusing_statements
from ..db.statements.append_call import APPLIED, append_in_one_call
from ..db.translate import SchemaSuspectError, translate_errors
from ..errors import DatabaseError
from .append import Heads, OneAppend, Refusal, one_append
from .plan import Op

FALLBACK: Any = object()
"""The single-append path wrote nothing: run the transactional path."""


def run_single(conn: Connection, op: Op[Any], heads: Heads) -> Any:
    """Run ``op`` on its thread's cached head in one step; its result, or :data:`FALLBACK`."""
    assert op.thread is not None
    if not op.creates and op.thread not in heads:
        return FALLBACK
    in_one_call = backend_of(conn).appends_in_one_call
    one = OneAppend(heads, "call" if in_one_call else "transaction")
    context = one_append()
    token = context.set(one)
    try:
        outcome = _in_one_call(conn, op, one) if in_one_call else _in_transaction(conn, op, one)
    except SchemaSuspectError:
        one.forget()  # e.g. the function was dropped (`verify` says so): the old way
        return FALLBACK
    except DatabaseError:
        one.forget()  # the database failed (the commit's outcome may be unknown): say so
        raise
    except Exception:
        # StaleHead, NeedsDatabase, a lost race, a rule's refusal: nothing was written;
        # the transactional path decides again under the lock.
        one.forget()
        return FALLBACK
    finally:
        context.reset(token)
    if outcome is FALLBACK:
        one.forget()
        return FALLBACK
    one.remember()
    if isinstance(outcome, Refusal):
        raise outcome.error
    return outcome


def _trusted(one: OneAppend) -> bool:
    """May the outcome stand? Events written under the head swap, or a proven no-op."""
    return one.wrote > 0 or one.proven


def _in_transaction(conn: Connection, op: Op[Any], one: OneAppend) -> Any:
    executor = executor_for(conn)
    with translate_errors() as phase:
        tx = executor.begin(conn, write=True)
        try:
            outcome = op.fn(conn)
            if not _trusted(one):
                raise NeedsDatabase("an outcome the cached head cannot vouch for")
            phase.committing = True
            executor.commit(conn, tx)
        except BaseException:
            executor.rollback(conn, tx)
            raise
    return outcome


def _in_one_call(conn: Connection, op: Op[Any], one: OneAppend) -> Any:
    with refusing_statements(conn):
        outcome = op.fn(conn)  # decided in Python: flush() keeps what it would write
    if not one.kept:
        return outcome if one.proven else FALLBACK
    if len(one.kept) != 1:
        return FALLBACK
    kept = one.kept[0]
    with translate_errors() as phase:
        status = append_in_one_call(
            conn,
            kept.state,
            kept.head,
            kept.new_events,
            pending_json=kept.pending_json,
            opened=kept.opened,
            closed=kept.closed,
            probe=one.probe,
            phase=phase,
        )
    return outcome if status == APPLIED else FALLBACK
