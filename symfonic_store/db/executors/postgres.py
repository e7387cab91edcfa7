"""The executors of PostgreSQL: Core statements (the asyncio driver, or anyone listening),
and the fast path on psycopg's synchronous connection, whose write transactions run in
psycopg's pipeline mode, so the BEGIN (with the writers' lock) travels with the first
read and the writes with the COMMIT: an append in a transaction costs two or three round
trips, not one per statement. A store method's append to one thread is one call of
``symfonic_append`` in autocommit instead (:meth:`PostgresCursorExecutor.call_once`,
:mod:`symfonic_store.store.single`): one round trip. A statement that goes through SQLAlchemy inside such a transaction first
ends the pipeline (:func:`leave_pipeline_for_sqlalchemy`), so SQLAlchemy gets its
results at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...compat import fire_commit
from .base import CoreExecutor, state_of
from .cursor import CursorExecutor

if TYPE_CHECKING:
    from ..backends.base import Backend


class PostgresExecutor(CoreExecutor):
    """Core statements on PostgreSQL (its backend takes the locks and keeps reads gap-safe)."""

    name = "postgresql"


class PostgresCursorExecutor(CursorExecutor):
    """The fast path on PostgreSQL (psycopg, synchronous): compiled statements, and write
    transactions in pipeline mode with the writers' lock at their BEGIN."""

    name = "postgresql-cursor"
    reads_outside_transaction = True

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        import psycopg

        self._pipelines = psycopg.Pipeline.is_supported()

    def call_once(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any], phase: Any
    ) -> Any:
        # In autocommit: the call is its own transaction, one round trip, and its commit
        # (lost during it, it may have committed). The commit listeners hear of it first,
        # as of any write the store commits.
        self._mark_write(conn, state_of(conn))
        phase.committing = True
        fire_commit(conn)
        return self.fetch(conn, stmt, params)[0][0]

    def begin(self, conn: Connection, *, write: bool, appends: bool = True) -> Any:
        # A read needs no transaction: under READ COMMITTED each statement reads its own
        # snapshot either way. (A statement through SQLAlchemy begins one as usual.)
        if not write:
            return None
        state = state_of(conn)
        self._mark_write(conn, state)
        try:
            statements = self.backend.begin_statements(
                self._cursors(conn)[1].connection, write=True, appends=appends
            )
        except self._error as exc:
            raise self._driver_error(conn, "BEGIN", (), exc) from exc
        if not appends:
            self._run(conn, "; ".join(statements))
            state.tx = "write, no events"
            return None
        if not self._pipelines:
            self._run(conn, "; ".join(statements))
        else:
            try:
                cursor = self._cursors(conn)[1]
                pipeline = cursor.connection.pipeline()
                pipeline.__enter__()
                state.pipeline = pipeline
                # Queued: they travel with the transaction's first read. Explicit, so a
                # sync inside the pipeline (psycopg makes one now and then) never
                # commits half a transaction.
                for statement in statements:
                    cursor.execute(statement)
            except self._error as exc:
                self._leave_pipeline(conn, exc)
                raise self._driver_error(conn, "BEGIN", (), exc) from exc
        state.tx = "write"
        return None

    def _leave_pipeline(self, conn: Connection, exc: BaseException | None = None) -> None:
        """Send what is queued and leave pipeline mode (its first error raised, unless
        ``exc`` is already on its way)."""
        state = state_of(conn)
        pipeline, state.pipeline = state.pipeline, None
        if pipeline is None:
            return
        if exc is None:
            pipeline.__exit__(None, None, None)
            return
        # ``exc`` is on its way: what leaving the pipeline raises now (a lost connection's
        # echo) is dropped here. Told of ``exc``, psycopg would log it instead -- on
        # stderr, through logging's last resort, in an application that set up no logging.
        try:
            pipeline.__exit__(None, None, None)
        except self._error:
            pass

    def commit(self, conn: Connection, tx: Any) -> None:
        state = state_of(conn)
        if state.tx is None:  # a read: end what SQLAlchemy began, if any
            if conn.in_transaction():
                conn.commit()
            return
        if state.pipeline is None:
            self._commit_on_driver(conn)
        else:
            fire_commit(conn)
            try:
                self._commit_pipeline(conn)
            except self._error as exc:
                raise self._driver_error(conn, "COMMIT", (), exc) from exc
        state.tx = None

    def _commit_pipeline(self, conn: Connection) -> None:
        """COMMIT queued behind the writes, and the pipeline sent: one round trip.

        (Not ``dialect.do_commit``: psycopg's commit() syncs the pipeline, and leaving
        the pipeline then syncs once more, a round trip for nothing.)
        """
        self._cursors(conn)[1].execute("COMMIT")
        self._leave_pipeline(conn)

    def rollback(self, conn: Connection, tx: Any) -> None:
        state = state_of(conn)
        if state.tx is None:
            if conn.in_transaction():
                conn.rollback()
            return
        try:
            if state.pipeline is not None:
                self._leave_pipeline(conn, RuntimeError("rolling back"))
        except self._error:
            pass  # what the pipeline still held failed too: all of it is rolled back
        finally:
            state.tx = None
            self._rollback_on_driver(conn)


def leave_pipeline_for_sqlalchemy(conn: Connection) -> None:
    """Called by the engines' ``begin`` listener when SQLAlchemy joins a fast-path
    transaction: end the pipeline (SQLAlchemy needs each result at once), for good."""
    state = state_of(conn)
    pipeline, state.pipeline = state.pipeline, None
    if pipeline is not None:
        pipeline.__exit__(None, None, None)
