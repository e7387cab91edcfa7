"""0015_notify_cursors: the notifier's tables come with the upgrade and go with the
downgrade, which refuses while a dead letter waits to be re-sent; on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic.util import CommandError
from migration_rig import migrate
from sqlalchemy.engine import Engine

from symfonic_store import InterruptStore
from symfonic_store.db.migrate import current_revision
from symfonic_store.db.schema import (
    NOTIFY_CURSORS_TABLE,
    NOTIFY_DEAD_LETTERS_TABLE,
    notify_dead_letters,
)

BELOW = "0014_decision_audit"
TABLES = {NOTIFY_CURSORS_TABLE, NOTIFY_DEAD_LETTERS_TABLE}


def notify_tables(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(sa.inspect(conn).get_table_names()) & TABLES


def test_0015_upgrades_downgrades_and_upgrades_again_keeping_the_log(engine: Engine, db_url: str) -> None:
    """Head has both tables; down to 0014 removes only them (the events stay); head again makes them anew."""
    migrate(engine, "up", "0015_notify_cursors")
    assert notify_tables(engine) == TABLES
    migrate(engine, "up", "head")
    assert notify_tables(engine) == TABLES
    with InterruptStore(db_url) as store:
        store.mint("t-1", {"_interrupt_pending": {"name": "n", "interrupt_id": "i-1", "payload": {}}})
    migrate(engine, "down", BELOW)
    with engine.connect() as conn:
        assert current_revision(conn) == BELOW
    assert notify_tables(engine) == set()
    migrate(engine, "up", "head")
    assert notify_tables(engine) == TABLES
    with InterruptStore(db_url) as store:
        assert [e.thread_id for e in store.events()] == ["t-1"]


def test_downgrading_below_0015_refuses_while_a_dead_letter_waits(engine: Engine) -> None:
    """A dead letter not re-sent would be forgotten: refused, naming the way out; once re-sent the downgrade goes."""
    migrate(engine, "up", "head")
    with engine.begin() as conn:
        conn.execute(notify_dead_letters.insert().values(
            subscription="erp", position=1, thread_id="t", interrupt_id=None, type="interrupt.minted",
            tries=3, error="HTTP 500", dead_at=datetime.now(UTC)))
    with pytest.raises(CommandError, match="notify retry NAME"):
        migrate(engine, "down", BELOW)
    assert notify_tables(engine) == TABLES
    with engine.begin() as conn:
        conn.execute(notify_dead_letters.update().values(resent_at=datetime.now(UTC)))
    migrate(engine, "down", BELOW)
    assert notify_tables(engine) == set()
