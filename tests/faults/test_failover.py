"""More than one machine (SPEC §17): the store on PostgreSQL's own replication, through a
failover with writers running.

Two private clusters (``tests/pgcluster.py``; never the shared server): a primary made by
``initdb`` whose ``synchronous_standby_names`` waits for ``standby1``, and a standby
cloned from it with ``pg_basebackup -R`` under that name (started without a synchronous
standby of its own, so once promoted it does not wait for one). The store reaches them
through one multi-host URL with ``target_session_attrs=read-write``.

Writers share one store object: a minter, an answerer (mint, then answer), a sweeper
(mint, then expire that interrupt without a callback: each expiry owes a wake-up) and the notifier (a webhook of each answer to a receiver on 127.0.0.1);
each pauses a little between writes, so the run stays small. Once each has
written, a signed checkpoint is taken, the notifier's cursor and the owed wake-ups are
read, and the primary is killed with SIGKILL (every process of it at once) and the
standby promoted. The writers keep going on the same store objects until each has
written again on the new primary. Then: every write acknowledged to a writer is in the
promoted standby's log; writes told outcome unknown are counted (at most the ones in
flight at the kill); ``verify`` is clean; the checkpoint still verifies; the notifier's
cursor and the owed wake-ups read before are there, and the notifier resumes after its
cursor, never sending again what it had delivered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from factories import marker
from notify_rig import hook_config, http_receiver
from pgcluster import PrivateCluster, unavailable_reason

from symfonic_store import DatabaseError, InterruptStore, SweepIncompleteError
from symfonic_store.events import EXPIRED, MINTED, RESUMED
from symfonic_store.notify import Notifier
from symfonic_store.services.evidence import generate_key

STANDBY = "standby1"
WARMUP = 20
"""Writes each writer has acknowledged before the kill, and again after the promotion."""
PACE = 0.01
"""Seconds each writer pauses between writes: the run stays small (and the notifier keeps up)."""
WAIT = 60.0
"""Seconds any wait of this test gives up after (each is a poll of something that happens)."""


def wait_until(what: str, done: Callable[[], bool], timeout: float = WAIT, state: Callable[[], Any] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what} {state()}")
        time.sleep(0.05)  # sleep-ok: polling for other threads' or the server's progress


@pytest.fixture
def pair() -> Iterator[tuple[PrivateCluster, PrivateCluster]]:
    """A primary and its synchronous standby, both removed afterwards whatever happens."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    primary, standby = PrivateCluster(), PrivateCluster()
    try:
        primary.init()
        primary.start(f"synchronous_standby_names={STANDBY}")
        standby.clone_from(primary, name=STANDBY)
        standby.start()
        yield primary, standby
    finally:
        try:
            primary.destroy()
        finally:
            standby.destroy()


def synchronous(primary: PrivateCluster) -> bool:
    admin = sa.create_engine(primary.url, poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            states = conn.exec_driver_sql(
                "SELECT application_name, sync_state FROM pg_stat_replication"
            ).all()
        return (STANDBY, "sync") in [tuple(s) for s in states]
    finally:
        admin.dispose()


@dataclass
class Writer:
    """One writer thread: what it was told was written, and what was of unknown outcome."""

    name: str
    acked: list[Any] = field(default_factory=list)
    unknown: list[Any] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Errors that said nothing was written (the write is tried again)."""
    failed: list[BaseException] = field(default_factory=list)

    def attempt(self, write: Callable[[], Any], what: Any) -> bool:
        """Run one write: True when it is settled (acknowledged or of unknown outcome)."""
        time.sleep(PACE)  # sleep-ok: pacing the writers, so the run stays bounded
        try:
            self.acked.append((what, write()))
            return True
        except (DatabaseError, SweepIncompleteError) as exc:
            if getattr(exc, "outcome_unknown", False):
                self.unknown.append(what)
                return True
            self.refused.append(type(exc).__name__)
            time.sleep(0.05)  # sleep-ok: a write that failed unwritten is retried, not spun
            return False


def progress(writers: list[Writer]) -> list[tuple[str, int, int, list[str], list[BaseException]]]:
    return [(w.name, len(w.acked), len(w.unknown), w.refused[-3:], w.failed) for w in writers]


def run_writers(store: InterruptStore, notifier: Notifier, stop: threading.Event) -> tuple[list[Writer], list[threading.Thread]]:
    minter, answerer, sweeper, notifying = (Writer(n) for n in ("mint", "answer", "sweep", "notify"))

    def mints() -> None:
        k = 0
        while not stop.is_set():
            update = marker()
            iid = update["_interrupt_pending"]["interrupt_id"]
            while not stop.is_set() and not minter.attempt(
                partial(store.mint, f"m-{k}", update), (f"m-{k}", iid)
            ):
                pass
            k += 1

    def answers() -> None:
        k = 0
        while not stop.is_set():
            update = marker()
            iid = update["_interrupt_pending"]["interrupt_id"]
            thread = f"a-{k}"
            k += 1
            minted = Writer("a")
            while not stop.is_set() and not minted.attempt(partial(store.mint, thread, update), thread):
                pass
            if not minted.acked:
                answerer.unknown.extend(minted.unknown)
                continue
            while not stop.is_set() and not answerer.attempt(
                partial(store.resume, thread, iid, {"approved": True}, actor="alice"), (thread, iid)
            ):
                pass

    def sweeps() -> None:
        k = 0
        while not stop.is_set():
            thread = f"s-{k}"
            k += 1
            minted = Writer("s")
            update = marker()
            while not stop.is_set() and not minted.attempt(partial(store.mint, thread, update), thread):
                pass
            if not minted.acked:
                sweeper.unknown.extend(minted.unknown)
                continue
            while not stop.is_set() and not sweeper.attempt(
                partial(expire, thread),
                thread,
            ):
                pass

    def expire(thread: str) -> list[str]:
        return [t for t, _, _ in store.sweep(ttl_seconds=0, thread_ids=[thread]).expired]

    def notifies() -> None:
        while not stop.is_set():
            notifying.attempt(lambda: notifier.run_once().total("delivered"), "pass")

    def guarded(writer: Writer, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as exc:  # reported by the test, not lost in the thread
                writer.failed.append(exc)

        return run

    writers = [minter, answerer, sweeper, notifying]
    threads = [
        threading.Thread(target=guarded(w, body), name=f"writer-{w.name}", daemon=True)
        for w, body in zip(writers, (mints, answers, sweeps, notifies), strict=True)
    ]
    for t in threads:
        t.start()
    return writers, threads


def test_only_the_call_that_finds_the_server_lost_fails(cluster: PrivateCluster, crash_url: str) -> None:
    """After a restart (or a failover) the pool's idle connections are dead too: the call
    that finds its connection lost fails, and the next ones open new connections
    instead of failing one by one on the others (without a ping at each checkout)."""
    with InterruptStore(crash_url) as store:
        store.setup()
        opened = [store.engine.connect() for _ in range(3)]  # three idle in the pool after
        for conn in opened:
            conn.exec_driver_sql("SELECT 1")
            conn.close()
        store.mint("t-0", marker())
        cluster.crash()
        cluster.start()
        failed = []
        for k in range(1, 6):
            try:
                store.mint(f"t-{k}", marker())
            except DatabaseError as exc:
                failed.append((k, exc.outcome_unknown))
        assert [k for k, _ in failed] == [1]
        assert store.engine.pool._pre_ping is False
        assert {f"t-{k}" for k in range(6) if k != 1} <= {e.thread_id for e in store.events()}


def test_a_failover_with_writers_running_loses_no_acknowledged_write(
    pair: tuple[PrivateCluster, PrivateCluster], tmp_path: Path
) -> None:
    """Kill -9 of the primary, its synchronous standby promoted: every acknowledged write is there, the same store objects carry on, outcome unknown only for writes in flight, verify and a checkpoint hold, cursors and owed wake-ups carry over."""
    started = time.monotonic()
    primary, standby = pair
    admin = sa.create_engine(primary.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.exec_driver_sql('CREATE DATABASE "failover"')
    admin.dispose()
    url = (
        "postgresql+psycopg://postgres@/failover"
        f"?host=127.0.0.1:{primary.port}&host=127.0.0.1:{standby.port}"
        "&target_session_attrs=read-write&connect_timeout=5"
    )
    wait_until("the standby to be synchronous", lambda: synchronous(primary))
    private_key, _ = generate_key(tmp_path / "signing")
    public_key = private_key.with_name(private_key.name + ".pub")

    with InterruptStore(url) as store, http_receiver() as receiver, Notifier(
        store, hook_config(tmp_path, receiver.url, events=["interrupt.resumed"]), from_start=True
    ) as notifier:
        store.setup()
        # The store does not ping the server before each checkout (SPEC §16 counts round
        # trips): a connection the failover cut is noticed by the call that uses it.
        assert store.engine.pool._pre_ping is False
        # Wake-ups owed before the failover: expiries swept without a callback.
        for k in range(3):
            store.mint(f"owed-{k}", marker())
        assert len(store.sweep(ttl_seconds=0, thread_ids=[f"owed-{k}" for k in range(3)]).expired) == 3

        stop = threading.Event()
        writers, threads = run_writers(store, notifier, stop)
        try:
            wait_until(
                f"{WARMUP} writes by each writer",
                lambda: all(len(w.acked) >= WARMUP or w.failed for w in writers),
                state=lambda: progress(writers),
            )
            checkpoint = store.checkpoint(private_key)
            owed_before = {(w["thread_id"], w["interrupt_id"]) for w in store.list_wakeups()}
            (status,) = notifier.status()
            cursor_before = status["position"]
            delivered_before = len(receiver.requests)

            primary.kill()
            killed_at = time.monotonic()
            standby.promote()
            promoted_at = time.monotonic()
            at_promotion = {w.name: len(w.acked) for w in writers}
            wait_until(
                f"{WARMUP} writes by each writer on the promoted standby",
                lambda: all(len(w.acked) >= at_promotion[w.name] + WARMUP or w.failed for w in writers),
                state=lambda: progress(writers),
            )
            first_after = time.monotonic()
        finally:
            stop.set()
            for t in threads:
                t.join(WAIT)
        assert not any(t.is_alive() for t in threads)
        assert [(w.name, w.failed) for w in writers if w.failed] == []

        # The same store object writes on the new primary, and the notifier catches up.
        assert store.mint("after", marker()) is True
        notifier.run_once()
        (status,) = notifier.status()
        assert status["position"] >= cursor_before

    # What the promoted standby holds, read on it directly.
    with InterruptStore(str(sa.make_url(standby.url).set(database="failover"))) as new:
        events = new.events()
        minted = {(e.thread_id, e.interrupt_id) for e in events if e.type == MINTED}
        resumed = {(e.thread_id, e.interrupt_id) for e in events if e.type == RESUMED}
        expired = {e.thread_id for e in events if e.type == EXPIRED}
        by_name = {w.name: w for w in writers}
        assert {what for what, _ in by_name["mint"].acked} <= minted
        assert {what for what, _ in by_name["answer"].acked} <= resumed
        swept_acked = {t for _, threads_expired in by_name["sweep"].acked for t in threads_expired}
        assert swept_acked <= expired
        assert "after" in {e.thread_id for e in events if e.type == MINTED}

        # Owed wake-ups: those read before, and every acknowledged expiry's, carry over.
        owed_after = {(w["thread_id"], w["interrupt_id"]) for w in new.list_wakeups()}
        assert owed_before <= owed_after
        assert swept_acked <= {thread for thread, _ in owed_after}

        # verify is clean, and the checkpoint signed before the kill still holds.
        report = new.verify()
        assert report.ok, report
        held = new.verify_checkpoint(checkpoint, public_keys=[public_key])
        assert held.ok, held.problems

    # The notifier's cursor carried over: nothing at or before it was sent again, and
    # every answer up to the end of the log was sent at least once.
    after_kill = [r.json()["data"]["position"] for r in receiver.requests[delivered_before:]]
    assert [p for p in after_kill if p <= cursor_before] == []
    sent = {r.json()["data"]["position"] for r in receiver.requests}
    assert sent == {e.position for e in events if e.type == RESUMED and e.position <= status["position"]}
    assert status["position"] == events[-1].position

    # Outcome unknown: only a write in flight when the primary died (one per writer at
    # most); the ones after it either failed unwritten (and were retried) or went through.
    assert [w.name for w in writers if len(w.unknown) > 1] == [], [(w.name, w.unknown) for w in writers]
    unknown = sum(len(w.unknown) for w in writers)
    print(
        f"\nfailover: {sum(len(w.acked) for w in writers)} acknowledged writes, "
        f"{unknown} of unknown outcome, "
        f"{sum(len(w.refused) for w in writers)} refused unwritten (retried); "
        f"promotion {promoted_at - killed_at:.2f} s after the kill, every writer again "
        f"{first_after - promoted_at:.2f} s after it; test {time.monotonic() - started:.1f} s"
    )
