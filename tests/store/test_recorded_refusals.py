"""``store.record_refusal`` and ``store.owed_wakeups``: what the approval service asks of the store."""

from __future__ import annotations

from functools import partial

import factories
import pytest
from freezegun import freeze_time

from symfonic_store import (
    AsyncInterruptStore,
    InterruptStore,
    InvalidInputError,
    UnknownInterruptError,
    build_interrupt_marker,
)
from symfonic_store.events import MINTED, RESUME_REJECTED, RESUMED

_mint = partial(factories.mint, name="refund", payload={"n": 1})


def test_a_refusal_is_recorded_with_its_actor_and_reason_and_admits_nothing(store: InterruptStore) -> None:
    """record_refusal appends one resume_rejected (why, error, actor); the interrupt stays pending and answerable."""
    _mint(store, "t-1", "i-1")
    store.record_refusal("t-1", "i-1", {"approved": True}, actor="mallory", error="needs the role finance")
    rejected = store.history("t-1")[-1]
    assert (rejected.type, rejected.actor, rejected.interrupt_id) == (RESUME_REJECTED, "mallory", "i-1")
    assert rejected.data == {"response": {"approved": True}, "why": "not_allowed",
                             "error": "needs the role finance", "via": "service"}
    assert store.pending("t-1") is not None
    (record,) = store.audit(thread_id="t-1")
    assert [(a["actor"], a["why"], a["error"]) for a in record.attempts] == [
        ("mallory", "not_allowed", "needs the role finance")
    ]
    store.resume("t-1", "i-1", {"approved": True}, actor="alice")
    assert [e.type for e in store.history("t-1")] == [MINTED, RESUME_REJECTED, RESUMED]


def test_a_refusal_for_an_interrupt_never_minted_writes_nothing(store: InterruptStore) -> None:
    """An unknown interrupt, or a thread without events, is refused with nothing written; a bad why is refused."""
    with pytest.raises(UnknownInterruptError):
        store.record_refusal("t-none", "i-1", None, actor="mallory", error="x")
    assert store.history("t-none") == []
    _mint(store, "t-2", "i-1")
    with pytest.raises(UnknownInterruptError):
        store.record_refusal("t-2", "i-other", None, actor="mallory", error="x")
    with pytest.raises(InvalidInputError, match="why"):
        store.record_refusal("t-2", "i-1", None, actor="mallory", error="x", why="because")
    assert [e.type for e in store.history("t-2")] == [MINTED]


async def test_the_async_store_records_refusals_and_counts_owed_wakeups(astore: AsyncInterruptStore) -> None:
    """The async twin records the same refusal; owed_wakeups counts what sweeps without a callback left owed."""
    await astore.mint("t-3", build_interrupt_marker(name="refund", interrupt_id="i-1", payload={}))
    await astore.record_refusal("t-3", "i-1", None, actor="mallory", error="four-eyes")
    assert (await astore.history("t-3"))[-1].data["why"] == "not_allowed"
    assert await astore.owed_wakeups() == 0


def test_owed_wakeups_counts_expiries_whose_graph_was_not_woken(store: InterruptStore) -> None:
    """A sweep without on_expired leaves each expiry's wake-up owed; a sweep with one delivers them."""
    with freeze_time("2026-03-01 12:00:00") as clock:
        _mint(store, "t-4", "i-1")
        _mint(store, "t-5", "i-1")
        assert store.owed_wakeups() == 0
        clock.tick(60)
        store.sweep(ttl_seconds=30)
        assert store.owed_wakeups() == 2
        store.sweep(ttl_seconds=30, on_expired=lambda *args: None)
        assert store.owed_wakeups() == 0
