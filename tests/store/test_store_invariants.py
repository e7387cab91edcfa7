"""The invariants of SPEC §2 (I1-I6, I8-I10), checked against the real database.

Every test runs on SQLite and PostgreSQL through the ``store`` fixture. Where an
invariant is "enforced by the database", the test goes around the store and speaks SQL
to ``store.engine`` directly, so it is the schema that answers, not Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import factories
import pydantic
import pytest
import sqlalchemy as sa
from freezegun import freeze_time
from langgraph.types import Command

from symfonic_store import (
    EXPIRED,
    INTERRUPT_ACK_SENTINEL,
    MINTED,
    RESUME_REJECTED,
    RESUMED,
    ROUTE_DECIDED,
    AsyncInterruptStore,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStore,
    StoredEvent,
    UnknownInterruptError,
)
from symfonic_store.db.schema import events as events_table
from symfonic_store.projection import ThreadState, fold
from symfonic_store.protocol import normalize_response

T0 = datetime(2021, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
"""A fixed instant, far from the database server's own clock."""


marker = factories.marker


def all_rows(store: InterruptStore) -> list[tuple[Any, ...]]:
    """Every stored event row, read with plain SQL."""
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql("SELECT * FROM symfonic_events ORDER BY position")]


def count_events(store: InterruptStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT COUNT(*) FROM symfonic_events").scalar_one())


def types(events: list[StoredEvent]) -> list[str]:
    return [e.type for e in events]


def forged_row(after: StoredEvent, type_: str, *, version_step: int = 1) -> dict[str, Any]:
    """A hand-made event row for ``after``'s thread and interrupt, next in version order."""
    return {
        "thread_id": after.thread_id,
        "version": after.version + version_step,
        "type": type_,
        "interrupt_id": after.interrupt_id,
        "run_id": None,
        "actor": "mallory",
        "data": {"reason": "cancelled", "detected_by": "api", "response": {}},
        "occurred_at": datetime.now(UTC),
        "hash": "f" * 64,
    }


def drop_append_only_triggers(store: InterruptStore) -> None:
    """What an attacker with table-owner rights would do first."""
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER symfonic_events_no_update")
            conn.exec_driver_sql("DROP TRIGGER symfonic_events_no_delete")
        else:
            conn.exec_driver_sql("DROP TRIGGER symfonic_events_no_update_delete ON symfonic_events")
            conn.exec_driver_sql("DROP TRIGGER symfonic_events_no_truncate ON symfonic_events")


# --- I1 append-only ----------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE symfonic_events SET actor = 'mallory'",
        "UPDATE symfonic_events SET data = '{}' WHERE version = 1",
        "DELETE FROM symfonic_events",
        "DELETE FROM symfonic_events WHERE version = 2",
    ],
)
def test_raw_update_and_delete_are_refused_by_the_database(
    store: InterruptStore, statement: str
) -> None:
    """UPDATE and DELETE on the event table fail in the database and leave every row as it was."""
    store.mint("t-1", marker("i-1"), actor="bot")
    store.resume("t-1", "i-1", {"approved": True}, actor="alice")
    before = all_rows(store)
    with pytest.raises(sa.exc.DBAPIError, match="append-only"):
        with store.engine.begin() as conn:
            conn.exec_driver_sql(statement)
    assert all_rows(store) == before
    assert store.verify().ok


@pytest.fixture
def postgres_store(postgres_schema_url: str) -> Iterator[InterruptStore]:
    """A migrated store on PostgreSQL only (for what SQLite does not have)."""
    s = InterruptStore(postgres_schema_url)
    s.setup()
    yield s
    s.close()


def test_truncate_is_refused_on_postgresql(postgres_store: InterruptStore) -> None:
    """PostgreSQL's TRUNCATE, which skips row triggers, is refused by a statement trigger."""
    postgres_store.mint("t-1", marker("i-1"))
    before = all_rows(postgres_store)
    with pytest.raises(sa.exc.DBAPIError, match="append-only: TRUNCATE"):
        with postgres_store.engine.begin() as conn:
            conn.exec_driver_sql("TRUNCATE symfonic_events")
    assert all_rows(postgres_store) == before


# --- I2 per-thread order -----------------------------------------------------------


def test_versions_have_no_gaps_and_positions_increase_after_mixed_operations(
    store: InterruptStore,
) -> None:
    """After mints, routes, resumes, rejections, expiries and supersessions each thread counts 1..n."""
    store.mint("a", marker("i-1", run_id="r1"))
    store.record_route("a", "interrupt", run_id="r1")
    store.mint("b", marker("i-1"))
    store.mint("a", marker("i-2", run_id="r1"))  # supersedes i-1
    store.resume("a", "i-2", {"ok": 1}, actor="alice")
    with pytest.raises(InterruptAlreadyResolvedError):
        store.resume("a", "i-2", {"ok": 2}, actor="bob")
    with pytest.raises(UnknownInterruptError):
        store.resume("c", "i-9", actor="carol")
    store.expire("b", "i-1", reason="cancelled", actor="ops")
    store.mint("b", marker("i-2"))
    store.record_route("b", "finish")
    store.mint("a", marker("i-1"))  # already seen: nothing appended

    everything = store.events()
    positions = [e.position for e in everything]
    assert positions == sorted(set(positions))
    for thread in ("a", "b", "c"):
        history = store.history(thread)
        assert [e.version for e in history] == list(range(1, len(history) + 1))
        thread_positions = [e.position for e in history]
        assert all(p < q for p, q in zip(thread_positions, thread_positions[1:], strict=False))
    assert types(store.history("a")) == [
        MINTED, ROUTE_DECIDED, EXPIRED, MINTED, RESUMED, RESUME_REJECTED
    ]
    assert store.history("c") == []  # I10: a refusal does not create a thread
    assert sum(len(store.history(t)) for t in ("a", "b", "c")) == len(everything)


# --- I3 one ending -----------------------------------------------------------------


@pytest.mark.parametrize("second", [EXPIRED, RESUMED])
def test_database_refuses_a_forged_second_ending(store: InterruptStore, second: str) -> None:
    """A hand-inserted second terminal event fails with IntegrityError from the one-ending index."""
    store.mint("t-1", marker("i-1"))
    store.resume("t-1", "i-1", {"approved": True}, actor="alice")
    last = store.history("t-1")[-1]
    before = all_rows(store)

    with pytest.raises(sa.exc.IntegrityError) as caught:
        with store.engine.begin() as conn:
            conn.execute(events_table.insert(), forged_row(last, second))
    if store.engine.dialect.name == "postgresql":
        assert "uq_symfonic_events_one_ending" in str(caught.value)
    else:
        assert "symfonic_events.thread_id, symfonic_events.interrupt_id" in str(caught.value)
    assert all_rows(store) == before

    # The same row as a non-terminal type is accepted: version, hash and the other
    # columns are not what refused it.
    with store.engine.begin() as conn:
        conn.execute(events_table.insert(), forged_row(last, RESUME_REJECTED))
    assert count_events(store) == len(before) + 1

    # Without the unique index the forged ending goes in: the index is the guard.
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX uq_symfonic_events_one_ending")
        conn.execute(events_table.insert(), forged_row(last, second, version_step=2))
    assert count_events(store) == len(before) + 2


def test_database_refuses_a_forged_second_mint(store: InterruptStore) -> None:
    """A hand-inserted second ``interrupt.minted`` for one (thread, interrupt) fails in the database."""
    store.mint("t-1", marker("i-1"))
    first = store.history("t-1")[-1]
    with pytest.raises(sa.exc.IntegrityError):
        with store.engine.begin() as conn:
            row = forged_row(first, MINTED)
            row["data"] = first.data
            conn.execute(events_table.insert(), row)
    assert count_events(store) == 1


def test_database_refuses_a_forged_duplicate_version(store: InterruptStore) -> None:
    """Two events cannot hold the same (thread_id, version): the unique key refuses the second."""
    store.mint("t-1", marker("i-1"))
    first = store.history("t-1")[-1]
    with pytest.raises(sa.exc.IntegrityError):
        with store.engine.begin() as conn:
            conn.execute(events_table.insert(), forged_row(first, ROUTE_DECIDED, version_step=0))
    assert count_events(store) == 1


# --- I4 idempotent mint -------------------------------------------------------------


def test_minting_the_same_marker_twice_appends_nothing(store: InterruptStore) -> None:
    """The second mint of one (thread, interrupt) returns False and the log does not grow."""
    update = marker("i-1", amount=420)
    assert store.mint("t-1", update) is True
    assert store.mint("t-1", update) is False
    assert store.mint("t-1", update["_interrupt_pending"]) is False
    changed = marker("i-1", amount=999)
    assert store.mint("t-1", changed) is False
    assert types(store.history("t-1")) == [MINTED]
    assert store.pending("t-1") == update["_interrupt_pending"]


def test_the_same_interrupt_id_on_two_threads_is_two_interrupts(store: InterruptStore) -> None:
    """``interrupt_id`` is unique per thread only: each thread gets its own mint and pending marker."""
    assert store.mint("t-1", marker("i-same"))
    assert store.mint("t-2", marker("i-same"))
    assert types(store.history("t-1")) == [MINTED]
    assert types(store.history("t-2")) == [MINTED]
    store.resume("t-1", "i-same", actor="alice")
    assert store.pending("t-1") is None
    assert store.pending("t-2") is not None
    assert store.pending("t-2")["interrupt_id"] == "i-same"  # type: ignore[index]


@pytest.mark.parametrize("ending", ["resumed", "expired"])
def test_reminting_a_resolved_interrupt_appends_nothing(store: InterruptStore, ending: str) -> None:
    """A marker seen again after its interrupt ended is not pending again and adds no event."""
    update = marker("i-1")
    store.mint("t-1", update)
    if ending == "resumed":
        store.resume("t-1", "i-1", actor="alice")
    else:
        store.expire("t-1", "i-1")
    n = count_events(store)
    assert store.mint("t-1", update) is False
    assert count_events(store) == n
    assert store.pending("t-1") is None


# --- I5 one pending per thread ------------------------------------------------------


def test_minting_while_pending_supersedes_the_older_in_the_same_transaction(
    store: InterruptStore,
) -> None:
    """The older interrupt is expired (superseded, by mint) right before the new mint, as one write."""
    store.mint("t-1", marker("i-old"))
    with freeze_time(T0):
        store.mint("t-1", marker("i-new"), actor="bot")
    old_mint, expiry, new_mint = store.history("t-1")
    assert (expiry.type, expiry.interrupt_id, expiry.version) == (EXPIRED, "i-old", 2)
    assert expiry.data["reason"] == "superseded"
    assert expiry.data["detected_by"] == "mint"
    assert (new_mint.type, new_mint.interrupt_id, new_mint.version) == (MINTED, "i-new", 3)
    # One transaction: consecutive positions, one instant.
    assert new_mint.position == expiry.position + 1
    assert expiry.occurred_at == new_mint.occurred_at == T0
    assert store.pending("t-1")["interrupt_id"] == "i-new"  # type: ignore[index]
    with pytest.raises(InterruptExpiredError):
        store.resume("t-1", "i-old", actor="alice")


# --- I6 projection = fold -----------------------------------------------------------


def latest_run_id(history: list[StoredEvent]) -> str | None:
    """The spec's rule, computed independently of the store's fold."""
    run_ids = [e.run_id for e in history if e.type in (MINTED, ROUTE_DECIDED) and e.run_id]
    return run_ids[-1] if run_ids else None


def projection_rows(store: InterruptStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.exec_driver_sql("SELECT * FROM symfonic_threads ORDER BY thread_id")
        ]


def assert_projection_is_the_fold(store: InterruptStore, threads: list[str]) -> None:
    for thread in threads:
        history = store.history(thread)
        folded = fold(history).get(thread, ThreadState(thread)).as_state()
        assert store.state(thread) == folded
        assert store.state(thread)["run_id"] == latest_run_id(history)
    persisted = projection_rows(store)
    assert store.rebuild_projection() == count_events(store)
    assert projection_rows(store) == persisted
    for thread in threads:
        assert store.state(thread) == fold(store.history(thread)).get(
            thread, ThreadState(thread)
        ).as_state()


def test_projection_equals_rebuild_and_pure_fold_after_every_operation(
    store: InterruptStore,
) -> None:
    """After each operation the persisted projection, a rebuild and ``fold(history)`` agree."""
    threads = ["a", "b"]
    bare = {"name": "n", "interrupt_id": "i-bare", "payload": {"k": [1, 2]}}  # no minted_at
    steps: list[Any] = [
        lambda: store.mint("a", marker("i-1", run_id="r1")),
        lambda: store.record_route("a", "interrupt"),  # run_id None keeps r1
        lambda: store.record_route("a", "interrupt", run_id="r2"),
        lambda: store.mint("a", marker("i-2")),  # marker without run_id keeps r2
        lambda: store.mint("b", bare),
        lambda: store.resume("a", "i-2", {"ok": True}, actor="alice"),
        lambda: store.mint("a", marker("i-3", run_id="r3")),
        lambda: store.record_route("b", "finish", run_id="rb"),
        lambda: store.expire("a", "i-3", reason="cancelled"),
        lambda: store.mint("b", marker("i-4", run_id="rb")),
        lambda: store.record_route("b", "finish", run_id="rb2"),
        lambda: store.sweep(),
    ]
    for step in steps:
        step()
        assert_projection_is_the_fold(store, threads)
    assert store.state("a")["run_id"] == "r3"
    assert store.state("b") == {"_interrupt_pending": None, "run_id": "rb2"}


# --- I8 one clock -------------------------------------------------------------------


def test_occurred_at_comes_from_the_python_clock(store: InterruptStore) -> None:
    """With the clock frozen every stored ``occurred_at`` is that instant, tz-aware UTC."""
    with freeze_time(T0):
        store.mint("t-1", marker("i-1"))
        store.record_route("t-1", "interrupt")
        store.resume("t-1", "i-1", actor="alice")
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume("t-1", "i-1", {"other": 1}, actor="bob")
        store.mint("t-1", marker("i-2"))
        store.expire("t-1", "i-2")
    history = store.history("t-1")
    assert len(history) == 6
    for event in history:
        assert event.occurred_at == T0
        assert event.occurred_at.utcoffset() == timedelta(0)
    assert store.pending("t-1") is None


# --- I9 tamper evidence -------------------------------------------------------------


def test_a_tampered_payload_is_named_by_verify(store: InterruptStore) -> None:
    """Changing one stored event's data breaks its thread's chain at that event, and only there."""
    store.mint("victim", marker("i-1", amount=10))
    store.record_route("victim", "interrupt")
    store.resume("victim", "i-1", {"approved": False}, actor="bob")
    store.mint("bystander", marker("i-1"))
    assert store.verify().ok
    target = store.history("victim")[2]

    drop_append_only_triggers(store)
    with store.engine.begin() as conn:
        conn.execute(
            sa.update(events_table)
            .where(events_table.c.position == target.position)
            .values(data={"response": {"approved": True}})
        )
    assert store.history("victim")[2].data == {"response": {"approved": True}}

    report = store.verify()
    assert report.ok is False
    assert [(b.thread_id, b.version, b.position) for b in report.broken] == [
        ("victim", 3, target.position)
    ]
    text = str(report)
    assert "'victim'" in text
    assert "version 3" in text
    assert f"position {target.position}" in text
    # The bystander's chain holds; the dropped triggers are reported for every verify.
    bystander = store.verify(thread_id="bystander")
    assert bystander.broken == [] and bystander.guards and not bystander.ok
    assert not store.verify(thread_id="victim").ok


def test_a_deleted_event_is_named_by_verify(store: InterruptStore) -> None:
    """Removing an event from the middle of a chain is reported at the first gap."""
    store.mint("t-1", marker("i-1"))
    store.record_route("t-1", "interrupt")
    store.record_route("t-1", "interrupt")
    removed, after = store.history("t-1")[1:3]
    drop_append_only_triggers(store)
    with store.engine.begin() as conn:
        conn.execute(sa.delete(events_table).where(events_table.c.position == removed.position))
    report = store.verify()
    assert not report.ok
    assert (report.broken[0].version, report.broken[0].position) == (3, after.position)
    assert "expected version 2" in str(report)


# --- I10 nothing dead is applied ---------------------------------------------------


def rejection(store: InterruptStore, thread: str) -> StoredEvent:
    last = store.history(thread)[-1]
    assert last.type == RESUME_REJECTED
    return last


def test_resume_of_an_unknown_interrupt_is_refused_and_recorded(store: InterruptStore) -> None:
    """An id that was never minted raises UnknownInterruptError and leaves a rejection with the actor."""
    store.mint("t-1", marker("i-1"))
    with pytest.raises(UnknownInterruptError) as caught:
        store.resume("t-1", "i-nope", {"approved": True}, actor="alice")
    assert "i-nope" in str(caught.value)
    event = rejection(store, "t-1")
    assert event.interrupt_id == "i-nope"
    assert event.actor == "alice"
    assert event.data == {"response": {"approved": True}, "why": "unknown"}
    assert store.pending("t-1")["interrupt_id"] == "i-1"  # type: ignore[index]


def test_a_refused_answer_on_a_thread_with_no_events_writes_nothing(store: InterruptStore) -> None:
    """An answer on a thread id with no events (a typo) is refused, by the store and the node's path, and creates no thread."""
    store.mint("t-1", marker("i-1"))
    before = all_rows(store)
    with pytest.raises(UnknownInterruptError) as caught:
        store.resume("t-typo", "i-1", {"approved": True}, actor="alice")
    assert "t-typo" in str(caught.value)
    with pytest.raises(UnknownInterruptError):
        store.admit_node_resume(
            "t-typo", marker("i-1")["_interrupt_pending"], {"approved": True}, actor="alice"
        )
    assert all_rows(store) == before
    assert store.history("t-typo") == [] and list(store.replay("t-typo")) == []
    assert store.state("t-typo") == {"_interrupt_pending": None, "run_id": None}
    # On a thread that exists, the refusal is still part of the record.
    with pytest.raises(UnknownInterruptError):
        store.resume("t-1", "i-nope", {"approved": True}, actor="alice")
    assert rejection(store, "t-1").data["why"] == "unknown"


async def test_a_refused_answer_on_a_thread_with_no_events_writes_nothing_async(
    astore: AsyncInterruptStore,
) -> None:
    """The asyncio store refuses an answer on a thread with no events without creating the thread."""
    with pytest.raises(UnknownInterruptError):
        await astore.resume("t-typo", "i-1", None, actor="alice")
    assert await astore.history("t-typo") == []
    assert await astore.events() == []


def test_resume_of_a_resolved_interrupt_by_someone_else_is_refused(store: InterruptStore) -> None:
    """A second, different answer raises InterruptAlreadyResolvedError and is recorded as rejected."""
    store.mint("t-1", marker("i-1"))
    store.resume("t-1", "i-1", {"approved": True}, actor="alice")
    with pytest.raises(InterruptAlreadyResolvedError, match="alice"):
        store.resume("t-1", "i-1", {"approved": True}, actor="bob")
    event = rejection(store, "t-1")
    assert (event.actor, event.data["why"]) == ("bob", "already_resolved")
    with pytest.raises(InterruptAlreadyResolvedError):
        store.resume("t-1", "i-1", {"approved": False}, actor="alice")
    event = rejection(store, "t-1")
    assert (event.actor, event.data) == (
        "alice",
        {"response": {"approved": False}, "why": "already_resolved"},
    )
    assert [e.type for e in store.history("t-1")].count(RESUMED) == 1


def test_resume_of_an_expired_interrupt_is_refused(store: InterruptStore) -> None:
    """A cancelled interrupt raises InterruptExpiredError carrying the reason, and records why."""
    store.mint("t-1", marker("i-1"))
    store.expire("t-1", "i-1", reason="cancelled", actor="ops")
    with pytest.raises(InterruptExpiredError) as caught:
        store.resume("t-1", "i-1", actor="alice")
    assert caught.value.reason == "cancelled"
    event = rejection(store, "t-1")
    assert (event.actor, event.data) == ("alice", {"response": {}, "why": "expired"})


def test_resume_of_a_ttl_stale_interrupt_records_the_expiry_then_the_rejection(
    migrated_url: str, store: InterruptStore
) -> None:
    """Past the store's TTL a resume first records ``expired`` (ttl, by resume), then the rejection."""
    with InterruptStore(migrated_url, ttl_seconds=60) as timed:
        with freeze_time(T0) as clock:
            timed.mint("t-1", marker("i-1"))
            timed.mint("t-2", marker("i-2"))
            clock.tick(60)
            timed.resume("t-2", "i-2", actor="alice")  # exactly at the TTL: still current
            clock.tick(1)
            with pytest.raises(InterruptExpiredError) as caught:
                timed.resume("t-1", "i-1", {"approved": True}, actor="alice")
    assert caught.value.reason == "ttl"
    _, expiry, rejected = timed.history("t-1")
    assert expiry.type == EXPIRED
    assert expiry.data == {"reason": "ttl", "detected_by": "resume"}
    assert rejected.type == RESUME_REJECTED
    assert rejected.data == {"response": {"approved": True}, "why": "expired"}
    assert rejected.actor == "alice"
    assert store.pending("t-1") is None
    assert types(store.history("t-2")) == [MINTED, RESUMED]


def test_resume_after_the_run_moved_on_records_the_expiry_then_the_rejection(
    store: InterruptStore,
) -> None:
    """When a later route names another run, the marker's run is over: expired (run_id), then refused."""
    store.mint("t-1", marker("i-1", run_id="run-1"))
    store.record_route("t-1", "interrupt", run_id="run-1")
    store.record_route("t-1", "finish", run_id="run-2")
    with pytest.raises(InterruptExpiredError) as caught:
        store.resume("t-1", "i-1", actor="alice")
    assert caught.value.reason == "run_id"
    expiry, rejected = store.history("t-1")[-2:]
    assert (expiry.type, expiry.data) == (EXPIRED, {"reason": "run_id", "detected_by": "resume"})
    assert (rejected.type, rejected.data["why"]) == (RESUME_REJECTED, "expired")
    # Asking again is an ordinary expired rejection; no second expiry.
    with pytest.raises(InterruptExpiredError):
        store.resume("t-1", "i-1", actor="alice")
    assert types(store.history("t-1")).count(EXPIRED) == 1


def test_an_identical_repeated_resume_returns_the_same_command_and_appends_nothing(
    store: InterruptStore,
) -> None:
    """Repeating the admitted call (same actor, same response) is answered again without an event."""
    store.mint("t-1", marker("i-1"))
    first = store.resume("t-1", "i-1", {"approved": True, "note": "ok"}, actor="alice")
    n = count_events(store)
    again = store.resume("t-1", "i-1", {"note": "ok", "approved": True}, actor="alice")
    assert again == first
    assert isinstance(again, Command)
    assert count_events(store) == n


class Approval(pydantic.BaseModel):
    approved: bool
    note: str = ""


class Ack(pydantic.BaseModel):
    pass


HEX_ID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("response", "sent", "recorded"),
    [
        (None, {INTERRUPT_ACK_SENTINEL: True}, {}),
        ({}, {INTERRUPT_ACK_SENTINEL: True}, {}),
        (Ack(), {INTERRUPT_ACK_SENTINEL: True}, {}),
        ({HEX_ID: "yes"}, {HEX_ID: "yes", INTERRUPT_ACK_SENTINEL: True}, {HEX_ID: "yes"}),
        ({"approved": True}, {"approved": True}, {"approved": True}),
        ({"approved": True, INTERRUPT_ACK_SENTINEL: True}, {"approved": True}, {"approved": True}),
        (Approval(approved=True, note="n"), {"approved": True, "note": "n"}, {"approved": True, "note": "n"}),
        (42, {"value": "42"}, {"value": "42"}),
        ("yes", {"value": "yes"}, {"value": "yes"}),
    ],
    ids=["none", "empty", "fieldless-model", "hex-keys", "dict", "dict-with-sentinel", "model", "int", "str"],
)
def test_the_resume_command_carries_the_encoded_response(
    store: InterruptStore, response: Any, sent: dict[str, Any], recorded: dict[str, Any]
) -> None:
    """The Command's resume value is N5-safe and decodes (N2) to exactly the recorded response."""
    store.mint("t-1", marker("i-1"))
    command = store.resume("t-1", "i-1", response, actor="alice")
    assert command.resume == sent
    resumed = store.history("t-1")[-1]
    assert resumed.type == RESUMED
    assert resumed.actor == "alice"
    assert resumed.data["response"] == recorded
    assert INTERRUPT_ACK_SENTINEL not in resumed.data["response"]
    assert normalize_response(command.resume) == recorded
