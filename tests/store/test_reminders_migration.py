"""Migration 0017: the partial unique indexes that keep a reminder and an escalation once.

Real Alembic runs on an empty database of each backend: up from 0016 adds both indexes,
down to 0016 drops only them (the events stay and the store still reads them), and up
again restores them, refusing a duplicate once more.
"""

from __future__ import annotations

import factories
import pytest
import sqlalchemy as sa
from migration_rig import event_indexes, migrate
from sqlalchemy.engine import Engine

from symfonic_store import ESCALATED, REMINDED, InterruptStore
from symfonic_store.db.migrate import current_revision, head_revision
from symfonic_store.db.schema import events as events_table

BEFORE = "0016_one_call_append"
THIS = "0017_chase_once"
INDEXES = {"uq_symfonic_events_one_reminder", "uq_symfonic_events_one_escalation"}
POLICY = {"*": {"remind_after": 1, "escalate_after": 2, "escalate_to": ["lead"]}}


def test_0017_adds_the_indexes_and_its_downgrade_drops_only_them(engine: Engine, db_url: str) -> None:
    """Up from 0016 adds both indexes; down drops them keeping every event; up again
    restores them and the database refuses a second reminder again."""
    migrate(engine, "up", BEFORE)
    assert not INDEXES & event_indexes(engine)
    migrate(engine, "up", "head")
    with engine.connect() as conn:
        assert current_revision(conn) == head_revision()
    assert INDEXES <= event_indexes(engine)

    with InterruptStore(db_url) as store:
        store.mint("t-1", factories.plain_marker("i-1", age=60))
        report = store.sweep(policy=POLICY)
        assert len(report.reminded) == len(report.escalated) == 1
        events = store.events()

    migrate(engine, "down", BEFORE)
    with engine.connect() as conn:
        assert current_revision(conn) == BEFORE
    assert not INDEXES & event_indexes(engine)
    with engine.connect() as conn:  # the events stay (the store opens only at head)
        kept = conn.execute(sa.select(events_table.c.position, events_table.c.type)).all()
    assert sorted(kept) == [(e.position, e.type) for e in events]

    migrate(engine, "up", "head")
    assert INDEXES <= event_indexes(engine)
    with InterruptStore(db_url) as store:
        assert store.events() == events
        assert store.pending("t-1") is not None
        assert store.verify().ok
        last = store.history("t-1")[-1]
        for kind in (REMINDED, ESCALATED):
            row = {
                "thread_id": "t-1", "version": last.version + 1, "type": kind, "interrupt_id": "i-1",
                "run_id": None, "actor": None, "data": {"after": 1}, "occurred_at": last.occurred_at,
                "hash": "e" * 64,
            }
            with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as conn:
                conn.execute(events_table.insert(), row)
        again = store.sweep(policy=POLICY)
        assert (again.reminded, again.escalated) == ([], [])


def test_0017_is_in_the_chain_of_revisions() -> None:
    """0017 follows 0016 (later revisions chain on it)."""
    from alembic.script import ScriptDirectory

    from symfonic_store.db.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config())
    revision = script.get_revision(THIS)
    assert revision is not None and revision.down_revision == BEFORE
