"""The fixtures themselves: each backend is real and isolated."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from symfonic_store import InterruptStore, build_interrupt_marker


def test_store_fixture_gives_an_empty_migrated_store(store: InterruptStore, backend: str) -> None:
    """A fresh store has no events and the expected dialect."""
    assert store.events() == []
    assert store.engine.dialect.name == backend


async def test_async_store_fixture_gives_an_empty_store(astore, backend: str) -> None:
    """The asyncio store starts empty on each backend too."""
    assert await astore.events() == []
    assert astore.engine.dialect.name == backend


def test_a_migrated_copy_is_at_head_guarded_and_setup_changes_nothing(migrated_url: str) -> None:
    """The per-test copy of the run's one migration is the schema a setup() makes: at head,
    the append-only guards in force (verify), and setup() on it a no-op."""
    from symfonic_store.db.migrate import current_revision, head_revision

    with InterruptStore(migrated_url) as s:
        with s.engine.connect() as conn:
            assert current_revision(conn) == head_revision()
        assert s.verify().ok
        tables = set(sa.inspect(s.engine).get_table_names())
        s.setup()
        with s.engine.connect() as conn:
            assert current_revision(conn) == head_revision()
        assert set(sa.inspect(s.engine).get_table_names()) == tables
        s.mint("t-1", build_interrupt_marker(name="n", interrupt_id="i-1", payload={}))
        with pytest.raises(sa.exc.DatabaseError), s.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM symfonic_events")

