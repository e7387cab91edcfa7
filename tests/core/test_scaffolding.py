"""The fixtures themselves: each backend is real and isolated."""

from __future__ import annotations

from symfonic_store import InterruptStore


def test_store_fixture_gives_an_empty_migrated_store(store: InterruptStore, backend: str) -> None:
    """A fresh store has no events and the expected dialect."""
    assert store.events() == []
    assert store.engine.dialect.name == backend


async def test_async_store_fixture_gives_an_empty_store(astore, backend: str) -> None:
    """The asyncio store starts empty on each backend too."""
    assert await astore.events() == []
    assert astore.engine.dialect.name == backend
