"""The Python API of SPEC §3, method by method, on SQLite and PostgreSQL.

The sync store is covered method by method; the asyncio store runs the same assertions
on a representative subset (mint, resume, state, history, replay).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from freezegun import freeze_time

from symfonic_store import (
    EXPIRED,
    INTERRUPT_ACK_SENTINEL,
    MINTED,
    RESUME_REJECTED,
    RESUMED,
    ROUTE_DECIDED,
    AsyncInterruptStore,
    AuditRecord,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStore,
    UnknownInterruptError,
    VerifyReport,
    build_interrupt_marker,
)
from symfonic_store.protocol import MARKER_KEYS

T0 = datetime(2021, 2, 3, 4, 5, 6, tzinfo=UTC)
EMPTY_STATE = {"_interrupt_pending": None, "run_id": None}


marker = factories.marker


def inner(update: dict[str, Any]) -> dict[str, Any]:
    return dict(update["_interrupt_pending"])


# --- pending / state / is_current ----------------------------------------------------


def test_pending_is_the_seed_shaped_marker_until_resolved(store: InterruptStore) -> None:
    """``pending`` is None, then exactly the minted marker (seed keys in seed order), then None."""
    assert store.pending("t-1") is None
    update = marker("i-1", amount=420, order=1181)
    store.mint("t-1", update)
    pending = store.pending("t-1")
    assert pending == inner(update)
    assert list(pending) == list(MARKER_KEYS)  # type: ignore[arg-type]
    store.resume("t-1", "i-1", actor="alice")
    assert store.pending("t-1") is None


def test_pending_fills_the_optional_marker_keys(store: InterruptStore) -> None:
    """A minimal marker reads back with ``payload`` {} and the optional keys None."""
    store.mint("t-1", {"name": "confirm", "interrupt_id": "i-1"})
    assert store.pending("t-1") == {
        "name": "confirm",
        "interrupt_id": "i-1",
        "payload": {},
        "tool_call_id": None,
        "run_id": None,
        "minted_at": None,
    }


def test_pending_returns_a_copy(store: InterruptStore) -> None:
    """Mutating the returned marker does not change what the store reports next."""
    store.mint("t-1", marker("i-1", items=[1]))
    pending = store.pending("t-1")
    assert pending is not None
    pending["payload"]["items"].append(2)
    assert store.pending("t-1")["payload"] == {"items": [1]}  # type: ignore[index]


def test_state_is_the_projected_marker_and_run_id(store: InterruptStore) -> None:
    """``state`` has exactly the two keys and follows mints, routes and resumes."""
    assert store.state("nobody") == EMPTY_STATE
    update = marker("i-1", run_id="run-1")
    store.mint("t-1", update)
    assert store.state("t-1") == {"_interrupt_pending": inner(update), "run_id": "run-1"}
    store.resume("t-1", "i-1", actor="alice")
    assert store.state("t-1") == {"_interrupt_pending": None, "run_id": "run-1"}
    store.record_route("t-1", "finish", run_id="run-2")
    assert store.state("t-1") == {"_interrupt_pending": None, "run_id": "run-2"}


def test_is_current_uses_the_store_ttl_unless_one_is_given(migrated_url: str, store: InterruptStore) -> None:
    """Without an argument the store's TTL applies (strictly greater is stale); an explicit TTL wins."""
    with InterruptStore(migrated_url, ttl_seconds=60) as timed, freeze_time(T0) as clock:
        timed.mint("t-1", marker("i-1"))
        assert timed.is_current("t-1")
        clock.tick(60)
        assert timed.is_current("t-1")
        clock.tick(1)
        assert not timed.is_current("t-1")
        assert timed.is_current("t-1", ttl_seconds=120)
        assert timed.is_current("t-1", 61)
        # The store without a TTL: current forever unless a TTL is passed.
        clock.tick(10_000)
        assert store.is_current("t-1")
        assert not store.is_current("t-1", ttl_seconds=60)
    assert not store.is_current("nobody")


def test_is_current_follows_the_run_id_rule(store: InterruptStore) -> None:
    """A marker from a run the thread has moved past is not current; a run-less marker is."""
    store.mint("t-1", marker("i-1", run_id="run-1"))
    assert store.is_current("t-1")
    store.record_route("t-1", "finish", run_id="run-2")
    assert not store.is_current("t-1")
    store.mint("t-2", marker("i-2"))
    store.record_route("t-2", "finish", run_id="run-9")
    assert store.is_current("t-2")


# --- list_pending --------------------------------------------------------------------


def test_list_pending_is_oldest_first_with_thread_id(store: InterruptStore) -> None:
    """Every pending marker across threads, plus its ``thread_id`` and ``cursor`` (SPEC §17), oldest marker first."""
    with freeze_time(T0) as clock:
        store.mint("b-thread", marker("i-b"))
        clock.tick(10)
        store.mint("a-thread", marker("i-a"))
        clock.tick(10)
        store.mint("c-thread", marker("i-c"))
        store.mint("done", marker("i-d"))
        store.resume("done", "i-d", actor="alice")
        listed = store.list_pending()
    assert [(p["thread_id"], p["interrupt_id"]) for p in listed] == [
        ("b-thread", "i-b"),
        ("a-thread", "i-a"),
        ("c-thread", "i-c"),
    ]
    assert isinstance(listed[0]["cursor"], str)
    assert listed[0] == {  # type: ignore[dict-item]
        **store.pending("b-thread"), "thread_id": "b-thread", "cursor": listed[0]["cursor"]}


def test_list_pending_older_than_and_limit(store: InterruptStore) -> None:
    """``older_than`` keeps markers older than that many seconds; ``limit`` keeps the oldest n."""
    with freeze_time(T0) as clock:
        store.mint("old", marker("i-1"))
        clock.tick(100)
        store.mint("middle", marker("i-2"))
        clock.tick(50)
        store.mint("new", marker("i-3"))
        clock.tick(1)
        assert [p["thread_id"] for p in store.list_pending(older_than=120)] == ["old"]
        assert [p["thread_id"] for p in store.list_pending(older_than=30)] == ["old", "middle"]
        assert [p["thread_id"] for p in store.list_pending(older_than=0)] == ["old", "middle", "new"]
        assert store.list_pending(older_than=1000) == []
        assert [p["thread_id"] for p in store.list_pending(limit=2)] == ["old", "middle"]
        assert [p["thread_id"] for p in store.list_pending(older_than=30, limit=1)] == ["old"]


def test_list_pending_ages_a_marker_without_minted_at_from_its_mint(store: InterruptStore) -> None:
    """A marker without ``minted_at`` counts its age from when its mint was recorded."""
    with freeze_time(T0) as clock:
        store.mint("t-1", {"name": "n", "interrupt_id": "i-1"})
        clock.tick(30)
        assert store.list_pending(older_than=20)[0]["thread_id"] == "t-1"
        assert store.list_pending(older_than=40) == []


# --- history / events ----------------------------------------------------------------


def test_history_has_the_event_columns_in_order(store: InterruptStore) -> None:
    """Each event carries the §2 attributes; the thread's events come in version order."""
    with freeze_time(T0):
        store.mint("t-1", marker("i-1", run_id="run-1", amount=5), actor="bot")
        store.record_route("t-1", "interrupt", run_id="run-1")
        store.resume("t-1", "i-1", {"approved": True}, actor="alice")
    minted, routed, resumed = store.history("t-1")
    assert (minted.type, minted.version, minted.interrupt_id, minted.run_id, minted.actor) == (
        MINTED, 1, "i-1", "run-1", "bot",
    )
    assert minted.data == inner(marker("i-1", run_id="run-1", amount=5)) | {
        "minted_at": T0.timestamp()
    }
    assert routed.type == ROUTE_DECIDED
    assert routed.data == {"route": "interrupt", "interrupt_id": "i-1", "reason": None}
    assert (resumed.type, resumed.actor, resumed.data) == (
        RESUMED, "alice", {"response": {"approved": True}, "decision": "approve"},  # SPEC §12
    )
    for event in (minted, routed, resumed):
        assert event.thread_id == "t-1"
        assert event.occurred_at == T0
        assert len(event.hash) == 64
        assert set(event.as_dict()) == {
            "position", "thread_id", "version", "type", "interrupt_id",
            "run_id", "actor", "data", "occurred_at", "hash",
        }
    assert minted.position < routed.position < resumed.position
    assert store.history("nobody") == []


def test_events_after_and_limit_page_through_every_thread(store: InterruptStore) -> None:
    """``events(after=, limit=)`` returns the global log in position order, page by page."""
    for i in range(5):
        store.mint(f"t-{i % 2}", marker(f"i-{i}"))
    everything = store.events()
    assert len(everything) == 5 + 3  # two supersessions on t-0, one on t-1
    assert [e.position for e in everything] == sorted(e.position for e in everything)
    pages, after = [], 0
    while page := store.events(after=after, limit=3):
        assert len(page) <= 3
        pages.append(page)
        after = page[-1].position
    assert [e for page in pages for e in page] == everything
    assert len(pages) == 3
    assert store.events(after=everything[2].position) == everything[3:]
    assert store.events(after=everything[-1].position) == []
    assert store.events(limit=1) == everything[:1]


# --- replay --------------------------------------------------------------------------


def test_replay_yields_the_state_after_each_event(store: InterruptStore) -> None:
    """Each replayed pair is an event of the thread and the projected state right after it."""
    first = marker("i-1", run_id="run-1")
    second = marker("i-2", run_id="run-1")
    store.mint("t-1", first)
    store.mint("other", marker("i-x"))
    store.mint("t-1", second)
    store.resume("t-1", "i-2", actor="alice")
    replayed = list(store.replay("t-1"))
    assert [e for e, _ in replayed] == store.history("t-1")
    assert [s for _, s in replayed] == [
        {"_interrupt_pending": inner(first), "run_id": "run-1"},
        {"_interrupt_pending": None, "run_id": "run-1"},  # i-1 superseded
        {"_interrupt_pending": inner(second), "run_id": "run-1"},
        {"_interrupt_pending": None, "run_id": "run-1"},
    ]
    assert replayed[-1][1] == store.state("t-1")
    assert list(store.replay("nobody")) == []


def test_replay_until_a_position_is_inclusive(store: InterruptStore) -> None:
    """``until=position`` stops at (and includes) the event at that global position."""
    store.mint("t-1", marker("i-1"))
    store.record_route("t-1", "interrupt")
    store.mint("other", marker("i-x"))
    store.resume("t-1", "i-1", actor="alice")
    history = store.history("t-1")
    cut = list(store.replay("t-1", until=history[1].position))
    assert [e for e, _ in cut] == history[:2]
    assert cut[-1][1]["_interrupt_pending"]["interrupt_id"] == "i-1"
    other_position = store.history("other")[0].position
    assert [e for e, _ in store.replay("t-1", until=other_position)] == history[:2]
    assert list(store.replay("t-1", until=0)) == []


def test_replay_until_a_datetime_is_inclusive(store: InterruptStore) -> None:
    """``until=datetime`` is an as-of bound: events at that instant are included; naive means UTC."""
    with freeze_time(T0) as clock:
        store.mint("t-1", marker("i-1"))
        clock.tick(10)
        store.resume("t-1", "i-1", actor="alice")
        clock.tick(10)
        store.mint("t-1", marker("i-2"))
    assert [e.type for e, _ in store.replay("t-1", until=T0)] == [MINTED]
    assert [e.type for e, _ in store.replay("t-1", until=T0 + timedelta(seconds=10))] == [
        MINTED, RESUMED,
    ]
    assert list(store.replay("t-1", until=T0 - timedelta(microseconds=1))) == []
    naive = (T0 + timedelta(seconds=10)).replace(tzinfo=None)
    assert len(list(store.replay("t-1", until=naive))) == 2
    elsewhere = (T0 + timedelta(seconds=10)).astimezone(timezone(timedelta(hours=-5)))
    assert len(list(store.replay("t-1", until=elsewhere))) == 2
    state = list(store.replay("t-1", until=T0 + timedelta(seconds=15)))[-1][1]
    assert state == {"_interrupt_pending": None, "run_id": None}


# --- expire --------------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["ttl", "run_id", "superseded", "cancelled"])
def test_expire_records_the_reason_and_the_actor(store: InterruptStore, reason: str) -> None:
    """``expire`` appends ``interrupt.expired`` with the reason, ``detected_by: api`` and the actor."""
    store.mint("t-1", marker("i-1"))
    store.expire("t-1", "i-1", reason=reason, actor="ops")
    event = store.history("t-1")[-1]
    assert (event.type, event.interrupt_id, event.actor) == (EXPIRED, "i-1", "ops")
    assert event.data == {"reason": reason, "detected_by": "api"}
    assert store.pending("t-1") is None


def test_expire_defaults_to_cancelled(store: InterruptStore) -> None:
    """Without a reason the expiry is a cancellation with no actor."""
    store.mint("t-1", marker("i-1"))
    store.expire("t-1", "i-1")
    event = store.history("t-1")[-1]
    assert (event.data["reason"], event.actor) == ("cancelled", None)


def test_expire_refuses_unknown_resolved_and_expired_interrupts(store: InterruptStore) -> None:
    """Expiring what was never minted, was resumed, or already ended raises and writes nothing."""
    store.mint("t-1", marker("i-1"))
    store.resume("t-1", "i-1", actor="alice")
    store.mint("t-1", marker("i-2"))
    store.expire("t-1", "i-2")
    n = len(store.events())
    with pytest.raises(UnknownInterruptError, match="i-9"):
        store.expire("t-1", "i-9")
    with pytest.raises(UnknownInterruptError):
        store.expire("nobody", "i-1")
    with pytest.raises(InterruptAlreadyResolvedError, match="alice"):
        store.expire("t-1", "i-1")
    with pytest.raises(InterruptExpiredError) as caught:
        store.expire("t-1", "i-2", reason="ttl")
    assert caught.value.reason == "cancelled"
    assert len(store.events()) == n


# --- audit ---------------------------------------------------------------------------


def audit_scenario(store: InterruptStore) -> None:
    """Three threads: approved by alice, rejected-then-cancelled by ops, and still pending."""
    with freeze_time(T0) as clock:
        store.mint("approved", marker("i-1", amount=420))
        clock.tick(60)
        store.resume("approved", "i-1", {"approved": True}, actor="alice")
        store.mint("cancelled", marker("i-2"))
        clock.tick(60)
        with pytest.raises(UnknownInterruptError):
            store.resume("cancelled", "i-nope", actor="bob")
        store.expire("cancelled", "i-2", actor="ops")
        clock.tick(60)
        store.mint("waiting", {"name": "confirm", "interrupt_id": "i-3"})


def test_audit_has_one_record_per_interrupt_with_every_field(store: InterruptStore) -> None:
    """Each minted interrupt is one record, oldest first, with outcome, who, what and when."""
    audit_scenario(store)
    records = store.audit()
    assert all(isinstance(r, AuditRecord) for r in records)
    assert [(r.thread_id, r.interrupt_id, r.outcome) for r in records] == [
        ("approved", "i-1", "resumed"),
        ("cancelled", "i-2", "expired"),
        ("waiting", "i-3", "pending"),
    ]
    approved, cancelled, waiting = records
    assert approved.name == "approval_required"
    assert approved.payload == {"amount": 420}
    assert approved.minted_at == T0
    assert (approved.actor, approved.response, approved.reason) == ("alice", {"approved": True}, None)
    assert approved.resolved_at == T0 + timedelta(seconds=60)
    assert (cancelled.reason, cancelled.actor, cancelled.response) == ("cancelled", "ops", None)
    assert cancelled.minted_at == T0 + timedelta(seconds=60)
    assert cancelled.resolved_at == T0 + timedelta(seconds=120)
    # No minted_at in the marker: the time its mint was recorded.
    assert waiting.minted_at == T0 + timedelta(seconds=180)
    assert (waiting.reason, waiting.actor, waiting.response, waiting.resolved_at) == (
        None, None, None, None,
    )
    for record in records:
        for moment in (record.minted_at, record.resolved_at):
            assert moment is None or moment.utcoffset() == timedelta(0)
    assert approved.as_dict()["minted_at"] == T0.isoformat()


def test_audit_filters_by_thread_actor_and_time(store: InterruptStore) -> None:
    """``thread_id`` and ``actor`` select records; ``since``/``until`` bound ``minted_at`` inclusively."""
    audit_scenario(store)
    assert [r.interrupt_id for r in store.audit(thread_id="cancelled")] == ["i-2"]
    assert store.audit(thread_id="nobody") == []
    assert [r.interrupt_id for r in store.audit(actor="alice")] == ["i-1"]
    assert [r.interrupt_id for r in store.audit(actor="ops")] == ["i-2"]
    assert store.audit(actor="bob") == []
    minute = T0 + timedelta(seconds=60)
    assert [r.interrupt_id for r in store.audit(since=minute)] == ["i-2", "i-3"]
    assert [r.interrupt_id for r in store.audit(until=minute)] == ["i-1", "i-2"]
    assert [r.interrupt_id for r in store.audit(since=minute, until=minute)] == ["i-2"]
    assert [r.interrupt_id for r in store.audit(since="2021-02-03T04:06:06Z")] == ["i-2", "i-3"]
    assert [r.interrupt_id for r in store.audit(until="2021-02-03T04:06:06")] == ["i-1", "i-2"]
    assert [r.interrupt_id for r in store.audit(until="2021-02-03T05:06:06+01:00")] == [
        "i-1", "i-2",
    ]
    assert store.audit(thread_id="approved", actor="ops") == []


def test_audit_records_sweep_and_supersession_expiries(store: InterruptStore) -> None:
    """Expiries that nobody asked for carry their reason and no actor."""
    with freeze_time(T0) as clock:
        store.mint("t-1", marker("i-1"))
        store.mint("t-1", marker("i-2"))
        clock.tick(100)
        store.sweep(ttl_seconds=10)
    first, second = store.audit(thread_id="t-1")
    assert (first.outcome, first.reason, first.actor) == ("expired", "superseded", None)
    assert (second.outcome, second.reason, second.actor) == ("expired", "ttl", None)
    assert second.resolved_at == T0 + timedelta(seconds=100)


# --- rebuild_projection / verify -------------------------------------------------------


def test_rebuild_projection_returns_the_events_folded_and_repairs_the_projection(
    store: InterruptStore,
) -> None:
    """A rebuild folds every event, and restores a projection row damaged behind the store's back."""
    assert store.rebuild_projection() == 0
    store.mint("t-1", marker("i-1", run_id="run-1"))
    store.mint("t-2", marker("i-2"))
    store.resume("t-2", "i-2", actor="alice")
    expected = {t: store.state(t) for t in ("t-1", "t-2")}
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM symfonic_threads WHERE thread_id = 't-1'")
        conn.exec_driver_sql("UPDATE symfonic_threads SET run_id = 'bogus' WHERE thread_id = 't-2'")
    assert store.state("t-1") == EMPTY_STATE
    assert store.rebuild_projection() == 3
    assert {t: store.state(t) for t in ("t-1", "t-2")} == expected
    store.mint("t-1", marker("i-3"))  # appends continue the chain after a rebuild
    assert [e.version for e in store.history("t-1")] == [1, 2, 3]
    assert store.verify().ok


def test_verify_reports_counts_and_ok(store: InterruptStore) -> None:
    """An intact store verifies ok, counting every thread and event, for one thread or all."""
    empty = store.verify()
    assert isinstance(empty, VerifyReport)
    assert (empty.ok, empty.events_checked, empty.threads_checked) == (True, 0, 0)
    store.mint("t-1", marker("i-1"))
    store.mint("t-2", marker("i-2"))
    store.resume("t-2", "i-2", actor="alice")
    report = store.verify()
    assert (report.ok, bool(report), report.events_checked, report.threads_checked) == (True, True, 3, 2)
    assert "all hash chains hold" in str(report)
    assert store.verify(thread_id="t-2").events_checked == 2
    assert store.verify(thread_id="nobody").events_checked == 0


def test_rejections_are_part_of_history_and_audit_ignores_them(store: InterruptStore) -> None:
    """A refused resume is in ``history`` but is not an interrupt of its own in ``audit``."""
    store.mint("t-1", marker("i-1"))
    with pytest.raises(UnknownInterruptError):
        store.resume("t-1", "i-ghost", actor="mallory")
    assert [e.type for e in store.history("t-1")] == [MINTED, RESUME_REJECTED]
    assert [r.interrupt_id for r in store.audit()] == ["i-1"]


# --- the asyncio store -----------------------------------------------------------------


async def test_async_store_mints_resumes_and_reads_like_the_sync_store(
    astore: AsyncInterruptStore,
) -> None:
    """mint/resume/state/pending/history on the asyncio store give the sync store's answers."""
    update = marker("i-1", run_id="run-1", amount=3)
    assert await astore.mint("t-1", update) is True
    assert await astore.mint("t-1", update) is False
    assert await astore.pending("t-1") == inner(update)
    assert await astore.state("t-1") == {"_interrupt_pending": inner(update), "run_id": "run-1"}
    assert await astore.is_current("t-1")
    command = await astore.resume("t-1", "i-1", actor="alice")
    assert command.resume == {INTERRUPT_ACK_SENTINEL: True}
    assert await astore.resume("t-1", "i-1", actor="alice") == command
    with pytest.raises(InterruptAlreadyResolvedError):
        await astore.resume("t-1", "i-1", {"no": 1}, actor="bob")
    history = await astore.history("t-1")
    assert [e.type for e in history] == [MINTED, RESUMED, RESUME_REJECTED]
    assert [e.version for e in history] == [1, 2, 3]
    assert history[1].data == {"response": {}, "decision": None}  # SPEC §12: no decision in {}
    assert await astore.state("t-1") == {"_interrupt_pending": None, "run_id": "run-1"}
    assert await astore.events(after=history[0].position) == history[1:]
    assert (await astore.verify()).ok
    assert await astore.rebuild_projection() == 3


async def test_async_replay_by_async_for_and_by_await(astore: AsyncInterruptStore) -> None:
    """``replay`` on the asyncio store works with ``async for`` and with ``await``, ``until`` included."""
    first = marker("i-1")
    await astore.mint("t-1", first)
    await astore.record_route("t-1", "interrupt", run_id="run-7")
    await astore.resume("t-1", "i-1", {"approved": True}, actor="alice")
    iterated = [pair async for pair in astore.replay("t-1")]
    awaited = await astore.replay("t-1")
    assert iterated == awaited
    assert [e for e, _ in awaited] == await astore.history("t-1")
    assert [s for _, s in awaited] == [
        {"_interrupt_pending": inner(first), "run_id": None},
        {"_interrupt_pending": inner(first), "run_id": "run-7"},
        {"_interrupt_pending": None, "run_id": "run-7"},
    ]
    cut = await astore.replay("t-1", until=awaited[1][0].position)
    assert cut == awaited[:2]
    at_time = await astore.replay("t-1", until=awaited[0][0].occurred_at)
    assert at_time[0] == awaited[0]


async def test_async_store_expire_audit_and_list_pending(astore: AsyncInterruptStore) -> None:
    """expire, audit and list_pending on the asyncio store agree with the events it wrote."""
    await astore.mint("t-1", marker("i-1"))
    await astore.mint("t-2", marker("i-2"))
    assert [p["thread_id"] for p in await astore.list_pending()] == ["t-1", "t-2"]
    await astore.expire("t-1", "i-1", actor="ops")
    with pytest.raises(InterruptExpiredError):
        await astore.resume("t-1", "i-1", actor="alice")
    with pytest.raises(UnknownInterruptError):
        await astore.expire("t-1", "i-9")
    records = await astore.audit()
    assert [(r.interrupt_id, r.outcome, r.actor) for r in records] == [
        ("i-1", "expired", "ops"),
        ("i-2", "pending", None),
    ]
    assert [p["thread_id"] for p in await astore.list_pending()] == ["t-2"]


def test_the_event_table_is_readable_with_plain_sql(store: InterruptStore) -> None:
    """Auditors read the public column names directly; ``data`` holds the public keys."""
    store.mint("t-1", marker("i-1"), actor="bot")
    store.resume("t-1", "i-1", {"approved": True}, actor="alice")
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT position, thread_id, version, type, interrupt_id, run_id, actor, data,"
                " occurred_at, hash FROM symfonic_events ORDER BY position"
            )
        ).all()
    assert [(r.thread_id, r.version, r.type, r.actor) for r in rows] == [
        ("t-1", 1, MINTED, "bot"),
        ("t-1", 2, RESUMED, "alice"),
    ]


def test_resume_with_a_model_that_dumps_to_a_list_sends_and_records_a_dict(store) -> None:
    """The store always records a dict: a RootModel's list travels as {"value": str(...)}."""
    from pydantic import RootModel


    marker = build_interrupt_marker(name="choose", interrupt_id="i-000000000001", payload={})
    store.mint("t-root", marker)
    command = store.resume("t-root", "i-000000000001", RootModel[list[int]]([1, 2]), actor="ann")
    assert command.resume == {"value": "[1, 2]"}
    assert store.history("t-root")[-1].data["response"] == {"value": "[1, 2]"}
