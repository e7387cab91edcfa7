"""Migration ``0018_audit_refusals``: the refused answers the audit reads have an index of
their own, so ``audit()`` no longer reads every event to find a few refusals."""

from __future__ import annotations

import pytest
from audit_log import rich_log
from bounded_rig import probe
from migration_rig import event_indexes, migrate
from sqlalchemy.engine import Engine

from symfonic_store import InterruptStore

INDEX = "ix_symfonic_events_refusals"


def test_0018_builds_the_index_from_the_events_and_downgrades_without_it(engine: Engine, db_url: str) -> None:
    """Down to 0017 and up again: the index goes and comes back over the refusals already there; the audit is the same throughout."""
    migrate(engine, "up", "head")
    assert INDEX in event_indexes(engine)
    with InterruptStore(db_url) as store:
        rich_log(store)
        before = store.audit()
    assert {(r.thread_id, r.interrupt_id): len(r.attempts) for r in before if r.attempts} == {
        ("t-m", "i-1"): 1, ("t-n", "n" * 32): 1}
    migrate(engine, "down", "0017_chase_once")
    assert INDEX not in event_indexes(engine)
    migrate(engine, "up", "head")
    assert INDEX in event_indexes(engine)
    with InterruptStore(db_url) as store:
        assert store.audit() == before
        assert store.verify().ok


def test_sqlite_reads_a_pages_refusals_through_an_index_not_the_table(store: InterruptStore) -> None:
    """The attempts statement of an audit page, as SQLite plans it: from the page's mints
    (their primary key), each one's refusals through an index of its events, never a scan."""
    if store.engine.dialect.name != "sqlite":
        pytest.skip("SQLite's plan; PostgreSQL chooses by table statistics")
    rich_log(store)
    for filters in ({}, {"thread_id": "t-m"}, {"actor": "bob"}):
        with probe(store) as seen:
            store.audit(limit=5, **filters)
        plans = [plan for sql, plan in seen.plans if "rejected" in sql]
        assert plans, filters
        for plan in plans:
            assert not any(step.startswith("SCAN") for step in plan), plan
            assert any(step.startswith("SEARCH rejected USING INDEX") for step in plan), plan
