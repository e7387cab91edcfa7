"""PostgreSQL: ``setup()`` of the checkpoint tables is exclusive per schema and never deadlocks.

``PostgresSaver.setup()`` creates indexes ``CONCURRENTLY``, which waits for every
statement in flight in the database. A second ``setup()`` blocked inside
``pg_advisory_lock`` is such a statement, so the two deadlocked (seen when test runs in
other schemas of one database set up at once). The lock is now per schema and polled.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from symfonic_store import InterruptStore
from symfonic_store.db import checkpoints as tables
from symfonic_store.langgraph import saver_sql

pytestmark = pytest.mark.postgres

WAIT = 30.0
"""The longest a test waits for a condition it polls (never a delay)."""

_WAITING_FOR_A_SETUP_LOCK = sa.text(
    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = :app "
    "AND (l.classid::text::bigint = :key OR l.objid::text::bigint = :key)"
)
APP = "symfonic-setup-lock-test"
"""The application_name of the setting-up session: other test runs may share the server."""


@pytest.fixture
def other_schema_url(postgres_schema_url: str) -> Iterator[str]:
    """A second empty schema in the same database."""
    from conftest import with_search_path

    schema = f"t_{uuid.uuid4().hex[:12]}"
    base = sa.make_url(postgres_schema_url).difference_update_query(["options"])
    admin = sa.create_engine(base)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(base.render_as_string(hide_password=False), schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


def _until(done: Any) -> bool:
    deadline = datetime.now(UTC).timestamp() + WAIT
    while datetime.now(UTC).timestamp() < deadline:
        if done():
            return True
    return False


def _setup_in_a_thread(url: str) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    done, failures = threading.Event(), []

    url = sa.make_url(url).update_query_dict({"application_name": APP}).render_as_string(
        hide_password=False
    )

    def run() -> None:
        try:
            with InterruptStore(url) as store:
                store.setup()
                store.checkpointer().setup()
        except BaseException as e:  # reported by the test
            failures.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done, failures


def test_a_setup_in_another_schema_does_not_wait_for_this_ones(
    postgres_schema_url: str, other_schema_url: str
) -> None:
    """A session holding the setup lock of one schema leaves the checkpoint tables of another schema free to be created."""
    holder = sa.create_engine(other_schema_url)
    watcher = sa.create_engine(postgres_schema_url, isolation_level="AUTOCOMMIT")
    # Both sessions idle outside a transaction: CREATE INDEX CONCURRENTLY waits for any open one.
    with holder.connect() as held, watcher.connect() as watch:
        assert held.execute(tables.setup_lock()).scalar_one() is True
        held.commit()  # a session lock; no transaction left open for CREATE INDEX CONCURRENTLY to wait for
        thread, done, failures = _setup_in_a_thread(postgres_schema_url)
        try:
            blocked = _until(lambda: done.is_set() or watch.execute(
                _WAITING_FOR_A_SETUP_LOCK, {"key": tables.SETUP_LOCK_KEY, "app": APP}
            ).scalar_one() > 0)
            assert blocked and done.is_set(), "the setup waited for another schema's lock"
        finally:
            held.execute(tables.setup_unlock())
            held.commit()
            thread.join(WAIT)
    holder.dispose()
    watcher.dispose()
    assert not failures, failures


def test_a_second_setup_of_the_same_schema_waits_outside_any_statement(
    postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another session holds this schema's setup lock, setup() polls (no statement left waiting), then creates the tables once the lock is free."""
    polled = threading.Event()
    real_sleep = saver_sql.time.sleep

    def sleep(seconds: float) -> None:
        polled.set()
        real_sleep(0)

    monkeypatch.setattr(saver_sql.time, "sleep", sleep)
    with InterruptStore(postgres_schema_url) as store:
        store.setup()
    holder = sa.create_engine(postgres_schema_url)
    watcher = sa.create_engine(postgres_schema_url, isolation_level="AUTOCOMMIT")
    # Both sessions idle outside a transaction: CREATE INDEX CONCURRENTLY waits for any open one.
    with holder.connect() as held, watcher.connect() as watch:
        assert held.execute(tables.setup_lock()).scalar_one() is True
        held.commit()  # a session lock; no transaction left open for CREATE INDEX CONCURRENTLY to wait for
        thread, done, failures = _setup_in_a_thread(postgres_schema_url)
        try:
            assert polled.wait(WAIT) and not done.is_set()
            assert watch.execute(
                _WAITING_FOR_A_SETUP_LOCK, {"key": tables.SETUP_LOCK_KEY, "app": APP}
            ).scalar_one() == 0
        finally:
            held.execute(tables.setup_unlock())
            held.commit()
            thread.join(WAIT)
    holder.dispose()
    watcher.dispose()
    assert not failures, failures
    with sa.create_engine(postgres_schema_url).connect() as conn:
        assert conn.execute(sa.text("SELECT to_regclass('checkpoints') IS NOT NULL")).scalar_one()
