"""Driver errors become the store's errors by their codes, never by their message text.

A unique violation of one of the store's concurrency guards is a lost race
(``ConcurrencyConflictError``, retried); any other integrity error -- a trigger, NOT NULL,
CHECK -- is the database refusing the write (``ConstraintViolationError``, not retried).
The driver's exception stays reachable as the cause (for ``--traceback``), without
passwords. A connection lost while committing is not reported as "nothing was written".

Real driver errors are provoked on both backends; test doubles whose message is
nonsense but whose code is right prove that only the codes are read (and a PostgreSQL
server speaking another language, where the server has one).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from types import SimpleNamespace
from typing import Any

import factories
import psycopg
import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli
from sqlalchemy import event
from sqlalchemy.engine import Connection

from symfonic_store import (
    ConcurrencyConflictError,
    ConstraintViolationError,
    DatabaseError,
    InterruptStore,
    SchemaNotMigratedError,
    SymfonicStoreError,
)
from symfonic_store.db.executor import PostgresCursorExecutor
from symfonic_store.db.schema import VERSION_TABLE, events, metadata, threads
from symfonic_store.db.translate import (
    RACE_CONSTRAINTS,
    SchemaSuspectError,
    ScrubbedDriverError,
    translate_errors,
)

NONSENSE = "blorp quux zzyzx: frobnicated the wibble"
"""A driver message in no language at all: only the error's code can classify it."""
NOWHERE = "symfonic_nothing_here"


marker = partial(factories.marker, name="approval", payload={})


# --- test doubles: the right code, a meaningless message ------------------------------------


class FakePsycopgError(Exception):
    """What psycopg exposes that the store reads: ``sqlstate`` and ``diag.constraint_name``."""

    def __init__(
        self, sqlstate: str | None, constraint: str | None = None, message: str = NONSENSE
    ) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.diag = SimpleNamespace(constraint_name=constraint)


def fake_sqlite(cls: type[sqlite3.Error], code: int, name: str) -> sqlite3.Error:
    error = cls(NONSENSE)
    error.sqlite_errorcode = code
    error.sqlite_errorname = name
    return error


def wrapped(sa_class: type[sa.exc.DBAPIError], orig: BaseException) -> sa.exc.DBAPIError:
    return sa_class("INSERT INTO symfonic_events ...", {}, orig)


DOUBLES: list[tuple[str, sa.exc.DBAPIError, type[SymfonicStoreError]]] = [
    *[
        (f"pg unique {name}", wrapped(sa.exc.IntegrityError, FakePsycopgError("23505", name)),
         ConcurrencyConflictError)
        for name in sorted(RACE_CONSTRAINTS)
    ],
    ("pg unique, someone else's index",
     wrapped(sa.exc.IntegrityError, FakePsycopgError("23505", "uq_app_orders")), ConstraintViolationError),
    ("pg not_null_violation", wrapped(sa.exc.IntegrityError, FakePsycopgError("23502")), ConstraintViolationError),
    ("pg check_violation", wrapped(sa.exc.IntegrityError, FakePsycopgError("23514", "ck_x")), ConstraintViolationError),
    ("pg restrict_violation (append-only trigger)",
     wrapped(sa.exc.IntegrityError, FakePsycopgError("23001")), ConstraintViolationError),
    ("pg undefined_table", wrapped(sa.exc.ProgrammingError, FakePsycopgError("42P01")), SchemaNotMigratedError),
    ("pg deadlock_detected", wrapped(sa.exc.OperationalError, FakePsycopgError("40P01")), ConcurrencyConflictError),
    ("pg serialization_failure",
     wrapped(sa.exc.OperationalError, FakePsycopgError("40001")), ConcurrencyConflictError),
    ("sqlite unique", wrapped(sa.exc.IntegrityError, fake_sqlite(sqlite3.IntegrityError, 2067, "SQLITE_CONSTRAINT_UNIQUE")),
     ConcurrencyConflictError),
    ("sqlite primary key",
     wrapped(sa.exc.IntegrityError, fake_sqlite(sqlite3.IntegrityError, 1555, "SQLITE_CONSTRAINT_PRIMARYKEY")),
     ConcurrencyConflictError),
    ("sqlite trigger",
     wrapped(sa.exc.IntegrityError, fake_sqlite(sqlite3.IntegrityError, 1811, "SQLITE_CONSTRAINT_TRIGGER")),
     ConstraintViolationError),
    ("sqlite not null",
     wrapped(sa.exc.IntegrityError, fake_sqlite(sqlite3.IntegrityError, 1299, "SQLITE_CONSTRAINT_NOTNULL")),
     ConstraintViolationError),
    ("sqlite check",
     wrapped(sa.exc.IntegrityError, fake_sqlite(sqlite3.IntegrityError, 275, "SQLITE_CONSTRAINT_CHECK")),
     ConstraintViolationError),
    ("sqlite generic error (a missing table)",
     wrapped(sa.exc.OperationalError, fake_sqlite(sqlite3.OperationalError, 1, "SQLITE_ERROR")), SchemaSuspectError),
]


@pytest.mark.parametrize(("orig", "expected"), [(d[1], d[2]) for d in DOUBLES], ids=[d[0] for d in DOUBLES])
def test_classification_reads_codes_not_message_text(
    orig: sa.exc.DBAPIError, expected: type[SymfonicStoreError]
) -> None:
    """A driver error whose message is nonsense but whose code is right is classified by the code."""
    with pytest.raises(SymfonicStoreError) as caught, translate_errors():
        raise orig
    assert type(caught.value) is expected
    assert caught.value.__cause__ is orig
    if isinstance(caught.value, ConstraintViolationError):
        code = orig.orig.sqlstate if isinstance(orig.orig, FakePsycopgError) else orig.orig.sqlite_errorname  # type: ignore[union-attr]
        assert caught.value.code == code
        assert "not retried" in str(caught.value)


@pytest.mark.parametrize(
    ("code", "name"), [(5, "SQLITE_BUSY"), (6, "SQLITE_LOCKED"), (517, "SQLITE_BUSY_SNAPSHOT")]
)
def test_a_busy_sqlite_is_the_busy_timeout_error_whatever_its_message(code: int, name: str) -> None:
    """SQLITE_BUSY and SQLITE_LOCKED (and their extended codes) say to retry or raise busy_timeout."""
    orig = wrapped(sa.exc.OperationalError, fake_sqlite(sqlite3.OperationalError, code, name))
    with pytest.raises(DatabaseError, match="busy_timeout") as caught, translate_errors():
        raise orig
    assert "locked by another writer" in str(caught.value)


def test_a_cause_with_a_password_in_its_text_is_chained_scrubbed() -> None:
    """A driver message that holds a URL with a password is chained as a masked copy."""
    orig = wrapped(
        sa.exc.OperationalError,
        FakePsycopgError(None, message="could not reach postgresql://app:hunter2pw@db.example/prod"),
    )
    with pytest.raises(DatabaseError) as caught, translate_errors():
        raise orig
    cause = caught.value.__cause__
    assert isinstance(cause, ScrubbedDriverError)
    assert "hunter2pw" not in str(cause) + repr(cause) + str(caught.value)
    assert "app:***@db.example" in str(cause)


# --- real driver errors, both backends -------------------------------------------------------


def an_event(thread_id: str, version: int, **changes: Any) -> dict[str, Any]:
    row = {
        "thread_id": thread_id,
        "version": version,
        "type": "route.decided",
        "interrupt_id": None,
        "run_id": None,
        "actor": None,
        "data": {},
        "occurred_at": datetime.now(UTC),
        "hash": "0" * 64,
    }
    row.update(changes)
    return row


def provoke(store: InterruptStore, statement: Callable[[Connection], Any]) -> SymfonicStoreError:
    """Run ``statement`` in a transaction under the store's translation; return its error."""
    with store.engine.connect() as conn, pytest.raises(SymfonicStoreError) as caught:
        with translate_errors(), conn.begin():
            statement(conn)
    assert isinstance(caught.value.__cause__, sa.exc.DBAPIError), "the driver's error is not chained"
    return caught.value


def test_real_driver_errors_are_classified_by_code(store: InterruptStore, backend: str) -> None:
    """Duplicate version/ending/thread rows are races; NULL, the append-only trigger and CHECK are refusals."""
    store.mint("t-1", marker("i-1"))
    store.resume("t-1", "i-1", {"ok": True}, actor="alice")
    version = len(store.history("t-1"))
    pg = backend == "postgresql"

    races = {
        "same version": lambda c: c.execute(events.insert(), an_event("t-1", version)),
        "second ending": lambda c: c.execute(
            events.insert(),
            an_event("t-1", version + 1, type="interrupt.expired", interrupt_id="i-1"),
        ),
        "second mint": lambda c: c.execute(
            events.insert(),
            an_event("t-1", version + 1, type="interrupt.minted", interrupt_id="i-1"),
        ),
        "same projection row": lambda c: c.execute(
            threads.insert(), {"thread_id": "t-1", "version": 1, "last_hash": "0" * 64}
        ),
    }
    for label, statement in races.items():
        assert type(provoke(store, statement)) is ConcurrencyConflictError, label

    def check_violation(conn: Connection) -> None:
        conn.exec_driver_sql("CREATE TABLE scratch_checked (x INTEGER CHECK (x > 0))")
        conn.exec_driver_sql("INSERT INTO scratch_checked (x) VALUES (-1)")

    refusals = {
        "NULL thread id": (
            lambda c: c.execute(events.insert(), an_event(None, 1)),  # type: ignore[arg-type]
            "23502" if pg else "SQLITE_CONSTRAINT_NOTNULL",
        ),
        "append-only trigger": (
            lambda c: c.execute(events.update().values(actor="mallory")),
            "23001" if pg else "SQLITE_CONSTRAINT_TRIGGER",
        ),
        "CHECK": (check_violation, "23514" if pg else "SQLITE_CONSTRAINT_CHECK"),
    }
    for label, (statement, code) in refusals.items():
        error = provoke(store, statement)
        assert type(error) is ConstraintViolationError, label
        assert error.code == code, label

    missing = provoke(store, lambda c: c.execute(sa.select(sa.table(NOWHERE, sa.column("x")))))
    # PostgreSQL says undefined_table (42P01); SQLite only its generic SQLITE_ERROR, so the
    # store asks the version table before calling it a missing schema (next test).
    assert type(missing) is (SchemaNotMigratedError if pg else SchemaSuspectError)


def test_dropped_tables_are_reported_as_a_missing_schema_by_asking_the_database(
    store: InterruptStore,
) -> None:
    """A store whose tables vanish after its schema check says the schema is missing, on both backends."""
    store.mint("t-1", marker("i-1"))
    with store.engine.begin() as conn:
        metadata.drop_all(conn)
        sa.Table(VERSION_TABLE, sa.MetaData()).drop(conn)
    with pytest.raises(SchemaNotMigratedError, match="symfonic-store db upgrade"):
        store.pending("t-1")


@pytest.fixture
def refusing_store(migrated_url: str, backend: str) -> Iterator[tuple[InterruptStore, list[str]]]:
    """A migrated store whose event table has an extra trigger refusing every INSERT, and a
    list of the INSERTs into it that reached the database (a statement listener)."""
    with InterruptStore(migrated_url) as setup:
        setup.setup()
        setup.mint("t-1", marker("i-1"))
        with setup.engine.begin() as conn:
            if backend == "postgresql":
                conn.exec_driver_sql(
                    "CREATE FUNCTION refuse_inserts() RETURNS trigger LANGUAGE plpgsql AS $$ "
                    "BEGIN RAISE EXCEPTION 'no inserts today' USING ERRCODE = 'restrict_violation'; END $$"
                )
                conn.exec_driver_sql(
                    "CREATE TRIGGER refuse_inserts BEFORE INSERT ON symfonic_events "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_inserts()"
                )
            else:
                conn.exec_driver_sql(
                    "CREATE TRIGGER refuse_inserts BEFORE INSERT ON symfonic_events "
                    "BEGIN SELECT RAISE(ABORT, 'no inserts today'); END"
                )
    engine = sa.create_engine(InterruptStore(migrated_url).engine.url)
    inserts: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # (On PostgreSQL a store method's append is one call of symfonic_append.)
        if statement.lstrip().upper().startswith("INSERT INTO SYMFONIC_EVENTS") or "symfonic_append(" in statement:
            inserts.append(statement)

    store = InterruptStore(engine)
    yield store, inserts
    store.close()
    engine.dispose()


def test_a_trigger_refusal_is_not_retried_as_a_race(
    refusing_store: tuple[InterruptStore, list[str]], backend: str
) -> None:
    """A trigger refusing the write raises ConstraintViolationError after one attempt, not five retries."""
    store, inserts = refusing_store
    before = store.history("t-1")
    with pytest.raises(ConstraintViolationError) as caught:
        store.mint("t-2", marker("i-2"))
    assert not isinstance(caught.value, ConcurrencyConflictError)
    assert len(inserts) == 1, f"the refused write was tried {len(inserts)} times"
    assert caught.value.code == ("23001" if backend == "postgresql" else "SQLITE_CONSTRAINT_TRIGGER")
    assert "refused the write" in str(caught.value)
    assert store.history("t-1") == before and store.history("t-2") == []


def test_traceback_shows_the_drivers_error_without_the_password(
    refusing_store: tuple[InterruptStore, list[str]], backend: str
) -> None:
    """`--traceback` prints the driver's error as the cause; the plain run is one line, exit 2."""
    store, _ = refusing_store
    url = store.engine.url
    if backend == "postgresql":
        url = url.set(password="s3cr3tpw")  # trust auth: accepted and ignored
    db = url.render_as_string(hide_password=False)
    args = ("resume", "t-1", "i-nobody-minted", "--actor", "eve")

    plain = run_cli(*args, db=db)
    assert "refused the write" in assert_clean_error(plain, 2)

    traced = run_cli("--traceback", *args, db=db)
    assert traced.returncode == 2
    assert "The above exception was the direct cause of the following exception" in traced.stderr
    driver = "psycopg.errors.RestrictViolation" if backend == "postgresql" else "sqlite3.IntegrityError"
    assert driver in traced.stderr
    assert "ConstraintViolationError" in traced.stderr
    assert "s3cr3tpw" not in traced.stdout + traced.stderr + plain.stdout + plain.stderr


def test_a_connection_lost_at_commit_does_not_claim_nothing_was_written(
    store: InterruptStore, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When COMMIT reaches the database and its answer is lost, the error says the write may have been saved."""
    store.pending("t-1")  # the schema check is done: the next commit is the write's
    dialect = store.engine.dialect
    real_commit = dialect.do_commit
    lost: BaseException
    if backend == "postgresql":
        lost = psycopg.OperationalError(NONSENSE)
    else:
        lost = fake_sqlite(sqlite3.OperationalError, 10, "SQLITE_IOERR")

    def commit_then_lose_the_answer(dbapi_connection: Any) -> None:
        real_commit(dbapi_connection)
        raise lost

    monkeypatch.setattr(dialect, "do_commit", commit_then_lose_the_answer)
    # PostgreSQL's fast path sends a write's COMMIT in its pipeline, not through do_commit.
    real_pipeline_commit = PostgresCursorExecutor._commit_pipeline

    def pipeline_commit_then_lose_the_answer(self: Any, conn: Any) -> None:
        real_pipeline_commit(self, conn)
        raise lost

    monkeypatch.setattr(PostgresCursorExecutor, "_commit_pipeline", pipeline_commit_then_lose_the_answer)
    # And a store method's append is one call of symfonic_append, its own commit.
    real_call = PostgresCursorExecutor.call_once

    def call_then_lose_the_answer(self: Any, *args: Any) -> Any:
        real_call(self, *args)
        raise lost

    monkeypatch.setattr(PostgresCursorExecutor, "call_once", call_then_lose_the_answer)
    with pytest.raises(DatabaseError) as caught:
        store.record_route("t-1", "finish")
    monkeypatch.undo()
    message = str(caught.value)
    assert "nothing" not in message
    assert "may or may not have been saved" in message
    # ... and rightly so: the write is there.
    assert [e.type for e in store.history("t-1")] == ["route.decided"]


@pytest.mark.postgres
def test_a_postgres_backend_killed_at_commit_is_reported_as_maybe_committed(
    postgres_schema_url: str,
) -> None:
    """A real connection loss during COMMIT (the backend terminated) does not say nothing was written."""
    admin = sa.create_engine(postgres_schema_url, poolclass=sa.pool.NullPool)
    with InterruptStore(postgres_schema_url) as store:
        store.setup()
        store.pending("t-1")
        armed = {"on": True}

        @event.listens_for(store.engine, "commit")
        def kill_backend(conn: Connection) -> None:
            if armed["on"] and conn.get_execution_options().get("symfonic_write"):
                armed["on"] = False
                pid = conn.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
                with admin.connect() as other:
                    other.execute(sa.select(sa.func.pg_terminate_backend(pid, 5000)))

        with pytest.raises(DatabaseError) as caught:
            store.record_route("t-1", "finish")
        assert not armed["on"], "the commit listener did not fire"
        assert "nothing" not in str(caught.value)
        assert "may or may not have been saved" in str(caught.value)
        assert isinstance(caught.value.__cause__, sa.exc.DBAPIError)
        # The next call works on a fresh connection.
        store.record_route("t-1", "finish")
    admin.dispose()


# --- a PostgreSQL server speaking another language -------------------------------------------


def _other_language(url: str) -> str | None:
    """An ``lc_messages`` the server accepts and translates its messages into, if any."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            if conn.execute(
                sa.text("SELECT count(*) FROM pg_settings WHERE name = 'lc_messages'")
            ).scalar_one() != 1:
                return None
            # The OS locales initdb found are the collations of provider libc.
            names = conn.execute(
                sa.text(
                    "SELECT collname FROM pg_collation WHERE collprovider = 'c' "
                    "AND collname NOT IN ('C', 'POSIX', 'ucs_basic', 'C.utf8', 'C.UTF-8', 'default') "
                    "AND collname NOT LIKE 'en%' ORDER BY collname"
                )
            ).scalars().all()
            for name in names:
                try:
                    with conn.begin():
                        conn.execute(sa.select(sa.func.set_config("lc_messages", name, False)))
                        conn.exec_driver_sql("SELECT * FROM symfonic_no_such_relation")
                except sa.exc.DBAPIError as exc:
                    text = str(exc.orig)
                    if "does not exist" not in text and "lc_messages" not in text:
                        return str(name)
        return None
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_server_with_other_lc_messages_is_classified_the_same(postgres_schema_url: str) -> None:
    """With the server's messages in another language, races, refusals and a missing table are still told apart."""
    language = _other_language(postgres_schema_url)
    if language is None:
        pytest.skip(
            "this PostgreSQL server has no translated locale to set lc_messages to (only C/POSIX "
            "in pg_collation); test_classification_reads_codes_not_message_text proves codes alone decide"
        )
    engine = sa.create_engine(postgres_schema_url)

    @event.listens_for(engine, "connect")
    def speak(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lc_messages', %s, false)", (language,))
        dbapi_connection.commit()

    with InterruptStore(engine) as store:
        store.setup()
        store.mint("t-1", marker("i-1"))
        race = provoke(store, lambda c: c.execute(events.insert(), an_event("t-1", 1)))
        assert type(race) is ConcurrencyConflictError
        assert "duplicate key" not in str(race.__cause__), "the server still speaks English"
        refusal = provoke(store, lambda c: c.execute(events.update().values(actor="x")))
        assert type(refusal) is ConstraintViolationError and refusal.code == "23001"
        missing = provoke(store, lambda c: c.execute(sa.select(sa.table(NOWHERE, sa.column("x")))))
        assert type(missing) is SchemaNotMigratedError
    engine.dispose()
