"""Refused answers are part of "who approved what": ``AuditRecord.attempts`` (SPEC §3).

Each record carries the ``interrupt.resume_rejected`` events of its interrupt, in the
order they happened, as ``{"actor", "why", "error", "at"}``; the CLI shows a count in
its table and the whole list in JSON and CSV.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from cli_helpers import run_cli, run_json
from freezegun import freeze_time
from langgraph.types import Command  # before any frozen clock: pydantic v1 breaks on a fake date

from symfonic_store import (
    RESUME_REJECTED,
    AsyncInterruptStore,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStore,
    ResumeNotAllowedError,
    UnknownInterruptError,
)
from symfonic_store.store.append import ThreadWriter, flush

T0 = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


marker = factories.marker


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def guarded(migrated_url: str) -> Iterator[InterruptStore]:
    """A store whose approvers come from the marker payload."""
    s = InterruptStore(migrated_url, approvers="payload")
    s.setup()
    yield s
    s.close()


def seed(store: InterruptStore) -> None:
    """t-1/i-1: mallory refused, alice approves, bob and carol too late; t-1/i-2 expired, then
    dave; a refusal of an id never minted; t-2/i-1 nothing refused."""
    with freeze_time(T0) as clock:
        store.mint("t-1", marker("i-1", approvers=["alice", "bob", "carol"]))
        clock.tick(1)
        with pytest.raises(ResumeNotAllowedError):
            store.resume("t-1", "i-1", {"approved": True}, actor="mallory")
        clock.tick(1)
        assert isinstance(store.resume("t-1", "i-1", {"approved": True}, actor="alice"), Command)
        clock.tick(1)
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume("t-1", "i-1", {"approved": False}, actor="bob")
        clock.tick(1)
        with pytest.raises(UnknownInterruptError):
            store.resume("t-1", "i-ghost", {"approved": True}, actor="eve")
        clock.tick(1)
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume("t-1", "i-1", {"approved": False}, actor="carol")
        clock.tick(1)
        store.mint("t-1", marker("i-2"))
        store.expire("t-1", "i-2", actor="ops")
        clock.tick(1)
        with pytest.raises(InterruptExpiredError):
            store.resume("t-1", "i-2", {"approved": True}, actor="dave")
        store.mint("t-2", marker("i-1"))


def test_audit_records_carry_their_refused_attempts_in_order(guarded: InterruptStore) -> None:
    """Each record lists its interrupt's refused answers (actor, why, error, aware UTC time) in the order they happened."""
    seed(guarded)
    first, second, other = guarded.audit()
    assert (first.interrupt_id, first.outcome, first.actor) == ("i-1", "resumed", "alice")
    assert first.attempts == [
        {"actor": "mallory", "why": "not_allowed", "error": None, "at": at(1)},
        {"actor": "bob", "why": "already_resolved", "error": None, "at": at(3)},
        {"actor": "carol", "why": "already_resolved", "error": None, "at": at(5)},
    ]
    assert all(a["at"].utcoffset() == timedelta(0) for a in first.attempts)
    assert second.attempts == [{"actor": "dave", "why": "expired", "error": None, "at": at(7)}]
    assert (other.thread_id, other.attempts) == ("t-2", [])
    # The refusal of an id never minted belongs to no interrupt's record.
    assert all(a["actor"] != "eve" for r in (first, second, other) for a in r.attempts)
    # The filters keep each record's attempts whole.
    (alice,) = guarded.audit(actor="alice")
    assert alice.attempts == first.attempts
    assert [r.attempts for r in guarded.audit(thread_id="t-2")] == [[]]
    assert guarded.audit(thread_id="t-1")[0].as_dict()["attempts"] == [
        {"actor": "mallory", "why": "not_allowed", "error": None, "at": at(1).isoformat()},
        {"actor": "bob", "why": "already_resolved", "error": None, "at": at(3).isoformat()},
        {"actor": "carol", "why": "already_resolved", "error": None, "at": at(5).isoformat()},
    ]


def test_an_attempts_error_comes_from_the_event_data(store: InterruptStore) -> None:
    """A refusal whose data names an ``error`` (the graph did not take the answer) shows it; others show null."""
    store.mint("t-1", marker("i-1"))
    # The store's internals in a write transaction of its own kind (symfonic_write: on
    # PostgreSQL it joins the writers, as only such a transaction may append).
    with freeze_time(T0), store.engine.connect() as conn, conn.execution_options(symfonic_write=True).begin():
        w = ThreadWriter(conn, "t-1")
        w.append(RESUME_REJECTED, interrupt_id="i-1", actor="alice",
                 data={"response": {"x": 1}, "why": "not_taken", "error": "ValueError: no"})
        flush(conn, [w])
    (record,) = store.audit()
    assert record.attempts == [
        {"actor": "alice", "why": "not_taken", "error": "ValueError: no", "at": T0}
    ]
    assert record.outcome == "pending"


def test_audit_reads_attempts_in_one_query_whatever_the_number_of_records(store: InterruptStore) -> None:
    """audit() runs the same number of statements for 1 record as for 40 records with refusals: no query per record."""
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    def audited() -> int:
        statements.clear()
        sa.event.listen(store.engine, "before_cursor_execute", count)
        try:
            records = store.audit()
        finally:
            sa.event.remove(store.engine, "before_cursor_execute", count)
        assert all(len(r.attempts) == 1 for r in records[1:])
        return len(statements)

    store.mint("t-0", marker("i-0"))
    one = audited()
    for n in range(1, 40):
        store.mint(f"t-{n}", marker("i-1"))
        store.resume(f"t-{n}", "i-1", {"ok": True}, actor="alice")
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume(f"t-{n}", "i-1", {"ok": False}, actor="bob")
    assert len(store.audit()) == 40
    assert audited() == one


def test_cli_audit_shows_a_count_in_the_table_and_the_list_in_json_and_csv(
    guarded: InterruptStore, migrated_url: str
) -> None:
    """`audit` prints the number of attempts in its table, the list in --format json, and the JSON-encoded list in the CSV's attempts column."""
    seed(guarded)
    records = run_json("audit", "--format", "json", db=migrated_url)
    assert list(records[0])[-9:] == [
        "attempts", "decision", "action", "action_index",
        "requested_by", "decision_source", "authenticated_by",  # appended by SPEC §12
        "tenant", "approvers",  # appended by SPEC §15
    ]
    assert records[0]["attempts"] == [
        {"actor": "mallory", "why": "not_allowed", "error": None, "at": at(1).isoformat()},
        {"actor": "bob", "why": "already_resolved", "error": None, "at": at(3).isoformat()},
        {"actor": "carol", "why": "already_resolved", "error": None, "at": at(5).isoformat()},
    ]
    assert [r["attempts"] for r in records[1:]] == [
        [{"actor": "dave", "why": "expired", "error": None, "at": at(7).isoformat()}],
        [],
    ]

    sheet = run_cli("audit", "--format", "csv", db=migrated_url)
    assert sheet.returncode == 0, sheet.stderr
    rows = list(csv.DictReader(io.StringIO(sheet.stdout)))
    assert list(rows[0])[list(rows[0]).index("resolved_at") + 1] == "attempts"
    assert json.loads(rows[0]["attempts"]) == records[0]["attempts"]
    assert json.loads(rows[2]["attempts"]) == []

    table = run_cli("audit", "--thread", "t-1", db=migrated_url)
    assert table.returncode == 0, table.stderr
    rows = [line for line in table.stdout.splitlines() if "i-1" in line or "i-2" in line]
    # The outcome column counts the refused answers (SPEC §12's table: the decision beside it).
    assert ["3 refused" in rows[0], "1 refused" in rows[1]] == [True, True], rows
    assert "mallory" not in table.stdout


async def test_the_async_store_audit_carries_attempts(astore: AsyncInterruptStore) -> None:
    """The asyncio store's audit() lists the refused attempts like the sync store's."""
    with freeze_time(T0):
        await astore.mint("t-1", marker("i-1"))
        await astore.resume("t-1", "i-1", {"approved": True}, actor="alice")
        with pytest.raises(InterruptAlreadyResolvedError):
            await astore.resume("t-1", "i-1", {"approved": False}, actor="bob")
    (record,) = await astore.audit()
    assert record.attempts == [{"actor": "bob", "why": "already_resolved", "error": None, "at": T0}]
