"""How the store's statements run on one connection: the one place that knows the backend.

Every statement in :mod:`symfonic_store.db.statements` is SQLAlchemy Core and
backend-blind; it runs through the :class:`Executor` of its connection, chosen once per
DBAPI connection by :func:`executor_for`:

- :class:`CoreExecutor` runs statements through ``Connection.execute`` and transactions
  through ``Connection.begin``: every statement is visible to SQLAlchemy's events
  (tracing, logging). It is used whenever the fast path is switched off, and for the
  asyncio PostgreSQL driver (:class:`PostgresExecutor`).
- The fast paths, :class:`SQLiteCursorExecutor` and :class:`PostgresCursorExecutor`:
  each Core statement is compiled ONCE per dialect instance into the driver's SQL
  string, its parameters and the bind and result processors of its column types (the
  JSON encoding and the UTC datetime conversion are those of the schema's types), so a
  call costs a tuple (or dict) and a ``cursor.execute`` instead of SQLAlchemy's
  per-execution work. Transactions are the driver's own BEGIN and COMMIT, without
  SQLAlchemy's transaction bookkeeping. The SQL is still the Core statement's: there is
  no second copy of it. On PostgreSQL a write transaction runs in psycopg's pipeline
  mode, so the BEGIN travels with the first read and the writes with the COMMIT: an
  append costs two or three round trips, not one per statement.

The fast path is chosen only while nobody listens: an engine with
``before_cursor_execute``/``after_cursor_execute`` listeners, or created with the
execution option ``symfonic_fast_path=False``, gets the Core executor, so nothing the
store runs is hidden from instrumentation.

A statement that does go through SQLAlchemy inside a fast-path transaction (the sweep's
dynamic queries, say) joins that transaction: the engines' ``begin`` listener sees the
transaction open (:func:`in_driver_transaction`), sends no BEGIN, and on PostgreSQL
first ends the pipeline, so SQLAlchemy gets its results at once.

The backend's own behaviour lives here too: the advisory locks PostgreSQL needs, how
readers of the whole log stay gap-safe (I11), and whether single-statement reads may run
outside a transaction.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

FAST_PATH_OPTION = "symfonic_fast_path"
"""Engine execution option: ``False`` runs every statement through SQLAlchemy Core."""

SETUP_LOCK_KEY = 0x53594D47  # "SYMG": two processes running setup() at once
EVIDENCE_LOCK_KEY = 0x53594D45  # "SYME": checkpoints and archive removals, per schema
WRITERS_LOCK_KEY = 0x53594D46  # "SYMF": held SHARED by every write transaction (I11)
"""With ``hashtext(current_schema())`` the key of the lock every PostgreSQL write
transaction takes in SHARE mode at its BEGIN, before it has a transaction id (see
:mod:`symfonic_store.db.engines`). Shared holders never wait on each other, so writers
run in parallel; the lock only tells readers which transactions may still insert events
into this schema (:func:`symfonic_store.db.statements.read_horizon`). Older releases took
it EXCLUSIVE (one writer at a time), so during an upgrade the two never interleave."""

WRITERS_LOCK = (
    f"SELECT pg_advisory_xact_lock_shared({WRITERS_LOCK_KEY}, hashtext(current_schema()))"
)
"""The writers' lock, without parameters (so it may share a simple query with BEGIN)."""

class _State:
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


def state_of(conn: Connection) -> _State:
    state: _State | None = getattr(conn, _STATE, None)
    if state is None:
        state = _State()
        setattr(conn, _STATE, state)
    return state


EVIDENCE_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
"""The BEGIN of a transaction begun with ``appends=False`` (a checkpoint, an archive
removal): each statement its own snapshot, so what it reads after waiting for the
writers includes what they committed meanwhile (see :func:`_writers_shut_out`)."""


def postgres_begin(dbapi_connection: Any, *, write: bool, appends: bool) -> tuple[str, ...]:
    """The statements that start a PostgreSQL transaction of the store (the caller sends
    them in one round trip, or queues them in a pipeline):

    - a write that may append: BEGIN, then the writers' lock in SHARE mode, before the
      transaction has an id (I11);
    - a write with ``appends=False`` (a checkpoint, an archive removal): not among the
      writers, and :data:`EVIDENCE_BEGIN` whatever the caller's level;
    - anything else: BEGIN, at the isolation level psycopg was told (by the caller's
      engine or its ``execution_options``): the store sends BEGIN itself, so psycopg
      would not.
    """
    if write and not appends:
        return (EVIDENCE_BEGIN,)
    # The asyncio engine's is SQLAlchemy's adapter around psycopg's AsyncConnection.
    level = getattr(dbapi_connection, "driver_connection", dbapi_connection).isolation_level
    begin = "BEGIN" if level is None else "BEGIN ISOLATION LEVEL " + str(level.name).replace("_", " ")
    return (begin, WRITERS_LOCK) if write else (begin,)


def in_driver_transaction(conn: Connection) -> bool:
    """Is a fast-path transaction (the driver's own BEGIN) open on ``conn``?"""
    state: _State | None = getattr(conn, _STATE, None)
    return state is not None and state.tx is not None

_LOCK_SETUP = sa.select(sa.func.pg_advisory_xact_lock(SETUP_LOCK_KEY))
WRITERS_WAIT_TIMEOUT = "10s"
"""How long a checkpoint or an archive removal waits for the write transactions in
flight (each of the store's own lasts milliseconds). Meanwhile new appends queue behind
it, so the wait is bounded: past it the checkpoint is refused, and appends go on."""
@contextmanager
def _writers_shut_out(conn: Connection) -> Iterator[None]:
    if conn.get_execution_options().get("symfonic_appends", True) and state_of(conn).tx != "write, no events":
        raise AssertionError("writers_shut_out needs a transaction begun with appends=False")
    isolation = conn.exec_driver_sql("SELECT current_setting('transaction_isolation')").scalar_one()
    if isolation != "read committed":  # one snapshot for the whole transaction
        raise AssertionError("writers_shut_out needs a READ COMMITTED transaction")
    previous = conn.exec_driver_sql("SELECT current_setting('lock_timeout')").scalar_one()
    try:
        conn.exec_driver_sql(
            f"SELECT set_config('lock_timeout', '{WRITERS_WAIT_TIMEOUT}', true), "
            f"pg_advisory_lock({WRITERS_LOCK_KEY}, hashtext(current_schema()))"
        )
    except sa.exc.DBAPIError as exc:
        # lock_not_available: our lock_timeout; query_canceled: a shorter statement_timeout.
        if getattr(exc.orig, "sqlstate", None) in ("55P03", "57014"):
            raise WritersBusyError(
                f"a write transaction of this store stayed open longer than the wait for "
                f"the writers ({WRITERS_WAIT_TIMEOUT}, or the session's shorter "
                "statement_timeout; see pg_stat_activity): nothing was signed; try again"
            ) from None
        raise
    failed: BaseException | None = None
    try:
        conn.execute(_SET_LOCK_TIMEOUT, {"value": previous})
        yield  # a later statement: a newer snapshot, taken with every writer shut out
    except BaseException as exc:
        failed = exc
        raise
    finally:
        try:
            conn.exec_driver_sql(_UNLOCK_WRITERS)
        except BaseException:
            # A session lock outlives the transaction: never hand the connection back
            # to the pool holding it (closing it ends the session, and the lock). The
            # error worth reporting is the first one (an aborted transaction fails the
            # unlock too).
            if not conn.invalidated:
                conn.invalidate()
            if failed is None:
                raise


_SET_LOCK_TIMEOUT = sa.select(sa.func.set_config("lock_timeout", sa.bindparam("value"), True))
_UNLOCK_WRITERS = f"SELECT pg_advisory_unlock({WRITERS_LOCK_KEY}, hashtext(current_schema()))"


class WritersBusyError(Exception):
    """The writers' lock could not be taken EXCLUSIVE within the wait (the caller says
    what it means for its operation)."""


_LOCK_EVIDENCE = sa.select(
    sa.func.pg_advisory_xact_lock(
        sa.literal(EVIDENCE_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.func.current_schema())
    )
)

Processor = Callable[[Any], Any] | None


class JsonText(str):
    """JSON already encoded by the store (the canonical text its hash covers).

    Executors that say :attr:`Executor.takes_json_text` bind it as it is instead of
    encoding the value again; the others are handed the decoded value.
    """

    __slots__ = ()


class Executor:
    """Runs the store's Core statements and transactions on a connection."""

    name: ClassVar[str] = "core"
    reads_outside_transaction: ClassVar[bool] = False
    """May a single-statement read skip BEGIN/COMMIT (each statement atomic on its own)?"""
    reads_below_horizon: ClassVar[bool] = False
    """Must readers of the whole log stay below the writers' horizon (I11)? True where
    positions can commit out of order (PostgreSQL's writers run in parallel); SQLite has
    one writer at a time, so its positions commit in order and position order is safe."""
    takes_json_text: ClassVar[bool] = False
    """Does :meth:`write` bind a :class:`JsonText` value of a JSON column as it is?"""

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

    def check_writer(self, conn: Connection) -> None:
        """Refuse to insert events in a transaction the backend cannot keep gap-safe."""

    def lock_setup(self, conn: Connection) -> None:
        """Keep two concurrent ``setup()`` calls from both creating the tables."""

    def lock_evidence(self, conn: Connection) -> None:
        """Serialise checkpoints and archive removals until commit, where the backend needs
        it (SQLite's write transaction already holds the database lock)."""

    def writers_shut_out(self, conn: Connection) -> AbstractContextManager[None]:
        """While inside, no write transaction is in flight and none can start, so the
        log's last position read inside is final: no event can commit later below it.

        SQLite: its write transaction is the only writer already. PostgreSQL: the writers'
        lock taken EXCLUSIVE at session level (it waits for every write transaction in
        flight, at most :data:`WRITERS_WAIT_TIMEOUT`, then raises
        :class:`WritersBusyError`; new appends queue meanwhile), let go on the way out;
        only from a transaction begun with ``appends=False``, which holds no share of it.
        """
        return nullcontext()


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


def _check_postgres_writer(conn: Connection) -> None:
    # Readers trust that every transaction inserting events took the writers' lock at
    # its BEGIN, before it had a transaction id: the fast path's BEGIN, or the one the
    # store's engines send for its write transactions (symfonic_write).
    # A transaction begun with appends=False did not take it, and must not insert.
    tx = state_of(conn).tx
    if tx is not None:
        ok = tx == "write"
    else:
        options = conn.get_execution_options()
        ok = bool(
            getattr(conn.engine, "_symfonic_postgres", False)
            and conn.in_transaction()
            and options.get("symfonic_write")
            and options.get("symfonic_appends", True)
        )
    if ok and tx is None:
        # The server's word, not SQLAlchemy's: a BEGIN was sent (not an AUTOCOMMIT no-op).
        dbapi = conn.connection.dbapi_connection
        ok = dbapi is not None and dbapi.info.transaction_status != 0  # not IDLE
    if not ok:
        raise AssertionError(
            "events must be appended in a write transaction of an engine prepared by "
            "symfonic_store.db.engines (run_write on a store's engine, appends=True)"
        )


class PostgresExecutor(CoreExecutor):
    """Core statements, plus PostgreSQL's advisory locks and gap-safe reads."""

    name = "postgresql"
    reads_below_horizon = True

    def check_writer(self, conn: Connection) -> None:
        _check_postgres_writer(conn)

    def lock_setup(self, conn: Connection) -> None:
        conn.execute(_LOCK_SETUP)

    def lock_evidence(self, conn: Connection) -> None:
        conn.execute(_LOCK_EVIDENCE)

    def writers_shut_out(self, conn: Connection) -> AbstractContextManager[None]:
        return _writers_shut_out(conn)


@dataclass(slots=True)
class Prepared:
    """A Core statement compiled for one dialect, ready for the driver's cursor."""

    sql: str
    binds: tuple[tuple[str, str, Any, Processor], ...]
    """``(name, placeholder name, default value, bind processor)``, in the driver's
    parameter order (for a positional paramstyle)."""
    named: bool
    """Does the driver take a dict by placeholder name (else a tuple in order)?"""
    columns: tuple[sa.types.TypeEngine[Any], ...]
    """The selected columns' types (none for a write)."""
    processed: tuple[tuple[int, Callable[[Any], Any]], ...] | None = None
    """``(column index, result processor)`` for the columns whose type converts values;
    made at the first fetch, from the driver's column type codes (PostgreSQL's numeric
    processors depend on them)."""


class CursorExecutor(Executor):
    """The fast path's machinery: Core statements compiled once, run on the driver's cursor."""

    takes_json_text = True

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
        named = compiled.positiontup is None
        names = list(compiled.binds) if named else list(compiled.positiontup or ())
        escaped: Mapping[str, str] = compiled.escaped_bind_names or {}
        binds = []
        for name in names:
            bind = compiled.binds[name]
            impl = bind.type.dialect_impl(dialect)
            processor: Processor = impl.bind_processor(dialect)
            if isinstance(bind.type, sa.JSON):
                processor = _keeping_json_text(processor)
            binds.append((name, escaped.get(name, name), bind.value, processor))
        columns = (
            tuple(c.type for c in stmt.selected_columns) if isinstance(stmt, sa.Select) else ()
        )
        prepared = Prepared(compiled.string, tuple(binds), named, columns)
        self._prepared[key] = prepared
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
            for name, placeholder, default, processor in prepared.binds:
                value = params.get(name, default)
                named[placeholder] = value if processor is None else processor(value)
            return named
        out = []
        for name, _, default, processor in prepared.binds:
            value = params.get(name, default)
            out.append(value if processor is None else processor(value))
        return tuple(out)

    def _driver_error(self, conn: Connection, sql: str, args: Any, exc: Exception) -> Exception:
        """The driver's error as SQLAlchemy would raise it: wrapped, and, when it means
        the connection is gone, flagged so and the connection invalidated (the pool will
        not hand it out again), as ``Connection.execute`` does."""
        dbapi = conn.connection.dbapi_connection if not conn.invalidated else None
        lost = self.dialect.is_disconnect(exc, dbapi, None)  # type: ignore[arg-type]
        error = sa.exc.DBAPIError.instance(
            sql, args, exc, self._error, dialect=self.dialect, connection_invalidated=lost
        )
        if lost:
            self._drop_cursors(conn)
            if not conn.invalidated:
                conn.invalidate(exc)
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

    # --- transactions on the driver ---------------------------------------------
    #
    # SQLAlchemy's ``commit`` and ``rollback`` events still fire, just before the driver
    # is told (listeners that watch transactions, e.g. fault injection, keep working);
    # what the fast path skips is SQLAlchemy's bookkeeping around them. When a statement
    # went through SQLAlchemy meanwhile, SQLAlchemy holds the transaction too and ends
    # it itself, through the driver, which then has nothing left to do.

    def _mark_write(self, conn: Connection, state: _State) -> None:
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
        conn.dispatch.commit(conn)
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
        conn.dispatch.rollback(conn)
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
    """The fast path on SQLite: its own BEGIN IMMEDIATE and COMMIT on the driver."""

    name = "sqlite-cursor"
    reads_outside_transaction = True

    def begin(self, conn: Connection, *, write: bool, appends: bool = True) -> Any:
        state = state_of(conn)
        if write:
            self._mark_write(conn, state)
        self._run(conn, "BEGIN IMMEDIATE" if write else "BEGIN")
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


class PostgresCursorExecutor(CursorExecutor):
    """The fast path on PostgreSQL (psycopg, synchronous): compiled statements, and write
    transactions in pipeline mode with the writers' lock at their BEGIN."""

    name = "postgresql-cursor"
    reads_outside_transaction = True
    reads_below_horizon = True

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(dialect)
        import psycopg

        self._pipelines = psycopg.Pipeline.is_supported()

    def begin(self, conn: Connection, *, write: bool, appends: bool = True) -> Any:
        # A read needs no transaction: under READ COMMITTED each statement reads its own
        # snapshot either way. (A statement through SQLAlchemy begins one as usual.)
        if not write:
            return None
        state = state_of(conn)
        self._mark_write(conn, state)
        try:
            statements = postgres_begin(self._cursors(conn)[1].connection, write=True, appends=appends)
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
        if pipeline is not None:
            if exc is None:
                pipeline.__exit__(None, None, None)
            else:
                pipeline.__exit__(type(exc), exc, exc.__traceback__)

    def commit(self, conn: Connection, tx: Any) -> None:
        state = state_of(conn)
        if state.tx is None:  # a read: end what SQLAlchemy began, if any
            if conn.in_transaction():
                conn.commit()
            return
        if state.pipeline is None:
            self._commit_on_driver(conn)
        else:
            conn.dispatch.commit(conn)
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

    def check_writer(self, conn: Connection) -> None:
        _check_postgres_writer(conn)

    def lock_setup(self, conn: Connection) -> None:
        conn.execute(_LOCK_SETUP)

    def lock_evidence(self, conn: Connection) -> None:
        conn.execute(_LOCK_EVIDENCE)

    def writers_shut_out(self, conn: Connection) -> AbstractContextManager[None]:
        return _writers_shut_out(conn)


def leave_pipeline_for_sqlalchemy(conn: Connection) -> None:
    """Called by the engines' ``begin`` listener when SQLAlchemy joins a fast-path
    transaction: end the pipeline (SQLAlchemy needs each result at once), for good."""
    state = state_of(conn)
    pipeline, state.pipeline = state.pipeline, None
    if pipeline is not None:
        pipeline.__exit__(None, None, None)


_CORE = CoreExecutor()
_POSTGRES = PostgresExecutor()
_FAST: weakref.WeakKeyDictionary[Dialect, CursorExecutor] = weakref.WeakKeyDictionary()


def _listened(conn: Connection) -> bool:
    dispatch = conn.engine.dispatch
    return bool(dispatch.before_cursor_execute) or bool(dispatch.after_cursor_execute)


def _fast(dialect: Dialect, kind: type[CursorExecutor]) -> CursorExecutor:
    fast = _FAST.get(dialect)
    if fast is None:
        fast = _FAST[dialect] = kind(dialect)
    return fast


def choose_executor(conn: Connection) -> Executor:
    """The executor for ``conn``'s backend and settings (see the module docstring)."""
    dialect = conn.dialect
    fast = conn.engine.get_execution_options().get(FAST_PATH_OPTION, True) and not _listened(conn)
    if dialect.name == "postgresql":
        if fast and dialect.driver == "psycopg" and not dialect.is_async:
            return _fast(dialect, PostgresCursorExecutor)
        return _POSTGRES
    if dialect.name == "sqlite" and fast:
        return _fast(dialect, SQLiteCursorExecutor)
    return _CORE


def choose_executor_again(conn: Connection) -> Executor:
    """Choose ``conn``'s executor anew (at the start of each operation): a connection the
    store holds for a long time must notice a statement listener added since."""
    executor = state_of(conn).executor = choose_executor(conn)
    return executor


def executor_for(conn: Connection) -> Executor:
    """The executor of ``conn``, chosen once per ``Connection`` and kept on it."""
    state: _State | None = getattr(conn, _STATE, None)
    if state is None:
        state = state_of(conn)
    executor = state.executor
    if executor is None:
        executor = state.executor = choose_executor(conn)
    return executor
