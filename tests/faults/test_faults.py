"""Database faults: a PostgreSQL server that dies mid-sweep, a SQLite file that stays locked,
a connection lost at the commit of a sweep batch.

The PostgreSQL crash cases run on a private throwaway cluster (``tests/pgcluster.py``),
never on the shared server: it is stopped with ``pg_ctl stop -m immediate`` (a crash: no
checkpoint, WAL replay on restart) and started again. Each case asserts the same three
things: the caller gets the store's own error (never a raw driver error), nothing is
half-done (a batch is committed whole or not at all; the store verifies and its
projection equals a rebuild), and the next call finishes the work. A sweep that stops
after a batch committed raises ``SweepIncompleteError`` carrying what it committed.
The lost-at-commit cases (``tests/commit_faults.py``) run on both backends.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from commit_faults import LostAtCommit, LostInsideBatch
from consistency import assert_consistent
from freezegun import freeze_time
from pgcluster import PrivateCluster
from sqlalchemy import event

from symfonic_store import (
    EXPIRED,
    RESUMED,
    AsyncInterruptStore,
    DatabaseError,
    InterruptStore,
    SweepIncompleteError,
    SymfonicStoreError,
)
from symfonic_store.db.translate import ScrubbedDriverError
from symfonic_store.services.sweep import WAKE_LEASE_SECONDS

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


def assert_committed_batches_reported(
    error: SweepIncompleteError, committed: list[tuple[str, str, str]], *, outcome_unknown: bool
) -> None:
    """The sweep's error lists exactly the committed expiries and claims nothing it cannot know."""
    assert error.report.expired == committed
    assert error.report.complete is False
    assert error.outcome_unknown is outcome_unknown
    assert_store_error_only(error.error)
    assert error.error.outcome_unknown is outcome_unknown
    assert error.__cause__ is None and error.__suppress_context__
    message = str(error)
    assert f"committed {len(committed)} expiry(ies)" in message
    if outcome_unknown:
        assert "may or may not have been saved" in message
        assert "nothing" not in message  # no claim that nothing was written
    else:
        assert "did not commit, so nothing of it was written" in message


# --- the private PostgreSQL cluster ---------------------------------------------------




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


def _check_after_restart(
    url: str, committed: list[tuple[str, str, str]], woken: list[tuple[str, str, str]]
) -> None:
    """Only the committed batch is in the log; a second sweep finishes the rest, once each,
    and every expired interrupt has had its wake-up (at least once) when it is done."""
    with InterruptStore(url) as store:
        expired = [(e.thread_id, e.interrupt_id) for e in store.events() if e.type == EXPIRED]
        assert sorted(expired) == sorted((t, i) for t, i, _ in committed)
        assert len(committed) == BATCH
        assert_consistent(store)
        # The crashed sweep could not let go of the wake-ups it held: they are owed
        # again once its lease has run out.
        later = datetime.now(UTC) + timedelta(seconds=WAKE_LEASE_SECONDS + 1)
        with freeze_time(later, tick=True):
            rest = store.sweep(
                ttl_seconds=TTL, batch_size=BATCH, on_expired=lambda *a: woken.append(a)
            )
        finished = sorted((t, i) for t, i, _ in committed + rest.expired)
        assert finished == sorted((f"t-{n}", f"i-{n}") for n in range(THREADS))
        assert store.list_pending() == []
        assert {(t, i) for t, i, _ in woken} == set(finished)
        assert rest.owed == 0 and rest.wake_failures == []
        assert_consistent(store)


@pytest.mark.parametrize("where", ["between batches", "inside a batch"])
def test_postgres_crash_mid_sweep_keeps_batches_whole(
    cluster: PrivateCluster, crash_url: str, where: str
) -> None:
    """A server crash mid-sweep raises SweepIncompleteError with the committed batch; a rerun finishes and wakes every graph."""
    _seed_stale(crash_url)
    store = InterruptStore(crash_url)
    woken: list[tuple[str, str, str]] = []
    armed = _crash_inside_next_batch(store.engine, cluster)

    def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        woken.append((thread_id, interrupt_id, reason))
        if where == "between batches" and len(woken) == 1:
            cluster.crash()
        armed["armed"] = where == "inside a batch"

    try:
        with pytest.raises(SweepIncompleteError) as info:
            store.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=on_expired)
        committed = info.value.report.expired
        assert_committed_batches_reported(info.value, committed, outcome_unknown=False)
        assert committed == [("t-0", "i-0", "ttl"), ("t-1", "i-1", "ttl")]
        assert not cluster.is_running()
        assert armed["fired"] == (where == "inside a batch")
    finally:
        store.close()
    cluster.start()
    _check_after_restart(crash_url, committed, woken)


async def test_postgres_crash_mid_sweep_async(cluster: PrivateCluster, crash_url: str) -> None:
    """The asyncio store's sweep meets a crashed server the same way: SweepIncompleteError, whole batches."""
    _seed_stale(crash_url)
    store = AsyncInterruptStore(crash_url)
    woken: list[tuple[str, str, str]] = []
    armed = _crash_inside_next_batch(store.engine.sync_engine, cluster)

    async def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        woken.append((thread_id, interrupt_id, reason))
        armed["armed"] = True

    try:
        with pytest.raises(SweepIncompleteError) as info:
            await store.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=on_expired)
        committed = info.value.report.expired
        assert_committed_batches_reported(info.value, committed, outcome_unknown=False)
        assert woken == committed
        assert armed["fired"]
    finally:
        await store.aclose()
    cluster.start()
    _check_after_restart(crash_url, committed, woken)


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


# --- a connection lost at the commit of a sweep batch (both backends) -----------------


def _seed_stale_store(store: InterruptStore) -> None:
    for n in range(THREADS):
        store.mint(f"t-{n}", stale_marker(n))


def _expired_in_log(store: InterruptStore) -> list[tuple[str, str | None]]:
    return [(e.thread_id, e.interrupt_id) for e in store.events() if e.type == EXPIRED]


FIRST_BATCH = [("t-0", "i-0", "ttl"), ("t-1", "i-1", "ttl")]


@pytest.mark.parametrize(
    "fault", ["lost at commit, server committed", "lost at commit, rolled back", "lost before commit"]
)
def test_a_sweep_that_fails_partway_reports_the_batches_it_committed(
    store: InterruptStore, fault: str
) -> None:
    """A lost connection in the second batch raises SweepIncompleteError listing the first; at commit it says the outcome is unknown."""
    _seed_stale_store(store)
    called: list[tuple[str, str, str]] = []
    listener: LostAtCommit | LostInsideBatch
    if fault == "lost before commit":
        listener = LostInsideBatch(store.engine, at_batch=2)
    else:
        listener = LostAtCommit(
            store.engine, at_batch=2, server_commits=fault.endswith("server committed")
        )
    with listener, pytest.raises(SweepIncompleteError) as info:
        store.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=lambda *a: called.append(a))
    assert listener.fired
    assert called == FIRST_BATCH
    assert_committed_batches_reported(
        info.value, FIRST_BATCH, outcome_unknown=fault.startswith("lost at commit")
    )
    in_log = _expired_in_log(store)
    if fault.endswith("server committed"):
        assert in_log == [("t-0", "i-0"), ("t-1", "i-1"), ("t-2", "i-2"), ("t-3", "i-3")]
    else:
        assert in_log == [("t-0", "i-0"), ("t-1", "i-1")]
    assert_consistent(store)


SECOND_BATCH = [("t-2", "i-2", "ttl"), ("t-3", "i-3", "ttl")]
EVERY_INTERRUPT = [(f"t-{n}", f"i-{n}", "ttl") for n in range(THREADS)]


@pytest.mark.parametrize("server_commits", [True, False], ids=["batch committed", "batch rolled back"])
def test_the_next_sweep_delivers_the_wake_ups_of_a_batch_whose_commit_was_lost(
    store: InterruptStore, server_commits: bool
) -> None:
    """After a connection lost at a batch's COMMIT the next sweep wakes every graph left waiting: each interrupt called back once."""
    _seed_stale_store(store)
    woken: list[tuple[str, str, str]] = []
    with LostAtCommit(store.engine, at_batch=2, server_commits=server_commits) as fault:
        with pytest.raises(SweepIncompleteError):
            store.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=lambda *a: woken.append(a))
    assert fault.fired
    assert woken == FIRST_BATCH

    report = store.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=lambda *a: woken.append(a))

    assert woken == EVERY_INTERRUPT  # owed ones first, then the new expiries; none twice
    if server_commits:  # batch 2 is in the log: its wake-ups were owed, delivered first
        assert report.redelivered == SECOND_BATCH
        assert report.expired == EVERY_INTERRUPT[4:]
    else:  # batch 2 was rolled back: its interrupts expire now, like any other
        assert report.redelivered == []
        assert report.expired == EVERY_INTERRUPT[2:]
    assert report.owed == 0 and report.wake_failures == []
    if server_commits:
        assert "delivered 2 owed wake-up(s)" in str(report)

    again = store.sweep(ttl_seconds=TTL, on_expired=lambda *a: woken.append(a))
    assert (again.expired, again.redelivered, again.owed) == ([], [], 0)
    assert woken == EVERY_INTERRUPT
    assert_consistent(store)


async def test_an_async_sweep_lost_at_a_commit_reports_and_then_delivers(
    astore: AsyncInterruptStore,
) -> None:
    """The asyncio store raises the same SweepIncompleteError, and its next sweep delivers the owed wake-ups."""
    for n in range(THREADS):
        await astore.mint(f"t-{n}", stale_marker(n))
    woken: list[tuple[str, str, str]] = []

    async def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        woken.append((thread_id, interrupt_id, reason))

    with LostAtCommit(astore.engine.sync_engine, at_batch=2) as fault:
        with pytest.raises(SweepIncompleteError) as info:
            await astore.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=on_expired)
    assert fault.fired
    assert_committed_batches_reported(info.value, FIRST_BATCH, outcome_unknown=True)

    report = await astore.sweep(ttl_seconds=TTL, batch_size=BATCH, on_expired=on_expired)
    assert woken == EVERY_INTERRUPT
    assert report.redelivered == SECOND_BATCH and report.owed == 0


def test_a_sweep_that_fails_before_writing_raises_the_plain_error(store: InterruptStore) -> None:
    """When the first batch fails before its commit nothing was written: the plain DatabaseError, no partial report."""
    _seed_stale_store(store)
    with LostInsideBatch(store.engine, at_batch=1) as fault, pytest.raises(DatabaseError) as info:
        store.sweep(ttl_seconds=TTL, batch_size=BATCH)
    assert fault.fired
    assert not isinstance(info.value, SweepIncompleteError)
    assert info.value.outcome_unknown is False
    assert "nothing of it was written" in str(info.value)
    assert _expired_in_log(store) == []


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
