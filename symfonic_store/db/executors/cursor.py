"""The fast path's machinery: each Core statement compiled ONCE per dialect instance into
the driver's SQL string, its parameters and the bind and result processors of its column
types (the JSON encoding and the UTC datetime conversion are those of the schema's
types), so a call costs a tuple (or dict) and a ``cursor.execute`` instead of
SQLAlchemy's per-execution work. Transactions are the driver's own BEGIN and COMMIT (the
backend's BEGIN statements), without SQLAlchemy's transaction bookkeeping. The SQL is
still the Core statement's: there is no second copy of it.

The compiled forms are kept by the statement's ``id()`` (a dict look-up of an int, no
per-call key work on the append path), and each entry keeps its statement alive: an id
is then never reused by another statement while an entry names it, so a statement built
per call (a scoped audit's) cannot be served another's SQL. The caches hold at most
:data:`CACHE_LIMIT` statements, the oldest dropped first (to be compiled again when next
used); a caller that builds statements per call memoises them per shape, so the store's
own never come near it.

The fast path is chosen only while nobody listens (see
:func:`symfonic_store.db.executor.choose_executor`). A statement that does go through
SQLAlchemy inside a fast-path transaction (the sweep's dynamic queries, say) joins that
transaction: the engines' ``begin`` hook sees it open (:func:`.base.in_driver_transaction`)
and sends no BEGIN.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.compiler import SQLCompiler

from ...compat import compiled_binds, dbapi_error, fire_commit, fire_rollback, invalidate_lost
from .base import ConnectionState, Executor, JsonText, state_of

if TYPE_CHECKING:
    from ..backends.base import Backend

Processor = Callable[[Any], Any] | None

CACHE_LIMIT = 512
"""The most statements each of an executor's caches keeps (see the module docstring)."""


@dataclass(slots=True)
class Prepared:
    """A Core statement compiled for one dialect, ready for the driver's cursor."""

    sql: str
    binds: tuple[tuple[str, str, Any, Processor, bool], ...]
    """``(name, placeholder name, default value, bind processor, skipped for None)``, in
    the driver's parameter order (for a positional paramstyle)."""
    named: bool
    """Does the driver take a dict by placeholder name (else a tuple in order)?"""
    columns: tuple[sa.types.TypeEngine[Any], ...]
    """The selected columns' types (none for a write)."""
    statement: sa.ClauseElement
    """The statement itself: while it is cached, its ``id()`` (the cache's key) is its own."""
    processed: tuple[tuple[int, Callable[[Any], Any]], ...] | None = None
    """``(column index, result processor)`` for the columns whose type converts values;
    made at the first fetch, from the driver's column type codes (PostgreSQL's numeric
    processors depend on them)."""


Positional = tuple[
    Prepared, tuple[int, ...] | None, tuple[tuple[int, Callable[[Any], Any], bool], ...]
]
"""See :meth:`CursorExecutor._positional_for`."""


class CursorExecutor(Executor):
    """The fast path's machinery: Core statements compiled once, run on the driver's cursor."""

    takes_json_text = True

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        dialect = self.dialect = backend.dialect
        # Keyed by id(stmt); each value holds its statement (Prepared.statement), so the
        # id cannot be another statement's while the entry lives.
        self._prepared: dict[tuple[int, tuple[str, ...] | None], Prepared] = {}
        self._positional: dict[tuple[int, Sequence[str]], Positional] = {}
        self._adding = threading.Lock()
        self._error = dialect.loaded_dbapi.Error

    def _remember(self, cache: dict[Any, Any], key: Any, value: Any) -> None:
        """``cache[key] = value``, the oldest entries dropped to stay within
        :data:`CACHE_LIMIT` (only when a statement is compiled: never on a hit)."""
        with self._adding:
            while len(cache) >= CACHE_LIMIT:
                del cache[next(iter(cache))]
            cache[key] = value

    def cache_sizes(self) -> tuple[int, int]:
        """How many entries each cache holds (compiled statements, and the positional
        bindings of :meth:`write_values`): at most :data:`CACHE_LIMIT` each."""
        return len(self._prepared), len(self._positional)

    def prepare(self, stmt: sa.ClauseElement, column_keys: Sequence[str] | None = None) -> Prepared:
        """Compile ``stmt`` once for this dialect (kept while it is among the last
        :data:`CACHE_LIMIT` statements compiled, with the statement itself)."""
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
        named, found = compiled_binds(compiled)
        binds = []
        for name, placeholder, bind in found:
            impl = bind.type.dialect_impl(dialect)
            processor: Processor = impl.bind_processor(dialect)
            if isinstance(bind.type, sa.JSON):
                processor = _keeping_json_text(processor)
            # Most processors give None for None, and are skipped for it; not a JSON
            # column that stores None as JSON null.
            skip_none = processor is None or processor(None) is None
            binds.append((name, placeholder, bind.value, processor, skip_none))
        columns = (
            tuple(c.type for c in stmt.selected_columns) if isinstance(stmt, sa.Select) else ()
        )
        prepared = Prepared(compiled.string, tuple(binds), named, columns, stmt)
        self._remember(self._prepared, key, prepared)
        return prepared

    def _processors(self, prepared: Prepared, description: Any) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
        dialect = self.dialect
        results = [
            column.dialect_impl(dialect).result_processor(
                dialect, description[i][1] if description else None
            )
            for i, column in enumerate(prepared.columns)
        ]
        prepared.processed = tuple((i, p) for i, p in enumerate(results) if p is not None)
        return prepared.processed

    @staticmethod
    def _args(prepared: Prepared, params: Mapping[str, Any]) -> Any:
        if prepared.named:
            named = {}
            for name, placeholder, default, processor, skip_none in prepared.binds:
                value = params.get(name, default)
                named[placeholder] = (
                    value if processor is None or (value is None and skip_none) else processor(value)
                )
            return named
        out = []
        for name, _, default, processor, skip_none in prepared.binds:
            value = params.get(name, default)
            out.append(
                value if processor is None or (value is None and skip_none) else processor(value)
            )
        return tuple(out)

    def _driver_error(self, conn: Connection, sql: str, args: Any, exc: Exception) -> Exception:
        """The driver's error as SQLAlchemy would raise it: wrapped, and, when it means
        the connection is gone, flagged so and the connection invalidated (the pool will
        not hand it out again, nor any other it opened to the lost server), as
        ``Connection.execute`` does."""
        dbapi = conn.connection.dbapi_connection if not conn.invalidated else None
        lost = self.dialect.is_disconnect(exc, dbapi, None)  # type: ignore[arg-type]
        error = dbapi_error(
            sql, args, exc, self._error, dialect=self.dialect, connection_invalidated=lost
        )
        if lost:
            self._drop_cursors(conn)
            invalidate_lost(conn, exc)
        return error

    @staticmethod
    def _drop_cursors(conn: Connection) -> None:
        # A cursor keeps its statement alive, and SQLite keeps a closed connection open
        # (with its locks) until every statement is finalized: let go of them now.
        state = state_of(conn)
        cached, state.cursors = state.cursors, None
        if cached is not None:
            for cursor in cached[1:]:
                try:
                    cursor.close()
                except Exception:  # the connection is gone: nothing left to release
                    pass

    @staticmethod
    def _cursors(conn: Connection) -> tuple[Any, Any]:
        """The driver connection's two cursors, made once: one for reads, one for writes
        (in psycopg's pipeline mode a write's result arrives on its cursor later, so a
        read must not share it)."""
        state = state_of(conn)
        dbapi = conn.connection.dbapi_connection
        cached = state.cursors
        if cached is None or cached[0] is not dbapi:
            assert dbapi is not None
            cached = state.cursors = (dbapi, dbapi.cursor(), dbapi.cursor())
        return cached[1], cached[2]

    def _run(self, conn: Connection, sql: str) -> None:
        """Transaction control straight on the driver, its errors wrapped like SQLAlchemy's."""
        try:
            # _cursors() inside the try: on a connection that died it raises the
            # driver's error, which must reach translate_errors wrapped like any other.
            self._cursors(conn)[1].execute(sql)
        except self._error as exc:
            raise self._driver_error(conn, sql, (), exc) from exc

    def fetch(
        self, conn: Connection, stmt: sa.Select[Any], params: Mapping[str, Any]
    ) -> Sequence[Sequence[Any]]:
        prepared = self.prepare(stmt)
        args = self._args(prepared, params)
        try:
            cursor = self._cursors(conn)[0]
            cursor.execute(prepared.sql, args)
            raw = cursor.fetchall()
            processed = prepared.processed
            if processed is None:
                processed = self._processors(prepared, cursor.description)
        except self._error as exc:
            raise self._driver_error(conn, prepared.sql, args, exc) from exc
        if not processed:
            return cast("list[Sequence[Any]]", raw)
        rows: list[Sequence[Any]] = []
        for row in raw:
            values = list(row)
            for i, processor in processed:
                values[i] = processor(values[i])
            rows.append(values)
        return rows

    # Deliberately repeated: Executor.write's signature, overridden.
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
        try:
            cursor = self._cursors(conn)[1]
            if len(many) == 1:
                cursor.execute(prepared.sql, many[0])
            elif state_of(conn).pipeline is not None:
                # executemany() would open a pipeline of its own and sync it: in the
                # open pipeline, one execute per row travels with the rest.
                for args in many:
                    cursor.execute(prepared.sql, args)
            else:
                cursor.executemany(prepared.sql, many)
        except self._error as exc:
            raise self._driver_error(conn, prepared.sql, many, exc) from exc

    def write_values(
        self,
        conn: Connection,
        stmt: sa.Executable,
        keys: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> int:
        # The rows come as values in ``keys`` order: no dict per row, and only the binds
        # whose type converts a value are looked at.
        if not rows:
            return 0
        found = self._positional.get((id(stmt), keys))
        if found is None:
            found = self._positional_for(stmt, keys)
        prepared, order, processors = found
        if order is None:
            return super().write_values(conn, stmt, keys, rows)
        many = []
        for row in rows:
            args = [row[i] for i in order] if order else list(row)
            for i, processor, skip_none in processors:
                value = args[i]
                if value is not None or not skip_none:
                    args[i] = processor(value)
            many.append(args)
        try:
            cursor = self._cursors(conn)[1]
            if len(many) == 1:
                cursor.execute(prepared.sql, many[0])
            elif state_of(conn).pipeline is not None:
                for args in many:  # as in write(): one execute per row in the pipeline
                    cursor.execute(prepared.sql, args)
            else:
                cursor.executemany(prepared.sql, many)
            return int(cursor.rowcount)
        except self._error as exc:
            raise self._driver_error(conn, prepared.sql, many, exc) from exc

    def _positional_for(self, stmt: sa.Executable, keys: Sequence[str]) -> Positional:
        """How :meth:`write_values` binds ``keys`` into ``stmt``: the prepared statement
        (which holds ``stmt``: see :meth:`prepare`), each bind's index among ``keys``
        (empty: the binds are the keys in order; None: the driver takes named
        parameters, and :meth:`write_values` makes dicts), and ``(bind index, bind
        processor, skipped for None)`` of the binds that convert values."""
        insert = isinstance(stmt, sa.Insert)
        prepared = self.prepare(cast(sa.ClauseElement, stmt), keys if insert else None)
        found: Positional = (prepared, None, ())
        if not prepared.named:
            index = {key: i for i, key in enumerate(keys)}
            missing = [name for name, *_ in prepared.binds if name not in index]
            assert not missing, f"binds {missing} are not among the keys given"
            order = tuple(index[name] for name, *_ in prepared.binds)
            if order == tuple(range(len(keys))):
                order = ()
            processors = tuple(
                (i, processor, skip_none)
                for i, (_, _, _, processor, skip_none) in enumerate(prepared.binds)
                if processor is not None
            )
            found = (prepared, order, processors)
        self._remember(self._positional, (id(stmt), tuple(keys)), found)
        return found

    def write_counted(self, conn: Connection, stmt: sa.Executable, row: Mapping[str, Any]) -> int:
        prepared = self.prepare(cast(sa.ClauseElement, stmt))
        args = self._args(prepared, row)
        try:
            cursor = self._cursors(conn)[1]
            cursor.execute(prepared.sql, args)
            return int(cursor.rowcount)
        except self._error as exc:
            raise self._driver_error(conn, prepared.sql, args, exc) from exc

    # --- transactions on the driver ---------------------------------------------
    #
    # SQLAlchemy's ``commit`` and ``rollback`` events still fire, just before the driver
    # is told (listeners that watch transactions, e.g. fault injection, keep working);
    # what the fast path skips is SQLAlchemy's bookkeeping around them. When a statement
    # went through SQLAlchemy meanwhile, SQLAlchemy holds the transaction too and ends
    # it itself, through the driver, which then has nothing left to do.

    def _mark_write(self, conn: Connection, state: ConnectionState) -> None:
        # Listeners (and the engines' BEGIN for a statement through SQLAlchemy) read the
        # connection's symfonic_write option, as on the Core path; set only on a change.
        if state.write_option is not True:
            conn.execution_options(symfonic_write=True)
            state.write_option = True

    def _commit_on_driver(self, conn: Connection) -> None:
        if conn.in_transaction():
            try:
                conn.commit()  # SQLAlchemy joined: its commit() is the driver's, events and all
            except sa.exc.DBAPIError as exc:
                if exc.connection_invalidated:
                    self._drop_cursors(conn)
                raise
            return
        fire_commit(conn)
        dbapi = conn.connection.dbapi_connection
        try:
            self.dialect.do_commit(dbapi)  # type: ignore[arg-type]
        except self._error as exc:
            raise self._driver_error(conn, "COMMIT", (), exc) from exc

    def _rollback_on_driver(self, conn: Connection) -> None:
        if conn.invalidated:
            self._drop_cursors(conn)
        if conn.in_transaction():
            conn.rollback()
            return
        if conn.invalidated:
            return  # the connection is gone: the server rolled the transaction back
        fire_rollback(conn)
        try:
            self.dialect.do_rollback(conn.connection.dbapi_connection)  # type: ignore[arg-type]
        except self._error:
            pass  # the connection is gone too: the server rolls the transaction back


def _keeping_json_text(processor: Processor) -> Processor:
    """A JSON column's bind processor that binds :class:`JsonText` as it is."""

    def process(value: Any) -> Any:
        if type(value) is JsonText:
            return str(value)
        return value if processor is None else processor(value)

    return process


class SQLiteCursorExecutor(CursorExecutor):
    """The fast path on SQLite: its backend's BEGIN (IMMEDIATE for a write) and COMMIT
    on the driver."""

    name = "sqlite-cursor"
    reads_outside_transaction = True

    def begin(self, conn: Connection, *, write: bool, appends: bool = True) -> Any:
        state = state_of(conn)
        if write:
            self._mark_write(conn, state)
        for statement in self.backend.begin_statements(None, write=write, appends=appends):
            self._run(conn, statement)  # BEGIN IMMEDIATE for a write: the write lock
        state.tx = "write" if write else "read"
        return None

    def commit(self, conn: Connection, tx: Any) -> None:
        self._commit_on_driver(conn)  # a failure leaves it open: rollback() ends it
        state_of(conn).tx = None

    def rollback(self, conn: Connection, tx: Any) -> None:
        state = state_of(conn)
        if state.tx is not None:
            state.tx = None
            self._rollback_on_driver(conn)
