"""The executor's contract and its Core form: how the store's statements and transactions
run on one connection, and what the store keeps on that connection.

Every statement in :mod:`symfonic_store.db.statements` is SQLAlchemy Core and
backend-blind; it runs through the :class:`Executor` of its connection, chosen once per
``Connection`` by :func:`symfonic_store.db.executor.executor_for` from the connection's
backend (:mod:`symfonic_store.db.backends`):

- :class:`CoreExecutor` runs statements through ``Connection.execute`` and transactions
  through ``Connection.begin``: every statement is visible to SQLAlchemy's events
  (tracing, logging), and the BEGIN is the one the backend's engine hook sends.
- The fast paths (:mod:`.cursor`, :mod:`.postgres`) compile each Core statement once and
  run it on the driver's cursor, with the driver's own BEGIN and COMMIT.

What differs per backend (the BEGIN statements, the locks, gap-safe reads) an executor
asks its :attr:`Executor.backend`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from ..backends.base import Backend

class ConnectionState:
    """What the store keeps on a SQLAlchemy ``Connection`` (an attribute of the object, not
    its ``info``: that belongs to the DBAPI connection, and cannot be read once the
    connection is invalidated, which is exactly when a rollback must still find it)."""

    __slots__ = ("cursors", "executor", "pipeline", "tx", "write_option")

    def __init__(self) -> None:
        self.executor: Executor | None = None
        self.write_option: bool | None = None
        """The ``symfonic_write`` execution option last set on the connection."""
        self.tx: str | None = None
        """A fast-path transaction is open: "read" or "write"."""
        self.pipeline: Any = None
        """psycopg's pipeline of the open write transaction."""
        self.cursors: tuple[Any, Any, Any] | None = None
        """``(driver connection, read cursor, write cursor)``."""


_STATE = "_symfonic_state"


def state_of(conn: Connection) -> ConnectionState:
    state: ConnectionState | None = getattr(conn, _STATE, None)
    if state is None:
        state = ConnectionState()
        setattr(conn, _STATE, state)
    return state


def in_driver_transaction(conn: Connection) -> bool:
    """Is a fast-path transaction (the driver's own BEGIN) open on ``conn``?"""
    state: ConnectionState | None = getattr(conn, _STATE, None)
    return state is not None and state.tx is not None


class JsonText(str):
    """JSON already encoded by the store (the canonical text its hash covers).

    Executors that say :attr:`Executor.takes_json_text` bind it as it is instead of
    encoding the value again; the others are handed the decoded value.
    """

    __slots__ = ()


class Executor:
    """Runs the store's Core statements and transactions on a connection."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        """The backend of the engine this executor serves (it made the executor)."""

    @property
    def reads_below_horizon(self) -> bool:
        """See :attr:`~symfonic_store.db.backends.base.Backend.reads_below_horizon`."""
        return self.backend.reads_below_horizon

    name: ClassVar[str] = "core"
    reads_outside_transaction: ClassVar[bool] = False
    """May a single-statement read skip BEGIN/COMMIT (each statement atomic on its own)?"""
    takes_json_text: ClassVar[bool] = False
    """Does :meth:`write` bind a :class:`JsonText` value of a JSON column as it is?"""

    def fetch(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        """Rows of a SELECT, with the column types' result processing."""
        raise NotImplementedError

    # Deliberately repeated: the signature every executor's write() overrides (CoreExecutor,
    # cursor.py).
    def write(
        self,
        conn: Connection,
        stmt: sa.Executable,
        rows: Sequence[Mapping[str, Any]],
        column_keys: Sequence[str] | None = None,
    ) -> None:
        """Run an INSERT or UPDATE once per row (``column_keys``: the INSERT's columns)."""
        raise NotImplementedError

    def write_counted(self, conn: Connection, stmt: sa.Executable, row: Mapping[str, Any]) -> int:
        """Run an UPDATE for one row; the number of rows it changed."""
        raise NotImplementedError

    def write_values(
        self,
        conn: Connection,
        stmt: sa.Executable,
        keys: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> int:
        """Run an INSERT or UPDATE once per row, each row its values in ``keys`` order
        (an INSERT's columns, or an UPDATE's bind names); the rows it changed. The fast
        paths bind them without a dict per row."""
        dicts = [dict(zip(keys, row, strict=True)) for row in rows]
        if len(dicts) == 1 and not isinstance(stmt, sa.Insert):
            return self.write_counted(conn, stmt, dicts[0])
        self.write(conn, stmt, dicts, keys if isinstance(stmt, sa.Insert) else None)
        return len(dicts)

    def call_once(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any], phase: Any
    ) -> Any:
        """The one value of ``stmt`` (a call of a function that appends), committed: here
        in a write transaction of its own; ``phase.committing`` is set from the moment an
        error may mean it committed (a :class:`~symfonic_store.db.translate.WritePhase`)."""
        tx = self.begin(conn, write=True)
        try:
            value = self.fetch(conn, stmt, params)[0][0]
            phase.committing = True
            self.commit(conn, tx)
        except BaseException:
            self.rollback(conn, tx)
            raise
        return value

    def begin(self, conn: Connection, *, write: bool, appends: bool = True) -> Any:
        """Start a transaction (a write one takes the backend's write lock); returns what
        :meth:`commit` and :meth:`rollback` need.

        ``appends=False`` promises that the transaction inserts no events: on PostgreSQL
        it then does not take the writers' lock at its BEGIN (checkpoints and archive
        removals wait for the writers instead, which a holder could not do without a
        deadlock), and :meth:`check_writer` refuses an insert in it.
        """
        conn.execution_options(symfonic_write=write, symfonic_appends=appends)
        return conn.begin()

    def commit(self, conn: Connection, tx: Any) -> None:
        tx.commit()

    def rollback(self, conn: Connection, tx: Any) -> None:
        """End the transaction without its changes; safe after a failed commit."""
        if tx.is_active:
            tx.rollback()

    # What the backend decides, asked where the store has its executor at hand.

    def check_writer(self, conn: Connection) -> None:
        """Refuse to insert events in a transaction the backend cannot keep gap-safe."""
        self.backend.check_writer(conn)

    def lock_setup(self, conn: Connection) -> None:
        """Keep two concurrent ``setup()`` calls from both creating the tables."""
        self.backend.lock_setup(conn)

    def lock_evidence(self, conn: Connection) -> None:
        """Serialise checkpoints and archive removals until commit (see the backend)."""
        self.backend.lock_evidence(conn)

    def writers_shut_out(self, conn: Connection) -> AbstractContextManager[None]:
        """See :meth:`~symfonic_store.db.backends.base.Backend.writers_shut_out`."""
        return self.backend.writers_shut_out(conn)


class CoreExecutor(Executor):
    """Every statement through ``Connection.execute`` (visible to SQLAlchemy's events)."""

    def fetch(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        return conn.execute(stmt, dict(params)).all()

    # Deliberately repeated: Executor.write's signature, overridden.
    def write(
        self,
        conn: Connection,
        stmt: sa.Executable,
        rows: Sequence[Mapping[str, Any]],
        column_keys: Sequence[str] | None = None,
    ) -> None:
        if rows:
            conn.execute(stmt, [dict(r) for r in rows])

    def write_counted(self, conn: Connection, stmt: sa.Executable, row: Mapping[str, Any]) -> int:
        return int(conn.execute(stmt, dict(row)).rowcount)


class NeedsDatabase(Exception):
    """A statement was asked for while a write was being decided in Python only."""


class _NoStatements(Executor):
    """Stands in for a connection's executor while a write is decided in Python only
    (the single-append path on PostgreSQL): any statement means the decision needs the
    database, and the caller takes the transactional path instead."""

    def fetch(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        raise NeedsDatabase("a read")

    # Deliberately repeated: Executor.write's signature, overridden.
    def write(
        self,
        conn: Connection,
        stmt: sa.Executable,
        rows: Sequence[Mapping[str, Any]],
        column_keys: Sequence[str] | None = None,
    ) -> None:
        raise NeedsDatabase("a write")


@contextmanager
def refusing_statements(conn: Connection) -> Iterator[None]:
    """Within: the store's statements on ``conn`` raise :class:`NeedsDatabase`."""
    state = state_of(conn)
    kept = state.executor
    assert kept is not None
    state.executor = _NoStatements(kept.backend)
    try:
        yield
    finally:
        state.executor = kept
