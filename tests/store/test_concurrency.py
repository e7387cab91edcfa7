"""Real concurrency against one database: racing resumes, racing sweeps, racing writers.

Every worker thread has its own ``InterruptStore`` (its own engine and connections), and
the workers are lined up on a ``threading.Barrier`` so their transactions really overlap.
The clock is not frozen here (freezegun patches it process-wide); staleness comes from
markers whose ``minted_at`` is already old, or from a run_id that moved on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import factories
import pytest
from langgraph.types import Command

from symfonic_store import (
    EXPIRED,
    MINTED,
    RESUME_REJECTED,
    RESUMED,
    AsyncInterruptStore,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStore,
    SymfonicStoreError,
)
from symfonic_store.events import StoredEvent

# A hung worker fails the test instead of hanging the suite.
JOIN_TIMEOUT = 60.0
HOUR = 3600.0


# A seed-shaped marker dict minted ``age`` seconds ago.
marker = partial(factories.plain_marker, payload={"amount": 420, "order": 1181})


class Outcome:
    """What one worker returned or raised."""

    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None


def run_together(workers: list[Callable[[], Any]]) -> list[Outcome]:
    """Start every worker in its own thread, release them at once, wait for all."""
    barrier = threading.Barrier(len(workers))
    outcomes = [Outcome() for _ in workers]

    def body(work: Callable[[], Any], outcome: Outcome) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            outcome.value = work()
        except BaseException as exc:  # reported to the test thread
            outcome.error = exc

    threads = [
        threading.Thread(target=body, args=(work, outcome), daemon=True)
        for work, outcome in zip(workers, outcomes, strict=True)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + JOIN_TIMEOUT
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"workers still running after {JOIN_TIMEOUT}s (deadlock?): {hung}"
    return outcomes


@pytest.fixture
def open_store(migrated_url: str, store: InterruptStore) -> Iterator[Callable[..., InterruptStore]]:
    """Opens extra stores on the migrated database (one per worker); closes them after."""
    opened: list[InterruptStore] = []

    def open_one(**kwargs: Any) -> InterruptStore:
        s = InterruptStore(migrated_url, **kwargs)
        # Connect and check the schema now, so the barrier lines up the writes themselves.
        s.state("warm-up")
        opened.append(s)
        return s

    yield open_one
    for s in opened:
        s.close()


def endings(events: list[StoredEvent]) -> Counter[tuple[str, str | None]]:
    """How many terminal events each (thread, interrupt) has."""
    return Counter((e.thread_id, e.interrupt_id) for e in events if e.type in (RESUMED, EXPIRED))


def all_events(store: InterruptStore) -> list[StoredEvent]:
    return store.events()


def assert_gapless(store: InterruptStore, thread_id: str) -> list[StoredEvent]:
    history = store.history(thread_id)
    assert [e.version for e in history] == list(range(1, len(history) + 1))
    return history


# --- 1. racing resumes ----------------------------------------------------------------


def test_eight_racing_resumes_admit_exactly_one(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """Eight approvers resuming one interrupt at once: one command, seven refusals, one ending."""
    store.mint("t-race", marker("i-race"))
    stores = [open_store() for _ in range(8)]
    workers = [
        (lambda s=s, n=n: s.resume("t-race", "i-race", {"approved": True}, actor=f"approver-{n}"))
        for n, s in enumerate(stores)
    ]

    outcomes = run_together(workers)

    winners = [o for o in outcomes if o.error is None]
    losers = [o for o in outcomes if o.error is not None]
    assert len(winners) == 1
    assert isinstance(winners[0].value, Command)
    assert winners[0].value.resume == {"approved": True}
    assert len(losers) == 7
    for o in losers:
        assert isinstance(o.error, SymfonicStoreError)
        assert isinstance(o.error, InterruptAlreadyResolvedError), repr(o.error)

    history = assert_gapless(store, "t-race")
    types = Counter(e.type for e in history)
    assert types[RESUMED] == 1
    assert types[RESUME_REJECTED] == 7
    assert types[MINTED] == 1
    rejected = [e for e in history if e.type == RESUME_REJECTED]
    assert {e.data["why"] for e in rejected} == {"already_resolved"}
    resumed = next(e for e in history if e.type == RESUMED)
    assert resumed.actor not in {e.actor for e in rejected}
    assert store.pending("t-race") is None
    assert store.verify().ok


def test_racing_resumes_of_a_stale_interrupt_expire_it_once(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """Eight resumes racing on a TTL-stale interrupt: all refused, one expiry, eight rejections."""
    store.mint("t-stale", marker("i-stale", age=HOUR))
    stores = [open_store(ttl_seconds=60) for _ in range(8)]
    workers = [
        (lambda s=s, n=n: s.resume("t-stale", "i-stale", {"approved": True}, actor=f"a-{n}"))
        for n, s in enumerate(stores)
    ]

    outcomes = run_together(workers)

    for o in outcomes:
        assert isinstance(o.error, InterruptExpiredError), repr(o.error or o.value)
        assert o.error.reason == "ttl"
    history = assert_gapless(store, "t-stale")
    expired = [e for e in history if e.type == EXPIRED]
    assert [(e.data["reason"], e.data["detected_by"]) for e in expired] == [("ttl", "resume")]
    rejected = [e for e in history if e.type == RESUME_REJECTED]
    assert len(rejected) == 8
    assert {e.data["why"] for e in rejected} == {"expired"}
    assert not any(e.type == RESUMED for e in history)
    assert store.verify().ok


def test_cancel_racing_approvals_gives_one_ending(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """Four approvals and four cancellations at once: one wins, the rest are refused."""
    store.mint("t-tug", marker("i-tug"))
    approvers = [open_store() for _ in range(4)]
    cancellers = [open_store() for _ in range(4)]
    workers: list[Callable[[], Any]] = [
        (lambda s=s, n=n: s.resume("t-tug", "i-tug", {"approved": True}, actor=f"a-{n}"))
        for n, s in enumerate(approvers)
    ]
    workers += [
        (lambda s=s, n=n: s.expire("t-tug", "i-tug", actor=f"c-{n}"))
        for n, s in enumerate(cancellers)
    ]

    outcomes = run_together(workers)

    history = assert_gapless(store, "t-tug")
    ends = [e for e in history if e.type in (RESUMED, EXPIRED)]
    assert len(ends) == 1
    succeeded = [o for o in outcomes if o.error is None]
    assert len(succeeded) == 1
    refusal = InterruptAlreadyResolvedError if ends[0].type == RESUMED else InterruptExpiredError
    for o in outcomes:
        if o.error is not None:
            assert isinstance(o.error, refusal), repr(o.error)
    if ends[0].type == RESUMED:
        assert isinstance(succeeded[0].value, Command)
    else:
        assert (ends[0].data["reason"], ends[0].data["detected_by"]) == ("cancelled", "api")
    assert store.pending("t-tug") is None
    assert store.verify().ok


async def test_async_store_racing_resumes_on_one_event_loop(astore: AsyncInterruptStore) -> None:
    """Eight resumes gathered on one asyncio store (its pooled connections): one command."""
    await astore.mint("t-async", marker("i-async"))

    answers = await asyncio.gather(
        *[
            astore.resume("t-async", "i-async", {"approved": True}, actor=f"a-{n}")
            for n in range(8)
        ],
        return_exceptions=True,
    )

    assert sum(isinstance(a, Command) for a in answers) == 1
    assert sum(isinstance(a, InterruptAlreadyResolvedError) for a in answers) == 7
    history = await astore.history("t-async")
    assert [e.version for e in history] == list(range(1, 10))
    assert Counter(e.type for e in history) == {MINTED: 1, RESUMED: 1, RESUME_REJECTED: 7}
    assert (await astore.verify()).ok


# --- racing mints ------------------------------------------------------------------------


def test_racing_mints_of_one_marker_on_a_new_thread_record_it_once(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """Eight writers minting the same marker on a thread that does not exist yet: one mint."""
    stores = [open_store() for _ in range(8)]
    the_marker = marker("i-same")

    outcomes = run_together([lambda s=s: s.mint("t-new", the_marker) for s in stores])

    for o in outcomes:
        assert o.error is None, repr(o.error)
    assert sorted(o.value for o in outcomes) == [False] * 7 + [True]
    history = assert_gapless(store, "t-new")
    assert [e.type for e in history] == [MINTED]
    assert store.pending("t-new") == the_marker
    assert store.verify().ok


def test_racing_mints_of_different_markers_leave_one_pending(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """Eight different interrupts minted on one thread at once: the last stands, seven superseded."""
    stores = [open_store() for _ in range(8)]

    outcomes = run_together(
        [lambda s=s, n=n: s.mint("t-many", marker(f"i-{n}")) for n, s in enumerate(stores)]
    )

    for o in outcomes:
        assert o.error is None, repr(o.error)
        assert o.value is True
    history = assert_gapless(store, "t-many")
    mints = [e for e in history if e.type == MINTED]
    expiries = [e for e in history if e.type == EXPIRED]
    assert len(mints) == 8
    assert len(expiries) == 7
    assert {e.data["reason"] for e in expiries} == {"superseded"}
    # Each mint but the last supersedes exactly the one before it.
    assert [e.interrupt_id for e in expiries] == [e.interrupt_id for e in mints[:-1]]
    pending = store.pending("t-many")
    assert pending is not None
    assert pending["interrupt_id"] == mints[-1].interrupt_id
    assert set(endings(history).values()) == {1}
    assert store.verify().ok


# --- 2. racing sweeps -----------------------------------------------------------------


def seed_interrupts(
    store: InterruptStore, n: int, *, prefix: str, age: float, every_run_id: int = 0
) -> dict[str, str]:
    """Mint one interrupt per thread; every ``every_run_id``-th goes stale by run_id instead."""
    minted: dict[str, str] = {}
    for k in range(n):
        thread_id, interrupt_id = f"{prefix}-{k:04d}", f"i-{prefix}-{k:04d}"
        if every_run_id and k % every_run_id == 0:
            store.mint(thread_id, marker(interrupt_id, run_id="r1"))
            store.record_route(thread_id, "finish", run_id="r2")
        else:
            store.mint(thread_id, marker(interrupt_id, age=age))
        minted[thread_id] = interrupt_id
    return minted


@pytest.mark.parametrize("batch_size", [500, 7])
def test_two_sweeps_at_once_expire_each_interrupt_exactly_once(
    store: InterruptStore,
    open_store: Callable[..., InterruptStore],
    batch_size: int,
) -> None:
    """Two concurrent sweeps over 300 stale interrupts expire each one once, between them."""
    stale = seed_interrupts(store, 300, prefix="s", age=HOUR, every_run_id=10)
    fresh = seed_interrupts(store, 5, prefix="f", age=0.0)
    sweepers = [open_store(), open_store()]

    outcomes = run_together(
        [lambda s=s: s.sweep(ttl_seconds=60, batch_size=batch_size) for s in sweepers]
    )

    for o in outcomes:
        assert o.error is None, repr(o.error)
    reports = [o.value for o in outcomes]
    listed = [entry for r in reports for entry in r.expired]
    assert len(listed) == len(set(listed)), "an interrupt was reported by both sweeps"
    assert {(t, i) for t, i, _ in listed} == set(stale.items())
    reasons = {t: reason for t, _, reason in listed}
    assert {t for t, r in reasons.items() if r == "run_id"} == {
        t for k, t in enumerate(sorted(stale)) if k % 10 == 0
    }

    events = all_events(store)
    ends = endings(events)
    assert set(ends) == set(stale.items())
    assert set(ends.values()) == {1}
    assert all(
        e.data["detected_by"] == "sweep" for e in events if e.type == EXPIRED
    )
    for thread_id in fresh:
        assert store.is_current(thread_id, 60)
    assert store.sweep(ttl_seconds=60).expired == []
    assert store.verify().ok


def test_two_sweeps_at_once_deliver_each_owed_wake_up_exactly_once(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """Two sweeps delivering 120 owed wake-ups at the same time call back for each exactly once between them."""
    stale = seed_interrupts(store, 120, prefix="w", age=HOUR)
    assert store.sweep(ttl_seconds=60).owed == 120  # no callback: every wake-up owed
    sweepers = [open_store(), open_store()]
    calls: list[list[tuple[str, str]]] = [[], []]
    # Neither sweep delivers anything before both hold wake-ups: their deliveries overlap.
    both_hold = threading.Barrier(2)

    def delivering(k: int) -> Callable[[], Any]:
        def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
            if not calls[k]:
                both_hold.wait(timeout=JOIN_TIMEOUT)
            calls[k].append((thread_id, interrupt_id))

        return lambda: sweepers[k].sweep(ttl_seconds=60, batch_size=7, on_expired=on_expired)

    outcomes = run_together([delivering(0), delivering(1)])

    for o in outcomes:
        assert o.error is None, repr(o.error)
    delivered = calls[0] + calls[1]
    assert len(delivered) == len(set(delivered)) == len(stale), "a wake-up was delivered twice"
    assert set(delivered) == set(stale.items())
    assert calls[0] and calls[1]
    assert sum(len(o.value.redelivered) for o in outcomes) == len(stale)
    assert all(o.value.expired == [] for o in outcomes)
    assert store.sweep(ttl_seconds=60).owed == 0


# --- 3. a sweep racing resumes ----------------------------------------------------------


def test_sweep_racing_resumes_ends_every_interrupt_once(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """A sweep and four resumers over the same interrupts: each one ends exactly once."""
    # Stale for the sweep (ttl 60 s), current for the resumers' stores (no TTL).
    minted = seed_interrupts(store, 80, prefix="r", age=HOUR)
    threads = sorted(minted)
    sweeper = open_store()
    resumers = [open_store() for _ in range(4)]

    def resume_share(s: InterruptStore, share: list[str]) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for thread_id in share:
            try:
                answers[thread_id] = s.resume(
                    thread_id, minted[thread_id], {"approved": True}, actor="ops"
                )
            except SymfonicStoreError as exc:
                answers[thread_id] = exc
        return answers

    # Resumers walk from the far end so they meet the sweep part-way through.
    shares = [list(reversed(threads[k::4])) for k in range(4)]
    workers: list[Callable[[], Any]] = [lambda: sweeper.sweep(ttl_seconds=60, batch_size=5)]
    workers += [lambda s=s, sh=sh: resume_share(s, sh) for s, sh in zip(resumers, shares, strict=True)]

    outcomes = run_together(workers)

    for o in outcomes:
        assert o.error is None, repr(o.error)
    report = outcomes[0].value
    answers: dict[str, Any] = {}
    for o in outcomes[1:]:
        answers.update(o.value)
    swept = {t for t, _, _ in report.expired}
    assert len(swept) == len(report.expired)

    events = all_events(store)
    ends = endings(events)
    assert set(ends) == set(minted.items())
    assert set(ends.values()) == {1}
    ending_type = {e.thread_id: e for e in events if e.type in (RESUMED, EXPIRED)}
    for thread_id in threads:
        answer = answers[thread_id]
        if isinstance(answer, Command):
            assert ending_type[thread_id].type == RESUMED
            assert thread_id not in swept
        else:
            assert isinstance(answer, InterruptExpiredError | InterruptAlreadyResolvedError), (
                repr(answer)
            )
            assert ending_type[thread_id].type == EXPIRED
            assert ending_type[thread_id].data["detected_by"] == "sweep"
            assert thread_id in swept
    for thread_id in threads:
        assert_gapless(store, thread_id)
    assert store.list_pending() == []
    assert store.verify().ok


# --- 4. racing writers on one thread -----------------------------------------------------


def test_racing_writers_on_one_thread_keep_versions_gapless(
    store: InterruptStore, open_store: Callable[..., InterruptStore]
) -> None:
    """Eight writers appending 25 route decisions each to one new thread lose nothing."""
    stores = [open_store() for _ in range(8)]

    def write(s: InterruptStore, n: int) -> None:
        for k in range(25):
            s.record_route("t-hot", "finish", run_id=f"w{n}-{k:02d}")

    outcomes = run_together([lambda s=s, n=n: write(s, n) for n, s in enumerate(stores)])

    for o in outcomes:
        assert o.error is None, repr(o.error)
    history = assert_gapless(store, "t-hot")
    assert len(history) == 200
    run_ids = [e.run_id for e in history]
    assert len(set(run_ids)) == 200
    assert set(run_ids) == {f"w{n}-{k:02d}" for n in range(8) for k in range(25)}
    # Each writer's own appends keep their order.
    for n in range(8):
        mine = [r for r in run_ids if r is not None and r.startswith(f"w{n}-")]
        assert mine == sorted(mine)
    positions = [e.position for e in history]
    assert positions == sorted(positions)
    assert store.state("t-hot")["run_id"] == run_ids[-1]
    report = store.verify()
    assert report.ok, str(report)
