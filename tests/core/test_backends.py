"""The backend contract: what every backend of db/backends/ must answer, run once per backend.

:class:`BackendContract` holds the tests; each backend has one subclass naming its URL
fixture and what it answers differently (the error a missing table gets, whether readers
stay below a writers' horizon). Adding a backend is adding one subclass here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa

from symfonic_store import (
    ConcurrencyConflictError,
    ConstraintViolationError,
    InterruptStore,
    SchemaNotMigratedError,
)
from symfonic_store.db import statements
from symfonic_store.db.backends import BACKENDS, backend_for_url, backend_of
from symfonic_store.db.backends.base import Backend
from symfonic_store.db.executor import FAST_PATH_OPTION, executor_for
from symfonic_store.db.schema import (
    EVENTS_TABLE,
    POSTGRES_DROP_TRIGGERS,
    SQLITE_DROP_TRIGGERS,
    threads,
)
from symfonic_store.db.translate import SchemaSuspectError, translated
from symfonic_store.db.urls import parse_url


class BackendContract:
    """The tests every backend passes; a subclass provides the ``url`` fixture."""

    name: ClassVar[str]
    """The SQLAlchemy dialect name the backend serves."""
    missing_table_error: ClassVar[type[Exception]]
    """What a statement on a table that does not exist is translated into."""
    reads_below_horizon: ClassVar[bool]
    drop_guards: ClassVar[tuple[str, ...]]
    """Statements that drop the backend's append-only triggers."""

    @pytest.fixture
    def url(self) -> str:
        raise NotImplementedError

    @pytest.fixture
    def store(self, url: str) -> Iterator[InterruptStore]:
        with InterruptStore(url) as store:
            store.setup()
            yield store

    @pytest.fixture
    def store_backend(self, store: InterruptStore) -> Backend:
        return backend_of(store.engine)

    def test_the_backend_is_chosen_once_per_engine_by_its_dialect(self, store: InterruptStore) -> None:
        """The engine, its connections and its option copies share one backend object, registered under its dialect's name."""
        backend = backend_of(store.engine)
        assert type(backend) is BACKENDS[self.name]
        assert backend.name == store.engine.dialect.name == self.name
        assert backend.prepared
        with store.engine.connect() as conn:
            assert backend_of(conn) is backend
            assert executor_for(conn).backend is backend
        assert backend_of(store.engine.execution_options(symfonic_write=True)) is backend
        assert not hasattr(store.engine, "_symfonic_postgres") and not hasattr(store.engine, "_symfonic_sqlite")

    def test_a_listened_engine_gets_the_core_executor_of_its_backend(self, url: str) -> None:
        """With the fast path switched off the executor is the backend's Core one, still answering for the backend."""
        engine = sa.create_engine(url, execution_options={FAST_PATH_OPTION: False})
        try:
            with engine.connect() as conn:
                executor = executor_for(conn)
                assert executor is backend_of(engine).core
                assert executor.reads_below_horizon is self.reads_below_horizon
        finally:
            engine.dispose()

    def test_every_begin_statement_runs_on_the_driver(self, store: InterruptStore, store_backend: Backend) -> None:
        """Each kind of transaction's BEGIN statements (with the backend's write lock) run on a connection the backend prepared."""
        raw: Any = store.engine.raw_connection()
        try:
            for write, appends in ((False, True), (True, True), (True, False)):
                cursor = raw.cursor()
                for statement in store_backend.begin_statements(raw.driver_connection, write=write, appends=appends):
                    cursor.execute(statement)
                cursor.execute("ROLLBACK")
                cursor.close()
        finally:
            raw.close()

    def test_the_locks_run_in_a_write_transaction(self, store: InterruptStore, store_backend: Backend) -> None:
        """The setup, evidence and thread-steps locks run inside a store's write transaction, which may append."""
        with store.engine.connect() as conn:
            executor = executor_for(conn)
            tx = executor.begin(conn, write=True)
            try:
                store_backend.lock_setup(conn)
                store_backend.lock_evidence(conn)
                store_backend.lock_thread_steps(conn, "t-1")
                store_backend.check_writer(conn)
            finally:
                executor.rollback(conn, tx)

    def test_the_writers_are_shut_out_from_an_evidence_transaction(self, store: InterruptStore, store_backend: Backend) -> None:
        """Inside a transaction that appends nothing, the writers can be shut out and the log's last position read."""
        store.record_route("t-1", "finish", run_id="r1")
        with store.engine.connect() as conn:
            executor = executor_for(conn)
            tx = executor.begin(conn, write=True, appends=False)
            try:
                with store_backend.writers_shut_out(conn):
                    assert statements.max_position(conn) >= 1
            finally:
                executor.rollback(conn, tx)

    def test_the_horizon_answers_and_holds_nothing_back_when_no_writer_is_open(
        self, store: InterruptStore, store_backend: Backend
    ) -> None:
        """With no write transaction in flight every committed event is below the horizon, and a gap-safe read returns it."""
        store.record_route("t-1", "finish", run_id="r1")
        with store.engine.connect() as conn:
            horizon = store_backend.read_horizon(conn)
            assert horizon.writers == 0 and horizon.oldest_writer_seconds is None
            assert store_backend.events_behind_horizon(conn, horizon) == 0
            assert [e.thread_id for e in statements.events_after(conn, 0, None)] == ["t-1"]
            if conn.in_transaction():
                conn.rollback()
        assert store_backend.reads_below_horizon is self.reads_below_horizon

    def test_the_guard_queries_see_the_triggers_after_migration(self, store: InterruptStore, store_backend: Backend) -> None:
        """Right after setup the backend finds every guard in place, and a restore leaves them so."""
        with store.engine.begin() as conn:
            assert store_backend.guard_problems(conn) == []
            store_backend.restore_guards(conn)
            assert store_backend.guard_problems(conn) == []

    def test_the_guard_queries_see_a_dropped_trigger(self, store: InterruptStore, store_backend: Backend) -> None:
        """With the append-only triggers dropped (inside a transaction, rolled back) the backend reports each missing one."""
        with store.engine.connect() as conn:
            tx = conn.begin()
            for statement in self.drop_guards:
                conn.exec_driver_sql(statement)
            problems = store_backend.guard_problems(conn)
            tx.rollback()
        assert problems and all("missing" in p for p in problems)
        with store.engine.connect() as conn:
            assert store_backend.guard_problems(conn) == []

    def _translated(self, store: InterruptStore, sql: str) -> Exception | None:
        with pytest.raises(sa.exc.DBAPIError) as caught:
            with store.engine.begin() as conn:
                conn.exec_driver_sql(sql)
        return translated(caught.value)

    def test_error_codes_classify(self, store: InterruptStore) -> None:
        """A guard's unique key is a race, a trigger's refusal a constraint violation, a missing table what the backend's code says."""
        store.record_route("t-1", "finish", run_id="r1")
        assert (threads.name, EVENTS_TABLE) == ("symfonic_threads", "symfonic_events")
        race = self._translated(store, "INSERT INTO symfonic_threads SELECT * FROM symfonic_threads")
        assert isinstance(race, ConcurrencyConflictError)
        refused = self._translated(store, "UPDATE symfonic_events SET actor = 'someone'")
        assert isinstance(refused, ConstraintViolationError)
        missing = self._translated(store, "SELECT * FROM symfonic_nothing_here")
        assert type(missing) is self.missing_table_error

    def test_the_driver_codes_are_read_by_this_backend(self, store: InterruptStore) -> None:
        """The backend reads its own driver's codes off an error, and no other backend claims them."""
        with pytest.raises(sa.exc.DBAPIError) as caught:
            with store.engine.begin() as conn:
                conn.exec_driver_sql("SELECT * FROM symfonic_nothing_here")
        readers = [name for name, cls in BACKENDS.items() if cls.driver_code(caught.value.orig) is not None]
        assert readers == [self.name]

    def test_the_checkpoint_layout_tables_exist_after_the_savers_setup(
        self, store: InterruptStore, store_backend: Backend
    ) -> None:
        """The tables of the backend's checkpoint layout are the ones LangGraph's saver creates."""
        store.checkpointer().setup()
        names = set(sa.inspect(store.engine).get_table_names())
        assert {t.name for t in store_backend.checkpoint_layout.tables} <= names

    def test_the_url_facts_are_the_backends(self, url: str, store: InterruptStore, store_backend: Backend) -> None:
        """The URL names the engine's backend; only a database in this process has a file
        (there once set up); a ``?password=`` leaves the query where the driver reads it there."""
        parsed = parse_url(url)
        assert backend_for_url(parsed) is type(store_backend)
        file = store_backend.database_file(parsed)
        assert (file is not None and file.exists()) == store_backend.in_process
        with_password = parse_url(url + ("&" if "?" in url else "?") + "password=s3cret")
        assert ("password" in with_password.query) != store_backend.password_in_query


class TestSQLite(BackendContract):
    name = "sqlite"
    missing_table_error = SchemaSuspectError
    reads_below_horizon = False
    drop_guards = SQLITE_DROP_TRIGGERS

    @pytest.fixture
    def url(self, sqlite_url: str) -> str:
        return sqlite_url


@pytest.mark.postgres
class TestPostgres(BackendContract):
    name = "postgresql"
    missing_table_error = SchemaNotMigratedError
    reads_below_horizon = True
    drop_guards = POSTGRES_DROP_TRIGGERS

    @pytest.fixture
    def url(self, postgres_schema_url: str) -> str:
        return postgres_schema_url
