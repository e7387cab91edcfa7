"""Losing the connection AT the commit of a sweep batch, on SQLite and PostgreSQL.

:class:`LostAtCommit` listens to SQLAlchemy's ``commit`` event, which fires just before
SQLAlchemy sends COMMIT to the driver. At the chosen sweep batch it commits through the
driver's own connection first (the server now holds the batch, durably) and then closes
that connection, so SQLAlchemy's own COMMIT meets a dead connection and the driver raises
its real disconnect error: exactly what a client sees when the network drops between the
server's commit and its acknowledgement. With ``server_commits=False`` the connection is
closed with the transaction still open (the server rolls it back): the client cannot
tell the two apart, which is the point.

A batch commit is recognised by the number of ``interrupt.expired`` events the
transaction can see: it grows only in a sweep batch (in these tests nothing else expires;
``expired_before`` is the count when the listener is installed).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

COUNT_EXPIRED = "SELECT count(*) FROM symfonic_events WHERE type = 'interrupt.expired'"


def _close_underneath(dbapi: Any) -> None:
    """Close the driver's connection so that the next call on it fails like a lost one.

    SQLAlchemy's aiosqlite adapter turns ``commit()`` on a closed connection into a no-op,
    so there the ``sqlite3`` connection inside aiosqlite is closed instead (in aiosqlite's
    own thread): the adapter then meets sqlite3's "closed database" error as it would.
    """
    inner = getattr(getattr(dbapi, "_connection", None), "_connection", None)
    if type(inner).__module__ == "sqlite3":
        from sqlalchemy.util import await_only

        await_only(dbapi._connection._execute(inner.close))
        return
    dbapi.close()


class LostAtCommit:
    """Drop the connection at the commit of the ``at_batch``-th sweep batch (1-based)."""

    def __init__(
        self, target: Any, *, at_batch: int, server_commits: bool = True, expired_before: int = 0
    ) -> None:
        self.target = target
        self.at_batch = at_batch
        self.server_commits = server_commits
        self.batches = 0
        self.fired = False
        self._seen = expired_before
        event.listen(target, "commit", self._on_commit)

    def _on_commit(self, conn: Any) -> None:
        if self.fired:
            return
        dbapi = conn.connection.dbapi_connection
        cursor = dbapi.cursor()
        try:
            cursor.execute(COUNT_EXPIRED)
            expired = int(cursor.fetchone()[0])
        finally:
            cursor.close()
        if expired <= self._seen:  # a read or a bookkeeping transaction
            return
        self._seen = expired
        self.batches += 1
        if self.batches != self.at_batch:
            return
        self.fired = True
        if self.server_commits:
            dbapi.commit()
        _close_underneath(dbapi)

    def remove(self) -> None:
        event.remove(self.target, "commit", self._on_commit)

    def __enter__(self) -> LostAtCommit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class LostInsideBatch:
    """Drop the connection inside the ``at_batch``-th sweep batch, before its commit.

    Just before the batch updates the projection (its events are already inserted), the
    driver's connection is closed: the statement fails with the driver's disconnect error
    and the transaction never reaches COMMIT, so it is known not to have committed.
    """

    def __init__(self, engine: Any, *, at_batch: int) -> None:
        self.engine = engine
        self.at_batch = at_batch
        self.batches = 0
        self.fired = False
        event.listen(engine, "before_cursor_execute", self._before)
        # The executor is chosen once per connection: new connections see the listener
        # (and so run every statement where it can see them).
        engine.dispose()

    def _before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.fired or not statement.lstrip().startswith("UPDATE symfonic_threads"):
            return
        self.batches += 1
        if self.batches == self.at_batch:
            self.fired = True
            conn.connection.dbapi_connection.close()

    def remove(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)

    def __enter__(self) -> LostInsideBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
