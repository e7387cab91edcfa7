"""Migration ``0021_ignore_audit``: the expiries of Agent Inbox's thread-level ignore
(SPEC §13) appended before it get their decision and ``authenticated_by`` in the audit
columns, within the append-only guards, and ``verify`` stays clean."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from audit_log import HITL, rich_log
from migration_rig import migrate
from sqlalchemy.engine import Engine

from symfonic_store import InterruptStore
from symfonic_store.db.schema import events
from symfonic_store.events import EXPIRED

BEFORE = "0020_one_vote"
INBOX = [{"action_request": {"action": "send_email", "args": {}}, "config": {}}]


def _ignored(store: InterruptStore, thread_id: str, value: Any, **who: str) -> None:
    """An interrupt LangGraph waited on at checkpoint ``cp``, closed by the state update
    of Agent Inbox's "Mark as resolved" (as the store's checkpointer records it)."""
    store.record_waiting(thread_id, [{
        "interrupt_id": thread_id.ljust(32, "0"), "value": value, "task_id": "task", "checkpoint_id": "cp",
        "checkpoint_ns": "", "breakpoint": False,
    }], graph="inbox")
    store.record_checkpoint_moved(thread_id, "cp", source="update", decision="ignore", **who)


def _guards(engine: Engine) -> list[tuple[Any, ...]]:
    """The event table's guards as the catalogue holds them: SQLite's text, PostgreSQL's
    definition and enabled state (not the triggers of later migrations' tables)."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            rows = conn.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
                " AND substr(name, 1, 16) = 'symfonic_events_' ORDER BY name")
        else:
            rows = conn.exec_driver_sql(
                "SELECT t.tgname, t.tgenabled, pg_get_triggerdef(t.oid) FROM pg_trigger t "
                "WHERE t.tgrelid = 'symfonic_events'::regclass AND NOT t.tgisinternal"
                " AND left(t.tgname, 16) = 'symfonic_events_' ORDER BY 1")
        return [tuple(r) for r in rows]


def _expiry_cells(engine: Engine) -> list[tuple[Any, ...]]:
    query = (
        sa.select(events.c.thread_id, events.c.audit_reason, events.c.audit_decisions, events.c.audit_authenticated_by)
        .where(events.c.type == EXPIRED)
        .order_by(events.c.position)
    )
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query)]


def test_0021_fills_the_ignores_audit_columns_and_its_downgrade_empties_them(engine: Engine, db_url: str) -> None:
    """A populated log taken down to 0020 (the two cells of every expiry NULL, as the release before wrote them) and up again, twice: filled from the hashed data, the audit the same, verify clean, the triggers back."""
    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        rich_log(store)  # expiries without a decision among the rest
        _ignored(store, "t-bob", INBOX, decided_by="bob", authenticated_by="agent-server")
        _ignored(store, "t-studio", INBOX)  # no authenticated user: decision only
        _ignored(store, "t-batch", HITL, decided_by="carol", authenticated_by="agent-server")
        before = store.audit()
    ignores = [(r.thread_id, r.action_index, r.actor, r.decision, r.decision_source, r.authenticated_by)
               for r in before if r.decision == "ignore"]
    assert ignores == [
        ("t-bob", None, "bob", "ignore", "recorded", "agent-server"),
        ("t-studio", None, None, "ignore", "recorded", None),
        ("t-batch", 0, "carol", "ignore", "recorded", "agent-server"),
        ("t-batch", 1, "carol", "ignore", "recorded", "agent-server"),
    ]
    appended, guards = _expiry_cells(engine), _guards(engine)
    assert [c for c in appended if c[2] is not None or c[3] is not None] == [
        ("t-bob", "superseded", ["ignore"], "agent-server"),
        ("t-studio", "superseded", ["ignore"], None),
        ("t-batch", "superseded", ["ignore"], "agent-server"),
    ]
    assert len(appended) > 3  # rich_log's expiries, whose cells stay NULL throughout
    for _ in range(2):
        migrate(engine, "down", BEFORE)
        assert _expiry_cells(engine) == [(t, reason, None, None) for t, reason, _, _ in appended]
        assert _guards(engine) == guards
        migrate(engine, "up", "head")
        assert _expiry_cells(engine) == appended
        assert _guards(engine) == guards
        with InterruptStore(db_url) as store:
            assert store.audit() == before
            assert [r.thread_id for r in store.audit(decision="ignore")] == ["t-bob", "t-studio", "t-batch", "t-batch"]
            report = store.verify()
            assert report.ok, str(report)
    with engine.connect() as conn, pytest.raises(sa.exc.DBAPIError, match="append-only"):
        conn.execute(sa.update(events).values(audit_authenticated_by="forged"))


def test_0021_on_a_log_without_an_ignore_changes_nothing(engine: Engine, db_url: str) -> None:
    """Nothing to fill, nothing to empty: both directions leave the rows and the triggers as they were."""
    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        rich_log(store)
        before = store.audit()
    cells, guards = _expiry_cells(engine), _guards(engine)
    migrate(engine, "down", BEFORE)
    assert _expiry_cells(engine) == cells
    migrate(engine, "up", "head")
    assert _expiry_cells(engine) == cells and _guards(engine) == guards
    with InterruptStore(db_url) as store:
        assert store.audit() == before and store.verify().ok
