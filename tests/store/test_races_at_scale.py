"""Races at scale: many workers resume, sweep, expire and mint on a few threads at once.

Each worker is a real thread with its own :class:`InterruptStore` (its own small
connection pool) on the same database. Every operation a worker sees succeed is written
down, and afterwards the log must hold exactly those events: no double ending (I3), no
lost or phantom event, gapless versions per thread (I2), every minted interrupt in
exactly one of pending / resumed / expired (audit and projection agree), and the
projection equal to the fold (I6).

The default counts keep CI fast; ``SYMFONIC_STORE_STRESS=1`` runs the full 32 workers x
200 rounds (see docs/reliability.md).
"""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa

from symfonic_store import (
    EXPIRED,
    MINTED,
    RESUME_REJECTED,
    RESUMED,
    ROUTE_DECIDED,
    ConcurrencyConflictError,
    DatabaseError,
    InterruptExpiredError,
    InterruptStateError,
    InterruptStore,
    StoredEvent,
    SymfonicStoreError,
    build_interrupt_marker,
    new_interrupt_id,
)
from symfonic_store.projection import fold

STRESS_ENV = "SYMFONIC_STORE_STRESS"
STRESS = os.environ.get(STRESS_ENV, "") not in ("", "0")

TTL = 3600.0
THREADS = ("race-a", "race-b", "race-c", "race-d")
ENDINGS = (RESUMED, EXPIRED)


def counts(backend: str) -> tuple[int, int]:
    """(workers, rounds): the full stress run behind the env var, a reduced one by default."""
    if STRESS:
        return 32, 200
    return (8, 25) if backend == "postgresql" else (6, 20)


@dataclass
class Ledger:
    """What one worker saw committed (and what it saw fail)."""

    mints: set[tuple[str, str]] = field(default_factory=set)
    mint_actors: set[str] = field(default_factory=set)
    routes: set[str] = field(default_factory=set)
    resumes: set[tuple[str, str, str]] = field(default_factory=set)
    rejections: set[str] = field(default_factory=set)
    expired_by_resume_error: int = 0
    api_expiries: set[tuple[str, str, str]] = field(default_factory=set)
    sweep_expiries: list[tuple[str, str, str]] = field(default_factory=list)
    conflicts: int = 0
    database_errors: list[str] = field(default_factory=list)
    foreign_errors: list[str] = field(default_factory=list)


def worker(
    url_engine: sa.Engine, n: int, rounds: int, start: threading.Barrier, ledger: Ledger
) -> None:
    """One racer: a mix of mints, resumes, sweeps, API expiries and route decisions."""
    rng = random.Random(n)
    store = InterruptStore(url_engine, ttl_seconds=TTL)
    seen: list[tuple[str, str]] = []
    try:
        start.wait()
        for r in range(rounds):
            tag = f"w{n}-r{r}"
            thread = rng.choice(THREADS)
            roll = rng.random()
            try:
                if roll < 0.25:
                    iid = new_interrupt_id()
                    marker = build_interrupt_marker(
                        name="approval_required",
                        interrupt_id=iid,
                        payload={"worker": n, "round": r},
                        run_id=rng.choice([None, f"run-{n}"]),
                    )
                    if rng.random() < 0.3:
                        # Old enough to be stale by TTL: the sweep and resume race for it.
                        marker["_interrupt_pending"]["minted_at"] = time.time() - 10 * TTL
                    if store.mint(thread, marker, actor=tag):
                        ledger.mints.add((thread, iid))
                        ledger.mint_actors.add(tag)
                    seen.append((thread, iid))
                elif roll < 0.60:
                    pending = store.pending(thread)
                    if pending is not None and rng.random() < 0.85:
                        target = (thread, pending["interrupt_id"])
                    elif seen:
                        target = rng.choice(seen)
                    else:
                        continue
                    try:
                        store.resume(target[0], target[1], {"by": tag}, actor=tag)
                    except InterruptStateError as exc:
                        ledger.rejections.add(tag)
                        if isinstance(exc, InterruptExpiredError):
                            ledger.expired_by_resume_error += 1
                    else:
                        ledger.resumes.add((target[0], target[1], tag))
                elif roll < 0.75:
                    report = store.sweep(ttl_seconds=TTL, batch_size=rng.choice([1, 2, 500]))
                    ledger.sweep_expiries.extend(report.expired)
                elif roll < 0.85:
                    pending = store.pending(thread)
                    if pending is None:
                        continue
                    try:
                        store.expire(thread, pending["interrupt_id"], actor=tag)
                    except InterruptStateError:
                        pass  # someone else ended it first: nothing is written
                    else:
                        ledger.api_expiries.add((thread, pending["interrupt_id"], tag))
                else:
                    # A new run on the thread makes a marker with another run_id stale.
                    store.record_route(thread, "finish", run_id=tag)
                    ledger.routes.add(tag)
            except ConcurrencyConflictError:
                ledger.conflicts += 1
            except DatabaseError as exc:
                ledger.database_errors.append(str(exc))
            except SymfonicStoreError:
                raise
    except SymfonicStoreError as exc:
        ledger.foreign_errors.append(f"unexpected store error: {exc!r}")
    except BaseException:
        ledger.foreign_errors.append(traceback.format_exc())
    finally:
        store.close()


@pytest.fixture
def race_engine(migrated_url: str) -> Iterator[sa.Engine]:
    """A migrated database; workers share its URL but each gets a small pool of its own."""
    with InterruptStore(migrated_url) as s:
        s.setup()
    engine = sa.create_engine(migrated_url)
    yield engine
    engine.dispose()


def run_race(db_url: str, backend: str) -> tuple[list[Ledger], int, int]:
    workers, rounds = counts(backend)
    start = threading.Barrier(workers)
    ledgers = [Ledger() for _ in range(workers)]
    engines = [
        sa.create_engine(db_url, pool_size=2, max_overflow=0) for _ in range(workers)
    ]
    threads = [
        threading.Thread(target=worker, args=(engines[n], n, rounds, start, ledgers[n]))
        for n in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    for e in engines:
        e.dispose()
    assert not any(t.is_alive() for t in threads), "a worker never finished"
    return ledgers, workers, rounds


def all_events(store: InterruptStore) -> list[StoredEvent]:
    return list(store.iter_events(page_size=500))


def test_racing_resumes_sweeps_and_mints_keep_every_invariant(
    migrated_url: str, backend: str, race_engine: sa.Engine
) -> None:
    """Racing workers on a few threads leave one ending per interrupt, no lost event, no gap."""
    ledgers, workers, rounds = run_race(migrated_url, backend)

    foreign = [e for led in ledgers for e in led.foreign_errors]
    assert foreign == [], "only SymfonicStoreError may reach a worker:\n" + "\n".join(foreign)
    database_errors = [e for led in ledgers for e in led.database_errors]
    if backend == "postgresql":
        assert database_errors == []

    with InterruptStore(migrated_url) as store:
        events = all_events(store)
        # The database's view: no interrupt with two terminal events (I3).
        with race_engine.connect() as conn:
            doubles = conn.execute(
                sa.text(
                    "SELECT thread_id, interrupt_id, count(*) FROM symfonic_events "
                    "WHERE type IN ('interrupt.resumed', 'interrupt.expired') "
                    "GROUP BY thread_id, interrupt_id HAVING count(*) > 1"
                )
            ).all()
            table_count = conn.execute(sa.text("SELECT count(*) FROM symfonic_events")).scalar()
        assert doubles == []
        assert table_count == len(events)

        # The same, from Python over events().
        endings = Counter((e.thread_id, e.interrupt_id) for e in events if e.type in ENDINGS)
        assert [k for k, n in endings.items() if n > 1] == []

        # Positions unique (increasing on SQLite, whose one writer commits them in order;
        # PostgreSQL's parallel writers may commit them out of order, SPEC §11);
        # versions 1..n per thread, in the order events() gives (I2, I11).
        positions = [e.position for e in events]
        assert len(positions) == len(set(positions))
        if backend == "sqlite":
            assert positions == sorted(positions)
        by_thread: dict[str, list[int]] = {}
        for e in events:
            by_thread.setdefault(e.thread_id, []).append(e.version)
        for thread, versions in by_thread.items():
            assert versions == list(range(1, len(versions) + 1)), thread

        # Nothing lost, nothing invented: the log holds exactly what workers saw commit.
        mints = {m for led in ledgers for m in led.mints}
        assert {(e.thread_id, e.interrupt_id) for e in events if e.type == MINTED} == mints
        mint_actors = {a for led in ledgers for a in led.mint_actors}
        assert {e.actor for e in events if e.type == MINTED} == mint_actors
        assert sum(len(led.mints) for led in ledgers) == len(mints)

        routes = {r for led in ledgers for r in led.routes}
        assert {e.run_id for e in events if e.type == ROUTE_DECIDED} == routes
        assert sum(1 for e in events if e.type == ROUTE_DECIDED) == len(routes)

        resumes = {x for led in ledgers for x in led.resumes}
        logged_resumes = {
            (e.thread_id, e.interrupt_id, e.actor) for e in events if e.type == RESUMED
        }
        assert logged_resumes == resumes
        for e in events:
            if e.type == RESUMED:
                assert e.data["response"] == {"by": e.actor}

        rejections = {x for led in ledgers for x in led.rejections}
        logged_rejections = [e.actor for e in events if e.type == RESUME_REJECTED]
        assert sorted(logged_rejections) == sorted(rejections)

        expired = [e for e in events if e.type == EXPIRED]
        api = {x for led in ledgers for x in led.api_expiries}
        assert {
            (e.thread_id, e.interrupt_id, e.actor)
            for e in expired
            if e.data["detected_by"] == "api"
        } == api
        swept = [x for led in ledgers for x in led.sweep_expiries]
        assert sorted(
            (e.thread_id, str(e.interrupt_id), e.data["reason"])
            for e in expired
            if e.data["detected_by"] == "sweep"
        ) == sorted(swept)
        by_key = {(e.thread_id, e.version): e for e in events}
        resume_expiries = [e for e in expired if e.data["detected_by"] == "resume"]
        for e in resume_expiries:
            after = by_key[(e.thread_id, e.version + 1)]
            assert after.type == RESUME_REJECTED and after.interrupt_id == e.interrupt_id
        assert len(resume_expiries) <= sum(led.expired_by_resume_error for led in ledgers)
        for e in expired:
            if e.data["detected_by"] == "mint":
                after = by_key[(e.thread_id, e.version + 1)]
                assert after.type == MINTED
                assert after.interrupt_id == e.data["superseded_by"]
        assert {e.data["detected_by"] for e in expired} <= {"api", "sweep", "resume", "mint"}
        total = len(mints) + len(routes) + len(resumes) + len(rejections)
        total += len(expired)
        assert total == len(events)

        # Every minted interrupt in exactly one of pending / resumed / expired.
        resumed_keys = {(e.thread_id, e.interrupt_id) for e in events if e.type == RESUMED}
        expired_keys = {(e.thread_id, e.interrupt_id) for e in expired}
        assert resumed_keys.isdisjoint(expired_keys)
        pending_keys = mints - resumed_keys - expired_keys
        records = store.audit()
        assert len(records) == len(mints)
        by_outcome: dict[str, set[tuple[str, str]]] = {"pending": set(), "resumed": set(), "expired": set()}
        for rec in records:
            by_outcome[rec.outcome].add((rec.thread_id, rec.interrupt_id))
        assert by_outcome == {
            "pending": pending_keys,
            "resumed": resumed_keys,
            "expired": expired_keys,
        }
        projected = {
            (t, p["interrupt_id"])
            for t in THREADS
            if (p := store.pending(t)) is not None
        }
        assert projected == pending_keys
        assert {(p["thread_id"], p["interrupt_id"]) for p in store.list_pending()} == pending_keys
        assert len(pending_keys) <= len(THREADS)

        # The persisted projection equals the pure fold (I6), and every chain verifies (I9).
        folded = fold(events)
        for t in THREADS:
            if t in folded:
                assert store.state(t) == folded[t].as_state()
        assert store.verify().ok

    # The race really raced: answers collided, and resumes and another path (a sweep or
    # the API) ended some. Which of the two others wins an interrupt is up to the
    # scheduler: on a loaded machine the resumes can leave the sweeps nothing stale.
    attempted = workers * rounds
    assert len(events) > attempted // 4, "the race did too little to prove anything"
    assert resumes and rejections and (swept or api)

