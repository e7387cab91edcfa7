"""Reminders and escalation (SPEC §14): the sweep chases what stays open, once each.

A policy entry's ``remind_after`` and ``escalate_after`` (with ``escalate_to``) make
``store.sweep(policy=...)`` record ``interrupt.reminded`` and ``interrupt.escalated`` for
an open interrupt that old, at most once each, never ending it. The clock is frozen with
``freezegun`` and moved by hand; nothing sleeps. (Racing sweeps in other processes, the
migration, and the service's side are in the other ``test_reminders_*`` modules.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory
from langgraph.types import Command  # imported before any clock is frozen (pydantic)

from symfonic_store import (
    ESCALATED,
    EXPIRED,
    MINTED,
    REMINDED,
    RESUMED,
    AsyncInterruptStore,
    InterruptStore,
    InvalidInputError,
)
from symfonic_store.db.schema import events as events_table
from symfonic_store.policy import Policy
from symfonic_store.projection import fold
from symfonic_store.services import chase as chase_service
from symfonic_store.store.append import run_write

START = "2030-01-01 00:00:00"
POLICY = {
    "refund": {"roles": ["finance"], "remind_after": 60, "escalate_after": 3600,
               "escalate_to": ["finance_lead", "cfo"]},
    "*": {"roles": ["approver"]},
}
WIRE = "n" * 32

mint = partial(factories.mint, name="refund", payload={"refund": 420})


@pytest.fixture
def clock() -> Iterator[FrozenDateTimeFactory]:
    """The clock, frozen at a whole second and moved only by the test."""
    with freeze_time(START, ignore=["_pytest.timing"]) as frozen:
        yield frozen


def native_mint(store: InterruptStore, thread_id: str, *names: tuple[str, str]) -> None:
    """Record what a thread waits on, LangGraph interrupts ``(interrupt id, name)`` (the
    refund ``WIRE`` by default), as a gateway does (no graph run)."""
    store.record_waiting(
        thread_id,
        [{"interrupt_id": interrupt_id, "value": {"name": name}, "task_id": f"task-{k}",
          "checkpoint_id": "cp-1", "checkpoint_ns": "", "breakpoint": False}
         for k, (interrupt_id, name) in enumerate(names or [(WIRE, "refund")])],
        graph="payments",
    )


def chases(store: InterruptStore, thread_id: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    """``(type, interrupt_id, data)`` of the thread's reminders and escalations."""
    return [
        (e.type, e.interrupt_id, e.data)
        for e in store.history(thread_id)
        if e.type in (REMINDED, ESCALATED)
    ]


# --- when, and once ---------------------------------------------------------------------


def test_a_marker_is_reminded_then_escalated_once_each_at_its_thresholds(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Nothing before 60 s; a reminder past 60 s (data: after); an escalation past 3600 s
    (data: after, to); each recorded once however often the sweep runs."""
    m = mint(store, "t-1", "i-1")
    clock.tick(timedelta(seconds=60))
    assert store.sweep(policy=POLICY).reminded == []  # strictly older, as the TTL (P4)
    clock.tick(timedelta(seconds=0.001))
    report = store.sweep(policy=POLICY)
    assert report.reminded == [("t-1", "i-1", 60)] and report.escalated == []
    assert chases(store, "t-1") == [(REMINDED, "i-1", {"after": 60})]
    assert store.sweep(policy=POLICY).reminded == []
    clock.tick(timedelta(seconds=3539.999))  # 3600 s exactly since the mint
    assert store.sweep(policy=POLICY).escalated == []
    clock.tick(timedelta(seconds=0.001))
    report = store.sweep(policy=POLICY)
    assert report.escalated == [("t-1", "i-1", 3600, ("cfo", "finance_lead"))]
    assert report.reminded == []
    for _ in range(3):
        again = store.sweep(policy=POLICY)
        assert (again.reminded, again.escalated) == ([], [])
    assert chases(store, "t-1") == [
        (REMINDED, "i-1", {"after": 60}),
        (ESCALATED, "i-1", {"after": 3600, "to": ["cfo", "finance_lead"]}),
    ]
    assert [e.actor for e in store.history("t-1")] == [None, None, None]
    # Neither ends it: still pending, still answerable.
    assert store.pending("t-1") == m
    assert store.is_current("t-1")
    assert isinstance(store.resume("t-1", "i-1", {"approved": True}, actor="alice"), Command)
    assert [e.type for e in store.history("t-1")] == [MINTED, REMINDED, ESCALATED, RESUMED]


def test_a_late_sweep_records_both_at_once(store: InterruptStore, clock: FrozenDateTimeFactory) -> None:
    """A sweep that first runs past both thresholds records the reminder and the escalation."""
    mint(store, "t-1", "i-1")
    clock.tick(timedelta(hours=2))
    report = store.sweep(policy=POLICY)
    assert report.reminded == [("t-1", "i-1", 60)]
    assert report.escalated == [("t-1", "i-1", 3600, ("cfo", "finance_lead"))]
    assert [t for t, _, _ in chases(store, "t-1")] == [REMINDED, ESCALATED]
    assert "recorded 1 reminder(s); escalated 1 interrupt(s)" in str(report)


def test_langgraph_interrupts_are_chased_too_and_stay_open(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """A LangGraph interrupt's age counts from its minted_at; after both events it is still
    open (open_interrupts, list_pending), and each sits on its own interrupt id."""
    native_mint(store, "t-n", (WIRE, "refund"), ("o" * 32, "other"))  # other: "*", no chase
    clock.tick(timedelta(hours=2))
    report = store.sweep(policy=POLICY)
    assert report.reminded == [("t-n", WIRE, 60)]
    assert report.escalated == [("t-n", WIRE, 3600, ("cfo", "finance_lead"))]
    assert chases(store, "t-n") == [
        (REMINDED, WIRE, {"after": 60}),
        (ESCALATED, WIRE, {"after": 3600, "to": ["cfo", "finance_lead"]}),
    ]
    assert {o["interrupt_id"] for o in store.open_interrupts("t-n")} == {WIRE, "o" * 32}
    assert {p["interrupt_id"] for p in store.list_pending()} == {WIRE, "o" * 32}
    again = store.sweep(policy=POLICY)
    assert (again.reminded, again.escalated) == ([], [])


def test_the_policy_names_decide_and_the_default_entry_applies_to_the_rest(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """An entry chases its name; "*" chases every name it does not list; a name with no
    entry and no "*" is never chased; a policy without thresholds records nothing."""
    mint(store, "t-r", "i-r")
    factories.mint(store, "t-o", "i-o", name="other")
    factories.mint(store, "t-b", "i-b", name="refund,other")  # a batched name: both entries
    clock.tick(timedelta(seconds=120))
    assert store.sweep(policy={"*": {"roles": ["x"]}}).reminded == []
    only_refund = {"refund": {"remind_after": 100}}
    assert {t for t, _, _ in store.sweep(policy=only_refund, dry_run=True).reminded} == {"t-r", "t-b"}
    everyone = {"refund": {"remind_after": 100}, "*": {"remind_after": 110}}
    report = store.sweep(policy=everyone)
    assert sorted(report.reminded) == [("t-b", "i-b", 100), ("t-o", "i-o", 110), ("t-r", "i-r", 100)]


def test_an_ended_interrupt_is_never_chased_and_the_sweeps_expiry_comes_first(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Answered before its threshold: nothing; past the TTL: the same sweep expires it and
    does not remind of it (a dry run leaves out what it would expire, too)."""
    mint(store, "t-a", "i-a")
    mint(store, "t-x", "i-x")
    store.resume("t-a", "i-a", {"approved": True}, actor="alice")
    clock.tick(timedelta(seconds=90))
    dry = store.sweep(ttl_seconds=80, policy=POLICY, dry_run=True)
    assert {t for t, _, _ in dry.expired} == {"t-x"} and dry.reminded == []
    report = store.sweep(ttl_seconds=80, policy=POLICY)
    assert [(t, i) for t, i, _ in report.expired] == [("t-x", "i-x")]
    assert report.reminded == []
    assert chases(store, "t-a") == chases(store, "t-x") == []
    assert [e.type for e in store.history("t-x")] == [MINTED, EXPIRED]


def test_a_dry_run_lists_what_is_due_and_writes_nothing(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """dry_run reports the reminders and escalations due; the log does not change."""
    mint(store, "t-1", "i-1")
    native_mint(store, "t-2")
    clock.tick(timedelta(hours=2))
    before = store.events()
    report = store.sweep(policy=POLICY, dry_run=True)
    assert sorted(report.reminded) == [("t-1", "i-1", 60), ("t-2", WIRE, 60)]
    assert len(report.escalated) == 2
    assert store.events() == before
    assert "would record 2 reminder(s); would escalate 2 interrupt(s)" in str(report)
    as_dict = report.as_dict()
    assert as_dict["escalated"][0]["to"] == ["cfo", "finance_lead"]
    assert {r["thread_id"] for r in as_dict["reminded"]} == {"t-1", "t-2"}


def test_thread_ids_and_batches_limit_and_page_the_chase(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """thread_ids keeps the chase to those threads; batch_size pages it without skipping any."""
    for k in range(7):
        mint(store, f"t-{k}", f"i-{k}")
    clock.tick(timedelta(seconds=61))
    report = store.sweep(policy=POLICY, thread_ids=["t-1", "t-4"])
    assert sorted(t for t, _, _ in report.reminded) == ["t-1", "t-4"]
    report = store.sweep(policy=POLICY, batch_size=2)
    assert sorted(t for t, _, _ in report.reminded) == ["t-0", "t-2", "t-3", "t-5", "t-6"]
    assert all(len(chases(store, f"t-{k}")) == 1 for k in range(7))


def test_a_policy_file_object_and_bad_policies(store: InterruptStore, tmp_path: Path) -> None:
    """A Policy read from the service's file works as its JSON does; a malformed one is
    refused before anything is read or written, naming the key."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    assert Policy.from_file(path) == Policy.from_dict(POLICY)
    for bad, word in [
        ({"x": {"remind_after": 0}}, "remind_after"),
        ({"x": {"remind_after": True}}, "remind_after"),
        ({"x": {"escalate_after": 5}}, "escalate_to"),
        ({"x": {"escalate_to": ["a"]}}, "escalate_after"),
        ({"x": {"escalate_after": 5, "escalate_to": []}}, "escalate_to"),
        ({"x": {"remind_afer": 5}}, "unknown key"),
    ]:
        with pytest.raises(InvalidInputError, match=word):
            store.sweep(policy=bad)
    with pytest.raises(InvalidInputError, match="policy"):
        store.sweep(policy="policy.json")  # type: ignore[arg-type]
    assert store.events() == []


async def test_the_async_store_chases_alike(astore: AsyncInterruptStore) -> None:
    """sweep(policy=...) on the async store records the same events, once."""
    with freeze_time(START, ignore=["_pytest.timing"]) as clock:
        await astore.mint("t-1", factories.marker("i-1", name="refund"))
        clock.tick(timedelta(hours=2))
        report = await astore.sweep(policy=POLICY)
        assert report.reminded == [("t-1", "i-1", 60)] and len(report.escalated) == 1
        again = await astore.sweep(policy=POLICY)
        assert (again.reminded, again.escalated) == ([], [])
        assert await astore.escalations(["t-1"]) == [
            {"thread_id": "t-1", "interrupt_id": "i-1", "to": ["cfo", "finance_lead"],
             "at": (await astore.history("t-1"))[-1].occurred_at}
        ]


# --- the database keeps "once" ------------------------------------------------------------


@pytest.mark.parametrize(("kind", "index"), [
    (REMINDED, "uq_symfonic_events_one_reminder"),
    (ESCALATED, "uq_symfonic_events_one_escalation"),
])
def test_the_database_refuses_a_second_reminder_or_escalation(
    store: InterruptStore, clock: FrozenDateTimeFactory, kind: str, index: str
) -> None:
    """A hand-inserted second event of the type for one interrupt fails on its unique index;
    the same row for another interrupt, or of another type, goes in."""
    mint(store, "t-1", "i-1")
    clock.tick(timedelta(hours=2))
    store.sweep(policy=POLICY)
    last = store.history("t-1")[-1]
    row = {
        "thread_id": "t-1", "version": last.version + 1, "type": kind, "interrupt_id": "i-1",
        "run_id": None, "actor": "mallory", "data": {"after": 1}, "occurred_at": last.occurred_at,
        "hash": "f" * 64,
    }
    with pytest.raises(sa.exc.IntegrityError) as caught:
        with store.engine.begin() as conn:
            conn.execute(events_table.insert(), row)
    if store.engine.dialect.name == "postgresql":
        assert index in str(caught.value)
    with store.engine.begin() as conn:
        conn.execute(events_table.insert(), {**row, "interrupt_id": "i-2"})


# --- the rest of the store reads them like any event ----------------------------------------


def test_replay_rebuild_verify_audit_and_fold_keep_the_interrupt_pending(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Replay shows both events with the interrupt still pending; the fold, a rebuild and the
    projection agree; verify passes; the audit lists the interrupt once, pending."""
    m = mint(store, "t-1", "i-1")
    clock.tick(timedelta(hours=2))
    store.sweep(policy=POLICY)
    steps = list(store.replay("t-1"))
    assert [e.type for e, _ in steps] == [MINTED, REMINDED, ESCALATED]
    assert all(state["_interrupt_pending"] == m for _, state in steps)
    history = store.history("t-1")
    assert fold(history)["t-1"].as_state() == store.state("t-1")
    store.rebuild_projection()
    assert store.pending("t-1") == m
    assert store.verify().ok
    records = [r for r in store.audit() if r.thread_id == "t-1"]
    assert [(r.interrupt_id, r.outcome) for r in records] == [("i-1", "pending")]


def test_an_archive_carries_them_and_verify_passes_after(
    store: InterruptStore, clock: FrozenDateTimeFactory, tmp_path: Path
) -> None:
    """A finished thread with a reminder and an escalation is archived whole; its events
    are in the archive, gone from the table, and verify still passes."""
    mint(store, "t-1", "i-1")
    clock.tick(timedelta(hours=2))
    store.sweep(policy=POLICY)
    store.resume("t-1", "i-1", {"approved": True}, actor="alice")
    clock.tick(timedelta(days=2))
    out = tmp_path / "archive.jsonl"
    result = store.archive(before="2030-01-02T00:00:00+00:00", out=out)
    assert result.path is not None
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [line.get("type") for line in lines if isinstance(line, dict)]
    assert REMINDED in kinds and ESCALATED in kinds
    assert store.history("t-1") == []
    assert store.verify().ok


def test_a_page_read_before_another_sweep_wrote_records_nothing_twice(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Two sweeps that both read the same page before either wrote: the second decides again
    under the thread's lock and appends nothing (and one ended meanwhile is left alone)."""
    mint(store, "t-1", "i-1")
    mint(store, "t-2", "i-2")
    clock.tick(timedelta(hours=2))
    policy = Policy.from_dict(POLICY)
    with store.engine.connect() as conn:
        page = run_write(conn, partial(
            chase_service.chase_page, policy=policy, native=False, after=None, limit=10,
            thread_ids=None,
        ))
    assert len(page.due) == 4
    first = _record(store, page.due)
    assert len(first) == 4
    store.expire("t-2", "i-2", actor="ops")
    assert _record(store, page.due) == []
    assert len(chases(store, "t-1")) == 2 and len(chases(store, "t-2")) == 2


def _record(store: InterruptStore, due: list[chase_service.Due]) -> list[chase_service.Due]:
    with store.engine.connect() as conn:
        recorded: list[chase_service.Due] = run_write(
            conn, partial(chase_service.record, items=due, native=False)
        )
    return recorded
