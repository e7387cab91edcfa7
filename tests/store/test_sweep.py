"""The sweep: which stale interrupts it expires, when, why, and what it tells the caller.

The clock is frozen with ``freezegun`` and moved by hand; nothing sleeps. (Sweeps racing
each other or racing resumes are in ``test_concurrency.py``.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import partial
from typing import Any

import factories
import pytest
from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory

from symfonic_store import (
    EXPIRED,
    MINTED,
    AsyncInterruptStore,
    InterruptStore,
)

START = "2030-01-01 00:00:00"


@pytest.fixture
def clock() -> Iterator[FrozenDateTimeFactory]:
    """The clock, frozen at a whole second and moved only by the test."""
    with freeze_time(START, ignore=["_pytest.timing"]) as frozen:
        yield frozen


@pytest.fixture
def open_store(migrated_url: str, store: InterruptStore) -> Iterator[Callable[..., InterruptStore]]:
    """Opens more stores (other TTLs, other connections) on the migrated database."""
    opened: list[InterruptStore] = []

    def open_one(**kwargs: Any) -> InterruptStore:
        s = InterruptStore(migrated_url, **kwargs)
        opened.append(s)
        return s

    yield open_one
    for s in opened:
        s.close()


mint = partial(factories.mint, payload={"refund": 420, "order": 1181})


def expiries(store: InterruptStore, thread_id: str) -> list[tuple[str | None, str, str]]:
    """``(interrupt_id, reason, detected_by)`` of each of the thread's expiry events."""
    return [
        (e.interrupt_id, e.data["reason"], e.data["detected_by"])
        for e in store.history(thread_id)
        if e.type == EXPIRED
    ]


# --- the TTL boundary -------------------------------------------------------------------


def test_sweep_expires_strictly_past_the_ttl(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Exactly at the TTL the interrupt is current and kept; one millisecond later it expires."""
    mint(store, "t-1", "i-1")

    clock.tick(timedelta(seconds=60))
    at_ttl = store.sweep(ttl_seconds=60)
    assert at_ttl.expired == []
    assert store.is_current("t-1", 60)
    assert expiries(store, "t-1") == []

    clock.tick(timedelta(milliseconds=1))
    assert not store.is_current("t-1", 60)
    past_ttl = store.sweep(ttl_seconds=60)
    assert past_ttl.expired == [("t-1", "i-1", "ttl")]
    assert all(isinstance(part, str) for entry in past_ttl.expired for part in entry)
    assert expiries(store, "t-1") == [("i-1", "ttl", "sweep")]
    assert store.pending("t-1") is None
    assert store.list_pending() == []


def test_sweep_uses_the_store_ttl_and_the_argument_overrides_it(
    open_store: Callable[..., InterruptStore], clock: FrozenDateTimeFactory
) -> None:
    """``sweep(ttl_seconds=...)`` beats the store's TTL, whether shorter or longer."""
    long_ttl = open_store(ttl_seconds=3600)
    short_ttl = open_store(ttl_seconds=60)
    mint(long_ttl, "t-a", "i-a")
    mint(long_ttl, "t-b", "i-b")
    clock.tick(timedelta(seconds=120))

    # A longer TTL given to the short-TTL store keeps both.
    kept = short_ttl.sweep(ttl_seconds=3600)
    assert kept.expired == []
    assert kept.ttl_seconds == 3600
    # The long-TTL store on its own keeps them too.
    assert long_ttl.sweep().expired == []
    # A shorter TTL given to the long-TTL store expires them.
    report = long_ttl.sweep(ttl_seconds=60, batch_size=1)
    assert report.ttl_seconds == 60
    assert report.expired == [("t-a", "i-a", "ttl"), ("t-b", "i-b", "ttl")]


def test_sweep_without_an_argument_applies_the_store_ttl(
    open_store: Callable[..., InterruptStore], clock: FrozenDateTimeFactory
) -> None:
    """A store built with a TTL sweeps by it when no ``ttl_seconds`` is given."""
    ttl_store = open_store(ttl_seconds=60)
    mint(ttl_store, "t-1", "i-1")
    clock.tick(timedelta(seconds=61))

    report = ttl_store.sweep()

    assert report.ttl_seconds == 60
    assert report.expired == [("t-1", "i-1", "ttl")]


def test_sweep_without_any_ttl_leaves_old_interrupts_alone(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """With no TTL anywhere, age alone never expires an interrupt."""
    mint(store, "t-1", "i-1")
    mint(store, "t-2", "i-2", run_id="r1")
    clock.tick(timedelta(days=400))

    assert store.sweep().expired == []
    assert [p["thread_id"] for p in store.list_pending()] == ["t-1", "t-2"]


# --- run_id staleness and reason precedence ----------------------------------------------


def test_sweep_expires_a_run_that_moved_on_even_without_a_ttl(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """A marker minted in run r1 on a thread now in run r2 is expired with reason ``run_id``."""
    mint(store, "t-moved", "i-moved", run_id="r1")
    mint(store, "t-same", "i-same", run_id="r1")
    mint(store, "t-none", "i-none")
    store.record_route("t-moved", "finish", run_id="r2")
    store.record_route("t-none", "finish", run_id="r2")
    assert store.state("t-moved")["run_id"] == "r2"

    report = store.sweep()

    assert report.expired == [("t-moved", "i-moved", "run_id")]
    assert expiries(store, "t-moved") == [("i-moved", "run_id", "sweep")]
    # Same run, or a marker without a run_id: still current (P3).
    assert store.is_current("t-same")
    assert store.is_current("t-none")


def test_run_id_reason_wins_when_the_ttl_has_also_passed(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """A marker stale by both rules is expired once, with reason ``run_id`` (checked first)."""
    mint(store, "t-1", "i-1", run_id="r1")
    store.record_route("t-1", "continue", run_id="r2")
    clock.tick(timedelta(hours=2))

    report = store.sweep(ttl_seconds=60)

    assert report.expired == [("t-1", "i-1", "run_id")]
    assert expiries(store, "t-1") == [("i-1", "run_id", "sweep")]


# --- markers the TTL does not apply to -------------------------------------------------


@pytest.mark.parametrize(
    "minted_at", ["2029-12-31T00:00:00Z", None, "missing"], ids=["text", "none", "missing"]
)
def test_marker_without_numeric_minted_at_is_never_ttl_expired(
    store: InterruptStore, clock: FrozenDateTimeFactory, minted_at: Any
) -> None:
    """A ``minted_at`` that is text, None or absent skips the TTL: the sweep keeps it."""
    odd = {"name": "approval_required", "interrupt_id": "i-odd", "payload": {}}
    if minted_at != "missing":
        odd["minted_at"] = minted_at
    store.mint("t-odd", odd)
    mint(store, "t-numeric", "i-numeric")
    clock.tick(timedelta(days=365))

    report = store.sweep(ttl_seconds=0)

    assert report.expired == [("t-numeric", "i-numeric", "ttl")]
    assert store.is_current("t-odd", 0)
    assert store.pending("t-odd") is not None
    assert expiries(store, "t-odd") == []


# --- dry run and idempotence --------------------------------------------------------------


def test_dry_run_reports_the_same_list_and_writes_nothing(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """``dry_run=True`` lists what a real sweep then expires, and writes nothing itself."""
    for k in range(4):
        mint(store, f"t-{k}", f"i-{k}")
    mint(store, "t-moved", "i-moved", run_id="r1")
    store.record_route("t-moved", "finish", run_id="r2")
    clock.tick(timedelta(seconds=90))
    mint(store, "t-fresh", "i-fresh")
    before = store.events()
    pending_before = store.list_pending()
    called: list[tuple[str, str, str]] = []

    dry = store.sweep(ttl_seconds=60, dry_run=True, on_expired=lambda *a: called.append(a))

    assert dry.dry_run is True
    assert sorted(dry.expired) == [
        ("t-0", "i-0", "ttl"),
        ("t-1", "i-1", "ttl"),
        ("t-2", "i-2", "ttl"),
        ("t-3", "i-3", "ttl"),
        ("t-moved", "i-moved", "run_id"),
    ]
    assert store.events() == before
    assert store.list_pending() == pending_before
    assert called == []

    real = store.sweep(ttl_seconds=60)
    assert real.dry_run is False
    assert real.expired == dry.expired
    assert [p["thread_id"] for p in store.list_pending()] == ["t-fresh"]


def test_second_sweep_finds_nothing(store: InterruptStore, clock: FrozenDateTimeFactory) -> None:
    """A sweep run again right after another expires nothing and appends no event."""
    for k in range(3):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))
    first = store.sweep(ttl_seconds=60)
    assert len(first.expired) == 3
    events_after_first = store.events()

    second = store.sweep(ttl_seconds=60)

    assert second.expired == []
    assert second.count == 0
    assert store.events() == events_after_first


def test_batch_size_one_still_expires_every_thread(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Batches of one thread each walk every stale thread, in thread order, once."""
    threads = [f"t-{k}" for k in range(7)]
    for k, thread_id in enumerate(threads):
        mint(store, thread_id, f"i-{k}")
    # A current interrupt between stale ones must not stop the walk.
    clock.tick(timedelta(seconds=61))
    mint(store, "t-3b", "i-3b")

    report = store.sweep(ttl_seconds=60, batch_size=1)

    assert report.expired == [(t, f"i-{k}", "ttl") for k, t in enumerate(threads)]
    assert [p["thread_id"] for p in store.list_pending()] == ["t-3b"]
    for thread_id in threads:
        assert len(expiries(store, thread_id)) == 1


# --- on_expired --------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [500, 2])
def test_on_expired_is_called_once_per_expiry_after_commit(
    store: InterruptStore,
    open_store: Callable[..., InterruptStore],
    clock: FrozenDateTimeFactory,
    batch_size: int,
) -> None:
    """Each expired interrupt gets one call, and a separate connection already sees it expired."""
    for k in range(5):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))
    observer = open_store()
    seen: list[tuple[str, str, str, dict[str, Any] | None, str]] = []

    def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        last = observer.history(thread_id)[-1]
        seen.append((thread_id, interrupt_id, reason, observer.pending(thread_id), last.type))

    report = store.sweep(ttl_seconds=60, batch_size=batch_size, on_expired=on_expired)

    assert [(t, i, r) for t, i, r, _, _ in seen] == report.expired
    assert len(report.expired) == 5
    for _, _, _, pending, last_type in seen:
        assert pending is None
        assert last_type == EXPIRED
    assert report.wake_failures == []


def test_raising_on_expired_is_recorded_and_the_sweep_goes_on(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """A callback that raises is listed in ``wake_failures``; every other expiry still happens."""
    for k in range(4):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))
    called: list[str] = []

    def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        called.append(thread_id)
        if thread_id == "t-1":
            raise RuntimeError("graph unreachable")

    report = store.sweep(ttl_seconds=60, batch_size=1, on_expired=on_expired)

    assert called == ["t-0", "t-1", "t-2", "t-3"]
    assert [t for t, _, _ in report.expired] == called
    assert len(report.wake_failures) == 1
    thread_id, interrupt_id, error = report.wake_failures[0]
    assert (thread_id, interrupt_id) == ("t-1", "i-1")
    assert "graph unreachable" in error
    # The failed wake-up does not undo the expiry.
    assert expiries(store, "t-1") == [("i-1", "ttl", "sweep")]
    assert store.list_pending() == []


# --- supersede --------------------------------------------------------------------------


def test_superseded_interrupt_is_not_swept_again(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """An interrupt ended by a newer mint (I5) is never swept; only the newer one ages out."""
    mint(store, "t-1", "i-old")
    clock.tick(timedelta(seconds=30))
    mint(store, "t-1", "i-new")
    clock.tick(timedelta(seconds=40))  # i-old is 70 s old, i-new 40 s

    assert store.sweep(ttl_seconds=60).expired == []

    clock.tick(timedelta(seconds=21))
    report = store.sweep(ttl_seconds=60)

    assert report.expired == [("t-1", "i-new", "ttl")]
    assert expiries(store, "t-1") == [("i-old", "superseded", "mint"), ("i-new", "ttl", "sweep")]
    types = [e.type for e in store.history("t-1")]
    assert types == [MINTED, EXPIRED, MINTED, EXPIRED]


def test_sweep_leaves_resumed_and_cancelled_interrupts_alone(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Interrupts that already ended (resumed, cancelled) are not candidates for a sweep."""
    mint(store, "t-resumed", "i-resumed")
    mint(store, "t-cancelled", "i-cancelled")
    store.resume("t-resumed", "i-resumed", {"approved": True}, actor="alice")
    store.expire("t-cancelled", "i-cancelled")
    clock.tick(timedelta(days=1))
    before = store.events()

    assert store.sweep(ttl_seconds=1).expired == []
    assert store.events() == before


# --- the asyncio store ----------------------------------------------------------------------


async def test_async_sweep_expires_and_awaits_its_callback(astore: AsyncInterruptStore) -> None:
    """The asyncio store's sweep expires, reports, awaits a coroutine callback, and is idempotent."""
    old = time.time() - 3600
    for k in range(3):
        marker = {"name": "approval_required", "interrupt_id": f"i-{k}", "payload": {},
                  "minted_at": old}
        await astore.mint(f"t-{k}", marker)
    await astore.mint("t-fresh", {"name": "approval_required", "interrupt_id": "i-fresh",
                                  "payload": {}, "minted_at": time.time()})
    woken: list[tuple[str, str, str]] = []

    async def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        assert await astore.pending(thread_id) is None
        woken.append((thread_id, interrupt_id, reason))

    dry = await astore.sweep(ttl_seconds=60, dry_run=True)
    report = await astore.sweep(ttl_seconds=60, batch_size=2, on_expired=on_expired)

    expected = [(f"t-{k}", f"i-{k}", "ttl") for k in range(3)]
    assert dry.expired == expected
    assert report.expired == expected
    assert woken == expected
    assert report.wake_failures == []
    assert [p["thread_id"] for p in await astore.list_pending()] == ["t-fresh"]
    assert (await astore.sweep(ttl_seconds=60)).expired == []
    history = await astore.history("t-0")
    assert [e.type for e in history] == [MINTED, EXPIRED]
    assert (history[-1].data["reason"], history[-1].data["detected_by"]) == ("ttl", "sweep")


# --- limited to given threads ---------------------------------------------------------------


def test_sweep_limited_to_thread_ids_leaves_every_other_thread_alone(
    store: InterruptStore, clock: FrozenDateTimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``thread_ids`` expires only the named threads' stale interrupts; others get no event."""
    import symfonic_store.store.sweep_ops as ops

    monkeypatch.setattr(ops, "SCOPE_SIZE", 2)  # several chunks of ids, several statements
    for k in range(6):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))
    others = {t: store.history(t) for t in ("t-1", "t-4")}
    called: list[str] = []

    report = store.sweep(
        ttl_seconds=60,
        batch_size=1,
        thread_ids=("t-5", "t-0", "t-2", "t-3", "t-0", "t-missing"),
        on_expired=lambda t, i, r: called.append(t),
    )

    assert report.expired == [(f"t-{k}", f"i-{k}", "ttl") for k in (0, 2, 3, 5)]
    assert called == ["t-0", "t-2", "t-3", "t-5"]
    assert {t: store.history(t) for t in others} == others
    assert [p["thread_id"] for p in store.list_pending()] == ["t-1", "t-4"]
    assert store.sweep(ttl_seconds=60, thread_ids=[]).expired == []
    assert [p["thread_id"] for p in store.list_pending()] == ["t-1", "t-4"]


@pytest.mark.parametrize(
    "thread_ids", ["t-1", [""], ["t-1", 7], [None], {"t": 1}, ("x" * 256,), 42]
)
def test_sweep_refuses_bad_thread_ids_before_writing(
    store: InterruptStore, clock: FrozenDateTimeFactory, thread_ids: Any
) -> None:
    """A string, a non-collection or a bad id in ``thread_ids`` is InvalidInputError; nothing expires."""
    from symfonic_store import InvalidInputError

    mint(store, "t-1", "i-1")
    clock.tick(timedelta(seconds=61))
    before = store.events()
    with pytest.raises(InvalidInputError) as caught:
        store.sweep(ttl_seconds=60, thread_ids=thread_ids)
    assert caught.value.field.startswith("thread_ids")
    assert store.events() == before


# --- owed wake-ups (at-least-once) ------------------------------------------------------------


def owed_rows(store: InterruptStore) -> list[tuple[str, str, str, int, str | None]]:
    """``(thread_id, interrupt_id, reason, attempts, last_error)`` of each owed wake-up."""
    import sqlalchemy as sa

    from symfonic_store.db.schema import wakeups

    query = sa.select(
        wakeups.c.thread_id, wakeups.c.interrupt_id, wakeups.c.reason, wakeups.c.attempts,
        wakeups.c.last_error,
    ).order_by(wakeups.c.thread_id)
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query)]  # type: ignore[misc]


def test_without_a_callback_wake_ups_stay_owed_and_a_later_sweep_delivers_them_first(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """A sweep without on_expired leaves its wake-ups owed; the next one with a callback delivers them before new expiries."""
    for k in range(3):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))

    silent = store.sweep(ttl_seconds=60)
    assert len(silent.expired) == 3 and silent.owed == 3
    assert "3 wake-up(s) still owed" in str(silent)
    assert [r[:4] for r in owed_rows(store)] == [(f"t-{k}", f"i-{k}", "ttl", 0) for k in range(3)]

    mint(store, "t-new", "i-new")
    clock.tick(timedelta(seconds=61))
    called: list[tuple[str, str, str]] = []
    report = store.sweep(ttl_seconds=60, on_expired=lambda *a: called.append(a))

    assert called == [*silent.expired, ("t-new", "i-new", "ttl")]
    assert report.redelivered == silent.expired
    assert report.expired == [("t-new", "i-new", "ttl")]
    assert report.owed == 0 and owed_rows(store) == []
    assert report.as_dict()["redelivered"][0] == {"thread_id": "t-0", "interrupt_id": "i-0", "reason": "ttl"}
    assert report.as_dict()["owed"] == 0
    assert "delivered 3 owed wake-up(s)" in str(report)
    # Delivering is not expiring: no new event for the owed ones.
    assert expiries(store, "t-0") == [("i-0", "ttl", "sweep")]


def test_a_wake_up_whose_callback_keeps_failing_stays_owed_and_is_tried_once_per_sweep(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """A raising callback leaves its wake-up owed with the attempt recorded; each later sweep tries it once, until it works."""
    for k in range(3):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))
    called: list[str] = []
    broken = {"t-1"}

    def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        called.append(thread_id)
        if thread_id in broken:
            raise RuntimeError("graph unreachable")

    first = store.sweep(ttl_seconds=60, batch_size=1, on_expired=on_expired)
    assert called == ["t-0", "t-1", "t-2"]
    assert [f[:2] for f in first.wake_failures] == [("t-1", "i-1")]
    assert first.owed == 1

    for attempt in (2, 3):
        called.clear()
        again = store.sweep(ttl_seconds=60, batch_size=1, on_expired=on_expired)
        assert called == ["t-1"]  # once, not in a loop
        assert again.redelivered == [] and again.expired == []
        assert [f[:2] for f in again.wake_failures] == [("t-1", "i-1")]
        assert again.owed == 1
        ((thread_id, _, _, attempts, error),) = owed_rows(store)
        assert (thread_id, attempts) == ("t-1", attempt)
        assert error is not None and "graph unreachable" in error

    broken.clear()
    fixed = store.sweep(ttl_seconds=60, on_expired=on_expired)
    assert fixed.redelivered == [("t-1", "i-1", "ttl")] and fixed.owed == 0
    assert owed_rows(store) == []


class SweepKilled(BaseException):
    """The sweep's process going away in the middle of a callback."""


def test_a_wake_up_held_by_a_sweep_that_died_is_owed_again_when_its_lease_runs_out(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Wake-ups a dead sweep held are not delivered by another sweep at once, and are once the lease has run out."""
    from symfonic_store.services.sweep import WAKE_LEASE_SECONDS

    for k in range(2):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))

    def dies(*args: Any) -> None:
        raise SweepKilled

    with pytest.raises(SweepKilled):
        store.sweep(ttl_seconds=60, on_expired=dies)
    assert len(owed_rows(store)) == 2

    called: list[tuple[str, str, str]] = []
    meanwhile = store.sweep(ttl_seconds=60, on_expired=lambda *a: called.append(a))
    assert called == [] and meanwhile.owed == 2  # still held by the dead sweep

    clock.tick(timedelta(seconds=WAKE_LEASE_SECONDS + 1))
    later = store.sweep(ttl_seconds=60, on_expired=lambda *a: called.append(a))
    assert called == [("t-0", "i-0", "ttl"), ("t-1", "i-1", "ttl")]
    assert later.redelivered == called and later.owed == 0


def test_dry_run_counts_owed_wake_ups_and_delivers_none(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """A dry run reports how many wake-ups are owed, calls nothing and settles nothing."""
    mint(store, "t-0", "i-0")
    clock.tick(timedelta(seconds=61))
    store.sweep(ttl_seconds=60)
    called: list[Any] = []

    dry = store.sweep(ttl_seconds=60, dry_run=True, on_expired=lambda *a: called.append(a))

    assert (dry.owed, dry.redelivered, called) == (1, [], [])
    assert "1 wake-up(s) owed" in str(dry)
    assert len(owed_rows(store)) == 1


def test_a_sweep_limited_to_thread_ids_delivers_only_their_owed_wake_ups(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """``thread_ids`` applies to owed wake-ups too: another thread's stays owed and untouched."""
    for k in range(2):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))
    store.sweep(ttl_seconds=60)
    called: list[tuple[str, str, str]] = []

    mine = store.sweep(ttl_seconds=60, thread_ids=["t-1"], on_expired=lambda *a: called.append(a))

    assert called == [("t-1", "i-1", "ttl")] and mine.redelivered == called
    assert mine.owed == 0
    assert owed_rows(store) == [("t-0", "i-0", "ttl", 0, None)]


def test_on_expired_must_be_callable(store: InterruptStore) -> None:
    """A callback that cannot be called is refused before anything is expired or recorded as owed."""
    from symfonic_store import InvalidInputError

    with pytest.raises(InvalidInputError) as caught:
        store.sweep(on_expired="wake them")  # type: ignore[arg-type]
    assert caught.value.field == "on_expired"


async def test_async_sweep_delivers_owed_wake_ups(astore: AsyncInterruptStore) -> None:
    """The asyncio store delivers wake-ups a sweep without a callback left owed, awaiting its callback."""
    old = time.time() - 3600
    for k in range(2):
        await astore.mint(f"t-{k}", {"name": "approval_required", "interrupt_id": f"i-{k}",
                                     "payload": {}, "minted_at": old})
    silent = await astore.sweep(ttl_seconds=60)
    assert silent.owed == 2
    woken: list[tuple[str, str, str]] = []

    async def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        woken.append((thread_id, interrupt_id, reason))

    report = await astore.sweep(ttl_seconds=60, on_expired=on_expired)
    assert woken == silent.expired == report.redelivered
    assert report.expired == [] and report.owed == 0
