"""How the store's statements run on one connection: the one place that knows the backend.

Every statement in :mod:`symfonic_store.db.statements` is SQLAlchemy Core and
backend-blind; it runs through the :class:`Executor` of its connection, chosen once per
DBAPI connection by :func:`executor_for`:

- :class:`CoreExecutor` runs statements through ``Connection.execute``: every
  statement is visible to SQLAlchemy's events (tracing, logging). PostgreSQL always
  uses it, and so does SQLite when the fast path is switched off.
- :class:`SQLiteCursorExecutor`, the fast path: each Core statement is compiled ONCE per
  dialect instance into the driver's SQL string, its parameter order and the bind and
  result processors of its column types (the JSON encoding and the UTC datetime
  conversion are those of the schema's types), so a call costs a tuple and a
  ``cursor.execute`` instead of SQLAlchemy's per-execution work. The SQL is still the
  Core statement's: there is no second copy of it.

The fast path is chosen only for SQLite, and only while nobody listens: an engine with
``before_cursor_execute``/``after_cursor_execute`` listeners, or created with the
execution option ``symfonic_fast_path=False``, gets the Core executor, so nothing the
store runs is hidden from instrumentation.

The backend's own behaviour lives here too: the advisory locks PostgreSQL needs, and
whether single-statement reads may run outside a transaction.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

FAST_PATH_OPTION = "symfonic_fast_path"
"""Engine execution option: ``False`` runs every statement through SQLAlchemy Core."""

SETUP_LOCK_KEY = 0x53594D47  # "SYMG": two processes running setup() at once
POSITION_LOCK_KEY = 0x53594D46  # "SYMF": one position lock per schema (I11)
EVIDENCE_LOCK_KEY = 0x53594D45  # "SYME": checkpoints and archive removals, per schema

_LOCK_POSITIONS = sa.select(
    sa.func.pg_advisory_xact_lock(
        sa.literal(POSITION_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.func.current_schema())
    )
)
_LOCK_SETUP = sa.select(sa.func.pg_advisory_xact_lock(SETUP_LOCK_KEY))
_LOCK_EVIDENCE = sa.select(
    sa.func.pg_advisory_xact_lock(
        sa.literal(EVIDENCE_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.func.current_schema())
    )
)

Processor = Callable[[Any], Any] | None


class Executor:
    """Runs the store's Core statements on a connection; subclasses choose how."""

    name: ClassVar[str] = "core"
    reads_outside_transaction: ClassVar[bool] = False
    """May a single-statement read skip BEGIN/COMMIT (each statement atomic on its own)?"""

    def fetch(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        """Rows of a SELECT, with the column types' result processing."""
        raise NotImplementedError

    def write(
        self,
        conn: Connection,
        stmt: sa.Executable,
        rows: Sequence[Mapping[str, Any]],
        column_keys: Sequence[str] | None = None,
    ) -> None:
        """Run an INSERT or UPDATE once per row (``column_keys``: the INSERT's columns)."""
        raise NotImplementedError

    def lock_positions(self, conn: Connection) -> None:
        """Serialise position allocation until commit, where the backend needs it."""

    def lock_setup(self, conn: Connection) -> None:
        """Keep two concurrent ``setup()`` calls from both creating the tables."""

    def lock_evidence(self, conn: Connection) -> None:
        """Serialise checkpoints and archive removals until commit, where the backend needs
        it (SQLite's write transaction already holds the database lock)."""


class CoreExecutor(Executor):
    """Every statement through ``Connection.execute`` (visible to SQLAlchemy's events)."""

    def fetch(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        return conn.execute(stmt, dict(params)).all()

    def write(
        self,
        conn: Connection,
        stmt: sa.Executable,
        rows: Sequence[Mapping[str, Any]],
        column_keys: Sequence[str] | None = None,
    ) -> None:
        if rows:
            conn.execute(stmt, [dict(r) for r in rows])


class PostgresExecutor(CoreExecutor):
    """Core statements, plus PostgreSQL's advisory locks."""

    name = "postgresql"

    def lock_positions(self, conn: Connection) -> None:
        conn.execute(_LOCK_POSITIONS)

    def lock_setup(self, conn: Connection) -> None:
        conn.execute(_LOCK_SETUP)

    def lock_evidence(self, conn: Connection) -> None:
        conn.execute(_LOCK_EVIDENCE)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A Core statement compiled for one dialect, ready for the driver's cursor."""

    sql: str
    binds: tuple[tuple[str, Any, Processor], ...]
    """``(name, default value, bind processor)`` in the driver's parameter order."""
    processed: tuple[tuple[int, Callable[[Any], Any]], ...]
    """``(column index, result processor)`` for the columns whose type converts values."""


class SQLiteCursorExecutor(Executor):
    """The fast path: prepared statements on the SQLite driver's cursor (one per dialect)."""

    name = "sqlite-cursor"
    reads_outside_transaction = True

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._prepared: dict[tuple[int, tuple[str, ...] | None], Prepared] = {}
        self._error = dialect.loaded_dbapi.Error

    def prepare(self, stmt: sa.ClauseElement, column_keys: Sequence[str] | None = None) -> Prepared:
        """Compile ``stmt`` once for this dialect (the statements are module constants)."""
        key = (id(stmt), None if column_keys is None else tuple(column_keys))
        prepared = self._prepared.get(key)
        if prepared is not None:
            return prepared
        dialect = self.dialect
        compiled = cast(
            SQLCompiler,
            stmt.compile(
                dialect=dialect, column_keys=list(column_keys) if column_keys is not None else None
            ),
        )
        assert compiled.positiontup is not None, "the fast path needs a positional paramstyle"
        binds = []
        for name in compiled.positiontup:
            bind = compiled.binds[name]
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            binds.append((name, bind.value, processor))
        results: list[Processor] = []
        if isinstance(stmt, sa.Select):
            results = [
                c.type.dialect_impl(dialect).result_processor(dialect, None)
                for c in stmt.selected_columns
            ]
        processed = tuple((i, p) for i, p in enumerate(results) if p is not None)
        prepared = Prepared(compiled.string, tuple(binds), processed)
        self._prepared[key] = prepared
        return prepared

    @staticmethod
    def _args(prepared: Prepared, params: Mapping[str, Any]) -> tuple[Any, ...]:
        out = []
        for name, default, processor in prepared.binds:
            value = params.get(name, default)
            out.append(value if processor is None else processor(value))
        return tuple(out)

    def _driver_error(self, prepared: Prepared, args: Any, exc: Exception) -> Exception:
        return sa.exc.DBAPIError.instance(
            prepared.sql, args, exc, self._error, dialect=self.dialect
        )

    def fetch(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        prepared = self.prepare(stmt)
        args = self._args(prepared, params)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(prepared.sql, args)
            raw = cursor.fetchall()
        except self._error as exc:
            raise self._driver_error(prepared, args, exc) from exc
        finally:
            cursor.close()
        processed = prepared.processed
        if not processed:
            return cast("list[Sequence[Any]]", raw)
        rows: list[Sequence[Any]] = []
        for row in raw:
            values = list(row)
            for i, processor in processed:
                values[i] = processor(values[i])
            rows.append(values)
        return rows

    def write(
        self,
        conn: Connection,
        stmt: sa.Executable,
        rows: Sequence[Mapping[str, Any]],
        column_keys: Sequence[str] | None = None,
    ) -> None:
        if not rows:
            return
        prepared = self.prepare(cast(sa.ClauseElement, stmt), column_keys)
        many = [self._args(prepared, row) for row in rows]
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            if len(many) == 1:
                cursor.execute(prepared.sql, many[0])
            else:
                cursor.executemany(prepared.sql, many)
        except self._error as exc:
            raise self._driver_error(prepared, many, exc) from exc
        finally:
            cursor.close()


_CORE = CoreExecutor()
_POSTGRES = PostgresExecutor()
_FAST: weakref.WeakKeyDictionary[Dialect, SQLiteCursorExecutor] = weakref.WeakKeyDictionary()
_INFO_KEY = "symfonic_executor"


def _listened(conn: Connection) -> bool:
    dispatch = conn.engine.dispatch
    return bool(dispatch.before_cursor_execute) or bool(dispatch.after_cursor_execute)


def choose_executor(conn: Connection) -> Executor:
    """The executor for ``conn``'s backend and settings (see the module docstring)."""
    dialect = conn.dialect
    if dialect.name == "postgresql":
        return _POSTGRES
    if (
        dialect.name == "sqlite"
        and conn.engine.get_execution_options().get(FAST_PATH_OPTION, True)
        and not _listened(conn)
    ):
        fast = _FAST.get(dialect)
        if fast is None:
            fast = _FAST[dialect] = SQLiteCursorExecutor(dialect)
        return fast
    return _CORE


def executor_for(conn: Connection) -> Executor:
    """The executor of ``conn``, chosen once per DBAPI connection and kept in its info."""
    info = conn.info
    executor = info.get(_INFO_KEY)
    if executor is None:
        executor = info[_INFO_KEY] = choose_executor(conn)
    return cast(Executor, executor)
