"""``audit()`` decodes a record's payload, response, decision and ``resolved_at`` when first
read: its records are the ones it built eagerly before, field for field and in every rendering.

The reference is the eager audit as it was (:func:`eager_audit`: the rows read through the
schema's types, every record built with ``AuditRecord(...)``), over a history with every
kind of record: markers resumed, expired, superseded, pending and refused; LangGraph
interrupts answered whole, as a batched HITL request (approve, edit, reject, respond) and
through Agent Inbox; a breakpoint's word of an earlier release; answers that recorded no
decision (derived, or none at all) and a word of a decisions function.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import pickle
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from attacker import insert_event
from audit_log import rich_log

from symfonic_store import InterruptStore
from symfonic_store.cli.render import audit_table
from symfonic_store.db.schema import events
from symfonic_store.decisions import builtin, reported
from symfonic_store.events import ENDINGS, MINTED, RESUME_REJECTED, RESUMED, StoredEvent
from symfonic_store.native import action_requests, is_breakpoint
from symfonic_store.server.tenancy import audit_page
from symfonic_store.services.audit import AUDIT_FIELDS, AuditRecord

# --- the reference: the audit as it was built before its records were lazy ------------------


def _eager_rows(conn: sa.Connection) -> tuple[list[Any], list[Any]]:
    mint, ending, rejected = events.alias("mint"), events.alias("ending"), events.alias("rejected")
    records = conn.execute(
        sa.select(
            mint.c.thread_id, mint.c.interrupt_id, mint.c.audit_name, mint.c.audit_payload,
            mint.c.audit_minted_at, mint.c.audit_native, ending.c.type, ending.c.actor,
            ending.c.audit_reason, ending.c.audit_response, ending.c.audit_decisions,
            ending.c.occurred_at, mint.c.actor, ending.c.audit_authenticated_by,
        ).select_from(mint.outerjoin(ending, sa.and_(
            ending.c.thread_id == mint.c.thread_id, ending.c.interrupt_id == mint.c.interrupt_id,
            ending.c.type.in_(ENDINGS),
        ))).where(mint.c.type == MINTED).order_by(mint.c.position)
    ).all()
    attempts = conn.execute(
        sa.select(rejected.c.thread_id, rejected.c.interrupt_id, rejected.c.actor,
                  rejected.c.audit_reason, rejected.c.audit_error, rejected.c.occurred_at)
        .where(rejected.c.type == RESUME_REJECTED)
        .order_by(rejected.c.thread_id, rejected.c.version)
    ).all()
    return list(records), list(attempts)


def eager_audit(
    store: InterruptStore, *, thread_id: str | None = None, actor: str | None = None,
    since: datetime | None = None, until: datetime | None = None, decision: str | None = None,
) -> list[AuditRecord]:
    with store.engine.connect() as conn:
        rows, attempt_rows = _eager_rows(conn)
    minted = {(r[0], r[1]) for r in rows}
    attempts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t_id, i_id, a_actor, why, error, at in attempt_rows:
        if (t_id, i_id) in minted:
            attempts.setdefault((t_id, i_id), []).append({"actor": a_actor, "why": why, "error": error, "at": at})
    records = []
    for (t_id, i_id, name, payload, minted_at, native_mint, end_type, end_actor, end_reason,
         end_response, end_decisions, end_at, requested_by, authenticated_by) in rows:
        if thread_id is not None and t_id != thread_id or actor is not None and end_actor != actor:
            continue
        if since is not None and minted_at < since or until is not None and minted_at > until:
            continue
        outcome, reason, response = (
            ("pending", None, None) if end_type is None
            else ("resumed", None, end_response) if end_type == RESUMED
            else ("expired", end_reason, None)
        )
        stored = end_decisions if isinstance(end_decisions, list) else None
        requests = action_requests(payload) if native_mint else None
        derived = builtin(payload, response, breakpoint=is_breakpoint(i_id))
        for index, action in enumerate(requests) if requests else ((0, None),):
            word, source = None, None
            if end_type == RESUMED:
                kept = stored[index] if stored is not None and index < len(stored) else None
                if isinstance(kept, str):
                    word, source = reported(kept), "recorded"
                elif index < len(derived) and derived[index] is not None:
                    word, source = derived[index], "derived"
            if decision is not None and word != decision:
                continue
            records.append(AuditRecord(
                t_id, i_id, name, payload, minted_at, outcome, reason, end_actor, response, end_at,
                list(attempts.get((t_id, i_id), [])), word, action if requests else None,
                index if requests else None, requested_by, source, authenticated_by,
            ))
    records.sort(key=lambda r: r.minted_at)
    return records


# --- the history -------------------------------------------------------------------------------

T0 = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
HITL = {"action_requests": [{"name": n, "args": {"n": i}} for i, n in enumerate(("wire", "mail", "drop", "ask"))],
        "review_configs": []}
INBOX = [{"action_request": {"action": "refund", "args": {"amount": 3}}, "config": {}, "description": "é"}]


def _native(store: InterruptStore, thread_id: str, interrupt_id: str, value: Any, *, bp: bool = False) -> None:
    store.record_waiting(thread_id, [{
        "interrupt_id": interrupt_id, "value": value, "task_id": None if bp else "task",
        "checkpoint_id": "c" * 32, "checkpoint_ns": "", "breakpoint": bp,
    }], graph="g")


def _old_answer(store: InterruptStore, thread_id: str, interrupt_id: str, data: dict[str, Any]) -> None:
    """An answer as earlier releases appended it (no decision recorded), hashed into the chain."""
    last = store.history(thread_id)[-1]
    insert_event(store, StoredEvent(
        position=last.position + 1000, thread_id=thread_id, version=last.version + 1, type=RESUMED,
        interrupt_id=interrupt_id, run_id=None, actor="old-bob", data=data,
        occurred_at=T0 + timedelta(days=1), hash="",
    ))


def every_kind(store: InterruptStore, url: str) -> None:
    rich_log(store)
    _native(store, "t-h", "h" * 32, HITL)
    store.claim("t-h", "h" * 32, {"decisions": [
        {"type": "approve"}, {"type": "edit", "edited_action": {"name": "mail", "args": {"to": "ü"}}},
        {"type": "reject", "message": "no"}, {"type": "respond", "message": "why?"}]}, actor="erin")
    store.confirm("t-h", "h" * 32)
    _native(store, "t-h2", "j" * 32, HITL)  # a batched request still waiting
    _native(store, "t-i", "k" * 32, INBOX)
    store.claim("t-i", "k" * 32, [{"type": "response", "args": "done"}], actor="frank")
    store.confirm("t-i", "k" * 32)
    bp = "bp-" + "1" * 32
    _native(store, "t-bp", bp, {"next": ["wire"]}, bp=True)
    _old_answer(store, "t-bp", bp, {"response": {"approved": False}, "via": "gateway", "decision": "rejected"})
    store.mint("t-old", {"name": "old", "interrupt_id": "i-old", "payload": "just text", "minted_at": T0.timestamp()})
    _old_answer(store, "t-old", "i-old", {"response": {"approved": False}})
    store.mint("t-odd", {"name": "odd", "interrupt_id": "i-odd", "payload": 7})
    _old_answer(store, "t-odd", "i-odd", {"response": {"note": "fine"}, "decision": None})
    store.mint("t-x", {"name": "exp", "interrupt_id": "i-x", "payload": {"a": [1, {"b": None}]}})
    store.expire("t-x", "i-x", reason="ttl")
    with InterruptStore(url, decisions=lambda name, response: "escalate" if name == "custom" else None) as own:
        own.mint("t-c", {"name": "custom", "interrupt_id": "i-c", "payload": {"q": 1}})
        own.resume("t-c", "i-c", {"whatever": True}, actor="gina")
    store.mint("t-s", {"name": "same time", "interrupt_id": "i-s1", "minted_at": T0.timestamp()})
    store.resume("t-s", "i-s1", None, actor="hal")


@pytest.fixture
def kinds(store: InterruptStore, migrated_url: str) -> InterruptStore:
    every_kind(store, migrated_url)
    return store


FILTERS: list[dict[str, Any]] = [
    {}, {"thread_id": "t-h"}, {"thread_id": "t-m"}, {"actor": "carol"}, {"actor": "nobody"},
    {"since": T0}, {"until": T0}, {"since": T0, "until": T0},
    *({"decision": d} for d in ("approve", "reject", "edit", "respond", "response", "escalate", "approved")),
]


# --- the comparisons ---------------------------------------------------------------------------


def _hash_error(record: AuditRecord) -> str:
    with pytest.raises(TypeError) as raised:
        hash(record)
    return str(raised.value)


def assert_same(lazy: AuditRecord, eager: AuditRecord) -> None:
    assert type(lazy) is AuditRecord
    for name in AUDIT_FIELDS:
        ours, theirs = getattr(lazy, name), getattr(eager, name)
        assert (name, ours) == (name, theirs)
        assert type(ours) is type(theirs), name
        if isinstance(ours, datetime):
            assert ours.tzinfo is theirs.tzinfo is UTC, name
    assert lazy == eager and eager == lazy and not lazy != eager
    assert repr(lazy) == repr(eager)
    assert lazy.as_dict() == eager.as_dict()
    assert json.dumps(lazy.as_dict(), sort_keys=True) == json.dumps(eager.as_dict(), sort_keys=True)
    assert lazy.as_csv_row() == eager.as_csv_row()
    assert _hash_error(lazy) == _hash_error(eager)  # attempts is a list: unhashable, both
    assert dataclasses.asdict(lazy) == dataclasses.asdict(eager)
    assert dataclasses.astuple(lazy) == dataclasses.astuple(eager)
    assert pickle.loads(pickle.dumps(lazy)) == eager
    assert copy.copy(lazy) == eager and copy.deepcopy(lazy) == eager
    assert dataclasses.replace(lazy, outcome="x") == dataclasses.replace(eager, outcome="x")
    assert lazy.cursor == eager.cursor


def test_the_history_has_every_kind_of_record(kinds: InterruptStore) -> None:
    """The history holds what the comparisons are about (else they would prove little)."""
    records = kinds.audit()
    assert {r.outcome for r in records} == {"pending", "resumed", "expired"}
    assert {r.decision for r in records} >= {"approve", "edit", "reject", "respond", "response", "escalate"}
    assert {r.decision_source for r in records} == {"recorded", "derived", None}
    assert any(r.attempts for r in records) and any(r.action_index == 3 for r in records)
    assert {type(r.payload) for r in records} >= {dict, list, str, int, type(None)}


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "all")
def test_lazy_records_are_the_eager_ones_field_by_field(kinds: InterruptStore, filters: dict[str, Any]) -> None:
    """Every field (value and type), ==, repr, JSON, CSV, hash, pickling and dataclass helpers, per filter."""
    eager = eager_audit(kinds, **filters)
    lazy = kinds.audit(**filters)
    assert len(lazy) == len(eager)
    for ours, theirs in zip(lazy, eager, strict=True):
        assert_same(ours, theirs)
    assert kinds.audit(**filters) == eager  # fresh records, compared as a list first


FIRST_READS = [
    ("repr", repr), ("==", lambda r: r == r), ("decision", lambda r: r.decision),
    ("decision_source", lambda r: r.decision_source), ("response", lambda r: r.response),
    ("payload", lambda r: r.payload), ("resolved_at", lambda r: r.resolved_at),
    ("as_csv_row", AuditRecord.as_csv_row),
    ("pickle", pickle.dumps), ("asdict", dataclasses.asdict),
]


@pytest.mark.parametrize(("what", "first"), FIRST_READS, ids=[w for w, _ in FIRST_READS])
def test_whatever_is_read_first_the_record_is_the_same(kinds: InterruptStore, what: str, first: Any) -> None:
    """A record decodes a field on its first read, in place: reading any one first changes nothing that follows."""
    eager = eager_audit(kinds)
    lazy = kinds.audit()
    for record in lazy:
        first(record)
    for ours, theirs in zip(lazy, eager, strict=True):
        assert_same(ours, theirs)


def test_decoded_values_are_kept_and_records_stay_frozen(kinds: InterruptStore) -> None:
    """The first read decodes once (the same object after), and a lazy field is as frozen as any."""
    record = next(r for r in kinds.audit() if isinstance(r.response, dict))
    assert record.response is record.response and record.payload is record.payload
    assert record.resolved_at is record.resolved_at
    for name in ("payload", "response", "resolved_at", "decision", "decision_source", "thread_id"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(record, name)
    assert not hasattr(record, "__dict__")


def test_records_built_by_hand_are_plain_values(kinds: InterruptStore) -> None:
    """A caller's AuditRecord(...) holds what it was given, a payload that looks like stored text included."""
    row = ("t", "i", "n", '{"a": 1}', T0, "resumed", None, "a", "[1]", T0, [], "approve", None, None, None,
           "recorded", None, "acme", ("bob",))
    record = AuditRecord(*row)
    assert (record.payload, record.response, record.decision) == ('{"a": 1}', "[1]", "approve")
    assert dataclasses.astuple(record) == row


def _table(records: list[AuditRecord], capsys: pytest.CaptureFixture[str]) -> str:
    audit_table(records)
    return capsys.readouterr().out


def test_the_cli_table_json_csv_and_the_api_page_render_the_same(
    kinds: InterruptStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's table, JSON and CSV, and the API's pages and cursors, of fresh lazy records and eager ones."""
    monkeypatch.setenv("COLUMNS", "200")
    eager, lazy = eager_audit(kinds), kinds.audit()
    assert _table(lazy, capsys) == _table(eager, capsys) != ""
    assert json.dumps([r.as_dict() for r in kinds.audit()]) == json.dumps([r.as_dict() for r in eager])

    def as_csv(records: list[AuditRecord]) -> str:
        text = io.StringIO()
        csv.writer(text).writerows([AUDIT_FIELDS, *(r.as_csv_row() for r in records)])
        return text.getvalue()

    assert as_csv(kinds.audit()) == as_csv(eager)
    pages: list[Iterator[Any]] = []
    for read in (lambda after: kinds.audit(limit=4, after=after),
                 lambda after: eager[eager.index(next(r for r in eager if r.cursor == after)) + 1:][:4]
                 if after is not None else eager[:4]):
        shown, after = [], None
        while True:
            page, after = audit_page(read(after), limit=3)
            shown.append(([r.as_dict() for r in page], after))
            if after is None:
                break
        pages.append(iter(shown))
    assert list(pages[0]) == list(pages[1])


@pytest.mark.parametrize("stored", [
    None, "2026-03-04 05:06:07.890123", "2026-03-04 05:06:07", "2026-03-04T05:06:07.890123+02:00",
    datetime(2026, 3, 4, 5, 6, 7), datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=-5))),
])
def test_a_stored_time_reads_as_the_schema_type_reads_it(stored: Any) -> None:
    """utc() is UTCDateTime's reading, for SQLite's text and a driver's datetime alike: the same value, tz-aware UTC."""
    from sqlalchemy.dialects import sqlite

    from symfonic_store.db.schema import UTCDateTime
    from symfonic_store.db.statements.audit import utc

    dialect = sqlite.dialect()
    expected = UTCDateTime().process_result_value(stored, dialect)
    assert utc(stored) == expected and repr(utc(stored)) == repr(expected)
    if expected is not None:
        assert utc(stored).tzinfo is UTC  # type: ignore[union-attr]


def test_a_stored_time_that_is_not_one_is_refused_as_before() -> None:
    from symfonic_store.db.statements.audit import utc

    with pytest.raises(ValueError, match="Invalid isoformat"):
        utc("yesterday")
