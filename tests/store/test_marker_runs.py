"""The claim on a seed marker's graph run (``store.claim_marker_run``, SPEC §9 wave 4):
one answer holds it at a time, decided by the database; a held claim refuses another
answer (recorded ``in_progress``); a claim whose process died is taken over once the
sweep's claim lease ran out, and the sweep itself leaves it alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from threading import Barrier

import factories
import pytest
from freezegun import freeze_time

from symfonic_store import InterruptStore
from symfonic_store.errors import (
    InterruptInProgressError,
    SymfonicStoreError,
    UnknownInterruptError,
)
from symfonic_store.events import RESUME_REJECTED
from symfonic_store.services.sweep import CLAIM_LEASE_SECONDS


def test_one_claim_at_a_time_the_other_refused_and_recorded(store: InterruptStore) -> None:
    """A held claim refuses the second answer (in_progress, naming the claimant, recorded);
    once ended, the marker can be claimed again."""
    i = factories.mint(store, "t-run")["interrupt_id"]
    assert store.claim_marker_run("t-run", i, {"approved": True}, actor="alice") is True
    with pytest.raises(InterruptInProgressError) as refused:
        store.claim_marker_run("t-run", i, {"approved": True}, actor="bob")
    assert refused.value.claimant == "alice"
    rejected = [e for e in store.history("t-run") if e.type == RESUME_REJECTED]
    assert [(e.actor, e.data["why"], e.data["claimant"]) for e in rejected] == [("bob", "in_progress", "alice")]
    assert store.end_marker_run("t-run", i) is True
    assert store.end_marker_run("t-run", i) is False
    assert store.claim_marker_run("t-run", i, None, actor="bob") is True


def test_an_unminted_marker_cannot_be_claimed_and_nothing_is_written(store: InterruptStore) -> None:
    """A claim on an id nothing minted is refused, and writes nothing."""
    factories.mint(store, "t-none")
    before = store.history("t-none")
    with pytest.raises(UnknownInterruptError):
        store.claim_marker_run("t-none", "i-000000000000", None, actor="alice")
    assert store.history("t-none") == before


def test_racing_claims_from_threads_one_wins(store: InterruptStore) -> None:
    """Eight threads claim at once on their own connections: exactly one holds it."""
    i = factories.mint(store, "t-race")["interrupt_id"]
    start = Barrier(8)

    def claim(n: int) -> bool:
        start.wait()
        try:
            return store.claim_marker_run("t-race", i, None, actor=f"p{n}")
        except SymfonicStoreError:
            return False

    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(claim, range(8)))
    assert won.count(True) == 1


def test_a_lapsed_claim_is_taken_over_and_the_sweep_leaves_it_alone(store: InterruptStore) -> None:
    """Past the lease, the sweep neither settles nor marks a marker's claim (no event);
    the next answer takes it over."""
    i = factories.mint(store, "t-lapsed")["interrupt_id"]
    now = datetime.now(UTC)
    with freeze_time(now):
        store.claim_marker_run("t-lapsed", i, None, actor="alice")
    with freeze_time(now + timedelta(seconds=CLAIM_LEASE_SECONDS - 1)):
        with pytest.raises(InterruptInProgressError):
            store.claim_marker_run("t-lapsed", i, None, actor="bob")
    with freeze_time(now + timedelta(seconds=CLAIM_LEASE_SECONDS + 1)):
        before = len(store.history("t-lapsed"))
        report = store.sweep()
        assert report.claims_settled == []
        assert len(store.history("t-lapsed")) == before
        assert store.claim_marker_run("t-lapsed", i, None, actor="bob") is True
    with pytest.raises(InterruptInProgressError) as refused:
        store.claim_marker_run("t-lapsed", i, None, actor="carol")
    assert refused.value.claimant == "bob"
