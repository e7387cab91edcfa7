"""The audit columns (symfonic_store/audit_columns.py): written by the append's own INSERT,
equal to what the event's data gives, and checked by ``verify`` against the hashed data.

The attacks are played with plain SQL (tests/attacker.py), as in tests/evidence/test_checkpoints.py:
an attacker who changes only the copies ``audit()`` reads, and puts the triggers back, leaves
every hash chain, head and guard intact; ``verify`` still names the event.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from attacker import EVENTS, alter_audit_columns, insert_event
from audit_log import HITL, rich_log
from cli_helpers import run_cli

from symfonic_store import InterruptStore, build_interrupt_marker
from symfonic_store.audit_columns import AUDIT_COLUMNS, derive
from symfonic_store.events import RESUMED, canonical_json
from symfonic_store.services.verify import AUDIT

IID = "i-refund000001"


def refund(store: InterruptStore, thread_id: str, *, actor: str, approved: bool) -> None:
    """A refund decided by ``actor``: the mint at version 1, the answer at version 2."""
    store.mint(thread_id, build_interrupt_marker(
        name="approval_required", interrupt_id=IID, payload={"amount": 420}, run_id="r1"))
    store.resume(thread_id, IID, {"approved": approved}, actor=actor)


def stored_columns(store: InterruptStore) -> list[tuple[dict[str, object], dict[str, object]]]:
    """Per event: its audit columns as stored, and as its data gives them."""
    out = []
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(EVENTS.c.type, EVENTS.c.data, EVENTS.c.occurred_at,
                      *(EVENTS.c[n] for n in AUDIT_COLUMNS)).order_by(EVENTS.c.position)
        ).all()
    for type_, data, occurred_at, *cells in rows:
        out.append((dict(zip(AUDIT_COLUMNS, cells, strict=True)), derive(type_, data, occurred_at)))
    return out


def test_every_append_path_writes_the_audit_columns_its_data_gives(store: InterruptStore) -> None:
    """Markers, refusals, expiries and LangGraph interrupts (batched too): every event's columns are derive() of its data, and verify agrees."""
    rich_log(store)
    pairs = stored_columns(store)
    assert len(pairs) > 10
    for stored, expected in pairs:
        assert {k: canonical_json(v) if not isinstance(v, datetime) else v for k, v in stored.items()} == {
            k: canonical_json(v) if not isinstance(v, datetime) else v for k, v in expected.items()
        }
    assert store.verify().ok


def test_audit_reports_from_the_columns_what_the_events_hold(store: InterruptStore) -> None:
    """The records of the rich log: names, payloads, minted_at, outcomes, attempts, decisions and batched actions."""
    rich_log(store)
    records = {(r.thread_id, r.interrupt_id, r.action_index): r for r in store.audit()}
    first = records[("t-m", "i-1", None)]
    assert (first.name, first.payload, first.outcome, first.actor) == ("approval", {"amount": 5, "ok": True}, "resumed", "alice")
    assert first.minted_at == datetime.fromtimestamp(1_767_000_000.25, UTC)
    assert first.response == {"approved": True, "note": "fine"}
    assert [(a["actor"], a["why"]) for a in first.attempts] == [("bob", "already_resolved")]
    second = records[("t-m", "i-2", None)]
    assert (second.outcome, second.reason, second.payload) == ("expired", "superseded", {})
    assert second.minted_at == store.history("t-m")[second_version(store, "i-2") - 1].occurred_at
    third = records[("t-m", "i-3", None)]
    assert (third.outcome, third.reason, third.actor, third.payload) == ("expired", "cancelled", "bob", None)
    assert records[("t-p", "i-4", None)].outcome == "pending"
    batched = [records[("t-n", "n" * 32, i)] for i in range(2)]
    assert [(r.action, r.decision) for r in batched] == [
        (HITL["action_requests"][0], "approve"), (HITL["action_requests"][1], "reject")]
    assert [(a["why"], a["error"]) for a in batched[0].attempts] == [("not_taken", "the graph did not take it")]
    assert records[("t-n", "o" * 32, None)].decision == "approve"


def second_version(store: InterruptStore, interrupt_id: str) -> int:
    return next(e.version for e in store.history("t-m") if e.interrupt_id == interrupt_id)


def test_bob_s_rejection_turned_into_an_approval_through_the_audit_column_is_named_by_verify(
    store: InterruptStore, tmp_path: Path, migrated_url: str
) -> None:
    """Only the copy changed, triggers put back: audit() reads the forgery, but verify (and its command) names t-bob's answer."""
    refund(store, "t-alice", actor="alice", approved=True)
    refund(store, "t-bob", actor="bob", approved=False)
    answer = store.history("t-bob")[1]
    assert answer.type == RESUMED
    alter_audit_columns(store, answer.position, audit_response={"approved": True})
    assert [r.response for r in store.audit(thread_id="t-bob")] == [{"approved": True}]  # audit() is fooled
    report = store.verify()
    assert not report.guards  # the triggers are back: only the copy gives it away
    assert [(b.thread_id, b.version, b.position, b.kind) for b in report.broken] == [
        ("t-bob", answer.version, answer.position, AUDIT)]
    assert "audit_response" in str(report) and f"position {answer.position}" in str(report)
    result = run_cli("verify", db=migrated_url, cwd=tmp_path)
    assert result.returncode == 1 and "t-bob" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("version", "values"),
    [
        (1, {"audit_name": "harmless"}),
        (1, {"audit_payload": {"amount": 4}}),
        (1, {"audit_minted_at": datetime(2020, 1, 1, tzinfo=UTC)}),
        (1, {"audit_native": True}),  # would read decisions the answer never recorded
        (2, {"audit_decisions": ["approve"]}),
        (1, {"audit_response": {"approved": True}}),  # a copy where none belongs
        (1, {"audit_payload": None, "audit_name": None, "audit_minted_at": None, "audit_native": None}),
    ],
)
def test_any_audit_column_that_disagrees_with_the_data_is_named(
    store: InterruptStore, version: int, values: dict[str, object]
) -> None:
    """Each column, and a copy set where the event has none or removed where it has one, is a problem of that event."""
    refund(store, "t-bob", actor="bob", approved=False)
    target = store.history("t-bob")[version - 1]
    alter_audit_columns(store, target.position, **values)
    assert [(b.thread_id, b.position, b.kind) for b in store.verify().broken] == [("t-bob", target.position, AUDIT)]
    assert [(b.thread_id, b.kind) for b in store.verify(thread_id="t-bob").broken] == [("t-bob", AUDIT)]


def test_an_event_inserted_with_its_audit_columns_chains_and_verifies(store: InterruptStore) -> None:
    """The attacker model's insert writes the copies the store would: nothing but the checkpoints can tell it (tests/evidence/test_checkpoints.py)."""
    refund(store, "t-bob", actor="bob", approved=False)
    mint = store.history("t-bob")[0]
    store.record_route("t-bob", "continue")
    insert_event(store, mint.__class__(**{**mint.as_dict(), "occurred_at": mint.occurred_at,
                                          "position": 10_000, "thread_id": "t-new", "version": 1}))
    assert store.verify().ok


def test_the_fast_path_binds_the_payload_text_it_encoded_for_the_data(store: InterruptStore) -> None:
    """One serialisation per payload: the payload column holds the very canonical text spliced into the data (SQLAlchemy's json.dumps would add spaces)."""
    payload = {"b": [1, 2], "a": {"needle": "zz"}}
    store.mint("t-1", {"name": "n", "interrupt_id": "i-1", "payload": payload})
    store.resume("t-1", "i-1", {"ok": True, "why": "x"}, actor="alice")
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT CAST(data AS TEXT), CAST(audit_payload AS TEXT), CAST(audit_response AS TEXT) "
            "FROM symfonic_events ORDER BY position"
        ).all()
    (mint_data, payload_text, _), (end_data, _, response_text) = rows
    assert payload_text == canonical_json(payload) and payload_text in mint_data
    assert response_text == canonical_json({"ok": True, "why": "x"}) and response_text in end_data
