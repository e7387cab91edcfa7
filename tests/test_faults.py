"""Database faults: a PostgreSQL server that dies mid-sweep, a SQLite file that stays locked.

The PostgreSQL cases run on a private throwaway cluster (``tests/pgcluster.py``), never
on the shared server: it is stopped with ``pg_ctl stop -m immediate`` (a crash: no
checkpoint, WAL replay on restart) and started again. Each case asserts the same three
things: the caller gets the store's ``DatabaseError`` (never a raw driver error), nothing
is half-done (a batch is committed whole or not at all; the store verifies and its
projection equals a rebuild), and the next call finishes the work.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from consistency import assert_consistent
from pgcluster import PrivateCluster, unavailable_reason
from sqlalchemy import event

from symfonic_store import (
    EXPIRED,
    RESUMED,
    AsyncInterruptStore,
    DatabaseError,
    InterruptStore,
    SymfonicStoreError,
)
from symfonic_store.db.translate import ScrubbedDriverError

TTL = 60.0
THREADS = 5
BATCH = 2


def stale_marker(n: int) -> dict[str, Any]:
    """A marker minted long ago: stale under TTL."""
    return {
        "name": "approval",
        "interrupt_id": f"i-{n}",
        "payload": {"n": n},
        "tool_call_id": None,
        "run_id": None,
        "minted_at": time.time() - 10_000,
    }


def assert_store_error_only(error: BaseException) -> None:
    """The error is the store's own and says what to do; the driver's is its cause (for
    ``--traceback``), never raised itself."""
    assert isinstance(error, DatabaseError)
    assert not isinstance(error, sa.exc.SQLAlchemyError)
    assert isinstance(error.__cause__, sa.exc.DBAPIError | ScrubbedDriverError)
    assert "retry" in str(error)


# --- the private PostgreSQL cluster ---------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    """A private PostgreSQL cluster for this module, removed afterwards even on failure."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    private = PrivateCluster()
    try:
        private.init()
        private.start()
        yield private
    finally:
        private.destroy()


@pytest.fixture
def crash_url(cluster: PrivateCluster) -> Iterator[str]:
    """A fresh database on the private cluster; the cluster is running again afterwards."""
    if not cluster.is_running():
        cluster.start()
    name = f"f_{uuid.uuid4().hex[:10]}"
    # No pool: a pooled admin connection would not survive the crashes this test causes.
    admin = sa.create_engine(cluster.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield str(sa.make_url(cluster.url).set(database=name))
    finally:
        if not cluster.is_running():
            cluster.start()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def _seed_stale(url: str) -> None:
    with InterruptStore(url) as store:
        store.setup()
        for n in range(THREADS):
            store.mint(f"t-{n}", stale_marker(n))


def _crash_inside_next_batch(engine: sa.Engine, cluster: PrivateCluster) -> dict[str, bool]:
    """Crash the server inside the next sweep batch, after its events are inserted but
    before its projection rows are updated (so the transaction is really half-way)."""
    armed = {"armed": False, "fired": False}

    @event.listens_for(engine, "before_cursor_execute")
    def crash(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if armed["armed"] and not armed["fired"] and statement.lstrip().startswith(
            "UPDATE symfonic_threads"
        ):
            armed["fired"] = True
            cluster.crash()

    return armed


def _check_after_restart(url: str, committed: list[tuple[str, str, str]]) -> None:
    """Only the committed batch is in the log; a second sweep finishes the rest, once each."""
    with InterruptStore(url) as store:
        expired = [(e.thread_id, e.interrupt_id) for e in store.events() if e.type == EXPIRED]
        assert sorted(expired) == sorted((t, i) for t, i, _ in committed)
        assert len(committed) == BATCH
        assert_consistent(store)
        rest = store.sweep(ttl_seconds=TTL, batch_size=BATCH)
        finished = sorted((t, i) for t, i, _ in committed + rest.expired)
        assert finished == sorted((f"t-{n}", f"i-{n}") for n in range(THREADS))
        assert store.list_pending() == []
        assert_consistent(store)


@pytest.mark.parametrize("where", ["between batches", "inside a batch"])
def test_postgres_crash_mid_sweep_keeps_batches_whole(
    cluster: PrivateCluster, crash_url: str, where: str
) -> None:
    """A server crash mid-sweep raises DatabaseError; only whole batches persist; a rerun finishes."""
    _seed_stale(crash_url)
    store = InterruptStore(crash_url)
    committed: list[tuple[str, str, str]] = []
    armed = _crash_inside_next_batch(store.engine, cluster)

    def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        committed.append((thread_id, interrupt_id, reason))
        if where == "between batches" and len(committed) == 1:
            cluster.crash()
        armed["armed"] = where == "inside a batch"

    try:
        with pytest.raises(DatabaseError) as info:
            store.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=on_expired)
        assert_store_error_only(info.value)
        assert not cluster.is_running()
        assert armed["fired"] == (where == "inside a batch")
    finally:
        store.close()
    cluster.start()
    _check_after_restart(crash_url, committed)


async def test_postgres_crash_mid_sweep_async(cluster: PrivateCluster, crash_url: str) -> None:
    """The asyncio store's sweep meets a crashed server the same way: DatabaseError, whole batches."""
    _seed_stale(crash_url)
    store = AsyncInterruptStore(crash_url)
    committed: list[tuple[str, str, str]] = []
    armed = _crash_inside_next_batch(store.engine.sync_engine, cluster)

    async def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        committed.append((thread_id, interrupt_id, reason))
        armed["armed"] = True

    try:
        with pytest.raises(DatabaseError) as info:
            await store.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=on_expired)
        assert_store_error_only(info.value)
        assert armed["fired"]
    finally:
        await store.aclose()
    cluster.start()
    _check_after_restart(crash_url, committed)


def test_postgres_down_resume_raises_and_writes_nothing_then_succeeds(
    cluster: PrivateCluster, crash_url: str
) -> None:
    """A resume while the server is down is a DatabaseError; after restart the same call admits it."""
    with InterruptStore(crash_url) as store:
        store.setup()
        store.mint("t", {"name": "approval", "interrupt_id": "i-1", "payload": {}})
        before = store.events()
        cluster.crash()
        with pytest.raises(DatabaseError) as info:
            store.resume("t", "i-1", {"approved": True}, actor="alice")
        assert_store_error_only(info.value)
        with pytest.raises(DatabaseError) as again:  # no connection at all now
            store.resume("t", "i-1", {"approved": True}, actor="alice")
        assert_store_error_only(again.value)
        cluster.start()
        assert store.events() == before
        command = store.resume("t", "i-1", {"approved": True}, actor="alice")
        assert command.resume == {"approved": True}
        assert [e.type for e in store.history("t")][-1] == RESUMED
        assert_consistent(store)


def test_postgres_restart_between_calls_costs_at_most_one_error(
    cluster: PrivateCluster, crash_url: str
) -> None:
    """After a crash and restart between calls, at most one call fails (DatabaseError), then all work."""
    with InterruptStore(crash_url) as store:
        store.setup()
        store.mint("t", {"name": "approval", "interrupt_id": "i-1", "payload": {}})
        cluster.crash()
        cluster.start()
        # The pooled connections died with the old server. The first use finds out and
        # throws the whole pool away (optimistic disconnect handling); it may fail once,
        # with the store's error, and must not write anything.
        try:
            store.resume("t", "i-1", None, actor="alice")
            failures = 0
        except DatabaseError as exc:
            assert_store_error_only(exc)
            failures = 1
        assert failures <= 1
        if failures:
            assert store.pending("t") is not None
            store.resume("t", "i-1", None, actor="alice")
        assert store.pending("t") is None
        assert [e.type for e in store.history("t")].count(RESUMED) == 1
        assert_consistent(store)


# --- a locked SQLite file -------------------------------------------------------------


def _database_path(sqlite_url: str) -> Path:
    return Path(sa.make_url(sqlite_url).database or "")


BUSY = 0.2


def _locked(sqlite_url: str, mode: str) -> sqlite3.Connection:
    holder = sqlite3.connect(_database_path(sqlite_url), isolation_level=None)
    holder.execute(f"BEGIN {mode}")
    return holder


@pytest.mark.parametrize("mode", ["EXCLUSIVE", "IMMEDIATE"])
def test_locked_sqlite_gives_database_error_after_busy_timeout_and_loses_nothing(
    sqlite_url: str, mode: str
) -> None:
    """A writer held off past busy_timeout gets DatabaseError; after release the same calls succeed."""
    with InterruptStore(sqlite_url, busy_timeout=BUSY) as store:
        store.setup()
        store.mint("t", {"name": "approval", "interrupt_id": "i-1", "payload": {}})
        before = store.events()
        holder = _locked(sqlite_url, mode)
        try:
            started = time.monotonic()
            with pytest.raises(DatabaseError, match="locked") as info:
                store.resume("t", "i-1", {"approved": True}, actor="alice")
            waited = time.monotonic() - started
            assert_store_error_only(info.value)
            assert "busy_timeout" in str(info.value)
            assert BUSY * 0.75 <= waited < 5.0  # it waited for the lock, then gave up
            with pytest.raises(DatabaseError, match="locked"):
                store.mint("t", {"name": "approval", "interrupt_id": "i-2", "payload": {}})
        finally:
            holder.rollback()
            holder.close()
        assert store.events() == before
        assert store.resume("t", "i-1", {"approved": True}, actor="alice").resume == {
            "approved": True
        }
        assert store.mint("t", {"name": "approval", "interrupt_id": "i-2", "payload": {}})
        assert [e.type for e in store.history("t")][: len(before)] == [e.type for e in before]
        assert store.history("t")[: len(before)] == before
        assert_consistent(store)


async def test_locked_sqlite_async_store_gives_database_error(sqlite_url: str) -> None:
    """The asyncio store (aiosqlite) meets a locked file the same way and loses nothing."""
    astore = AsyncInterruptStore(sqlite_url, busy_timeout=BUSY)
    try:
        await astore.setup()
        await astore.mint("t", {"name": "approval", "interrupt_id": "i-1", "payload": {}})
        before = await astore.events()
        holder = _locked(sqlite_url, "EXCLUSIVE")
        try:
            with pytest.raises(DatabaseError, match="locked") as info:
                await astore.resume("t", "i-1", {"approved": True}, actor="alice")
            assert_store_error_only(info.value)
        finally:
            holder.rollback()
            holder.close()
        assert await astore.events() == before
        command = await astore.resume("t", "i-1", {"approved": True}, actor="alice")
        assert command.resume == {"approved": True}
    finally:
        await astore.aclose()
    with InterruptStore(sqlite_url) as store:
        assert_consistent(store)


def test_every_fault_error_is_in_the_store_family() -> None:
    """DatabaseError is a SymfonicStoreError, so one except clause catches every fault."""
    assert issubclass(DatabaseError, SymfonicStoreError)
