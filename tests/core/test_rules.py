"""The answer rules, one by one: each admits (``None``) or refuses with its word.

Both paths ask these functions (the marker path's ``resume``, the native path's
``claim``); their ladders are proved end to end by test_store_api, test_gateway,
test_recorded_refusals and the others. Here each rule alone, on plain values.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from symfonic_store.events import EXPIRED, MINTED, REJECTION_WHYS, RESUMED, StoredEvent
from symfonic_store.native import NATIVE_SOURCE
from symfonic_store.protocol import expired_resume_value, marker_staleness, ttl_passed
from symfonic_store.store import rules
from symfonic_store.store.rules import Refused
from symfonic_store.store.settlement import OUTCOME_UNKNOWN


def event(type_: str, data: dict[str, Any] | None = None, actor: str | None = "alice") -> StoredEvent:
    return StoredEvent(
        position=1, thread_id="t", version=1, type=type_, interrupt_id="i", run_id=None,
        actor=actor, data=data or {}, occurred_at=datetime(2026, 1, 2, 3, 4, 5, 600, UTC), hash="h",
    )


def test_every_word_a_rule_records_is_a_rejection_why() -> None:
    words = {rules.UNKNOWN, rules.ALREADY_RESOLVED, rules.EXPIRED, rules.NOT_ALLOWED, rules.IN_PROGRESS}
    assert words <= set(REJECTION_WHYS)
    assert OUTCOME_UNKNOWN == "outcome_unknown"


def test_unknown_admits_a_mint_and_refuses_nothing_minted() -> None:
    assert rules.unknown(event(MINTED)) is None
    assert rules.unknown(None) == Refused("unknown")


def test_ended_admits_an_open_interrupt_and_refuses_each_ending_with_its_word() -> None:
    assert rules.ended(None) is None
    assert rules.ended(event(RESUMED, {"response": {"ok": 1}})) == Refused("already_resolved")
    assert rules.ended(event(EXPIRED, {"reason": "ttl"})) == Refused("expired", "ttl")
    assert rules.ended(event(EXPIRED, {"reason": "superseded"})) == Refused("expired", "superseded")


def test_answered_again_lets_through_only_the_identical_repeat_or_the_wake_up() -> None:
    resumed = event(RESUMED, {"response": {"ok": 1}}, actor="alice")
    assert rules.answered_again(resumed, {"ok": 1}, "alice", from_node=False)
    assert not rules.answered_again(resumed, {"ok": 1}, "bob", from_node=False)
    assert rules.answered_again(resumed, {"ok": 1}, "bob", from_node=True)  # the node applies it
    assert not rules.answered_again(resumed, {"ok": 2}, "alice", from_node=True)
    expired = event(EXPIRED, {"reason": "ttl"})
    wake_up = expired_resume_value("ttl")
    assert rules.answered_again(expired, wake_up, None, from_node=True)
    assert not rules.answered_again(expired, wake_up, None, from_node=False)
    assert not rules.answered_again(expired, expired_resume_value("run_id"), None, from_node=True)


def test_wrong_path_refuses_a_mint_of_the_other_kind() -> None:
    marker = event(MINTED, {"name": "n", "payload": {}})
    native = event(MINTED, {"source": NATIVE_SOURCE})
    assert not rules.wrong_path(marker, native=False) and rules.wrong_path(marker, native=True)
    assert not rules.wrong_path(native, native=True) and rules.wrong_path(native, native=False)


@pytest.mark.parametrize(
    ("marker", "run_id", "ttl", "expected"),
    [
        (None, "r", 10, None),  # no marker: nothing to be stale
        ({}, "r", 10, None),
        ("not a dict", "r", 10, None),
        ({"run_id": "r", "minted_at": 1000.0}, "r", 10, None),
        ({"run_id": "old", "minted_at": 1000.0}, "r", None, Refused("expired", "run_id")),
        ({"run_id": None, "minted_at": 989.0}, "r", 10, Refused("expired", "ttl")),
        ({"run_id": "old", "minted_at": 989.0}, "r", 10, Refused("expired", "run_id")),  # P3 first
        ({"minted_at": 989.0}, None, None, None),  # no TTL: only the run_id rule
        ({"minted_at": "yesterday"}, None, 10, None),  # a non-numeric minted_at skips P4
    ],
)
def test_stale_refuses_another_runs_marker_then_one_past_its_ttl(
    marker: Any, run_id: str | None, ttl: float | None, expected: Refused | None
) -> None:
    assert rules.stale(marker, run_id, ttl, now=1000.0) == expected


def test_stale_ttl_is_strict_and_a_breakpoint_has_none() -> None:
    now = 1_000.0
    assert rules.stale({"minted_at": 990.0}, None, 10, now=now) is None  # exactly at the TTL
    assert rules.stale({"minted_at": 989.9}, None, 10, now=now) == Refused("expired", "ttl")
    assert rules.stale({"minted_at": 0.0}, None, 10, breakpoint=True, now=now) is None
    assert ttl_passed(989.9, 10, now) and not ttl_passed(990.0, 10, now)
    assert ttl_passed(-(10**400), 10, now) and not ttl_passed(10**400, 10, now)  # beyond any float
    assert marker_staleness({"run_id": "a"}, "b", 10) == "run_id"


def test_not_allowed_asks_the_policy_when_there_is_one() -> None:
    marker = {"name": "n", "interrupt_id": "i", "payload": {"approvers": ["alice"]}}
    assert rules.not_allowed(None, "t", marker, "bob") is None
    assert rules.not_allowed(rules.payload_approvers, "t", marker, "alice") is None
    assert rules.not_allowed(rules.payload_approvers, "t", marker, "bob") == Refused("not_allowed")
    assert rules.not_allowed(rules.payload_approvers, "t", marker, None) == Refused("not_allowed")
    assert rules.payload_approvers("t", {"payload": {}}, None)  # no list: anyone


def test_held_refuses_while_another_answer_holds_the_interrupt() -> None:
    claim = {"actor": "alice", "claimed_at": 1.0}
    assert rules.held(None, outcome_unknown=False) is None
    assert rules.held(claim, outcome_unknown=False) == Refused("in_progress")
    assert rules.held(claim, outcome_unknown=True) == Refused("outcome_unknown")


def test_mint_and_ending_and_when() -> None:
    minted, resumed = event(MINTED), event(RESUMED)
    assert rules.mint_and_ending([]) == (None, None)
    assert rules.mint_and_ending([minted]) == (minted, None)
    assert rules.mint_and_ending([minted, resumed]) == (minted, resumed)
    assert rules.when(resumed) == "2026-01-02T03:04:05+00:00"
