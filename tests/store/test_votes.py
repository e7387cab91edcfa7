"""Assignment and quorum votes at the store (SPEC §15): ``assign``, ``vote``, ``votes``,
``assignment``; one vote per principal kept by the database under racing connections;
the approvers on the answer and in the audit; replay, verify, rebuild and the archive's
fold treat the new events like any other; the migration that adds the one-vote index."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import factories
import pytest
import sqlalchemy as sa
from migration_rig import event_indexes, migrate
from sqlalchemy.engine import Engine

from symfonic_store import (
    ASSIGNED,
    VOTED,
    AsyncInterruptStore,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStore,
    InvalidInputError,
    UnknownInterruptError,
)
from symfonic_store.db.migrate import current_revision
from symfonic_store.db.schema import events as events_table
from symfonic_store.services.audit import AUDIT_FIELDS
from symfonic_store.store.rules import tally
from symfonic_store.store.vote_ops import AlreadyVotedError

BEFORE = "0019_tenants"
THIS = "0020_one_vote"
INDEX = "uq_symfonic_events_one_vote"


def test_votes_are_recorded_once_per_principal_and_listed_in_order(store: InterruptStore) -> None:
    """Each vote returns every vote so far; a principal's second is refused, nothing written."""
    i = factories.mint(store, "t-1")["interrupt_id"]
    assert [v["actor"] for v in store.vote("t-1", i, "approve", {"approved": True}, actor="ann")] == ["ann"]
    votes = store.vote("t-1", i, "reject", {"approved": False}, actor="bob")
    assert [(v["actor"], v["decision"], v["response"]) for v in votes] == [
        ("ann", "approve", {"approved": True}), ("bob", "reject", {"approved": False}),
    ]
    before = store.history("t-1")
    with pytest.raises(AlreadyVotedError):
        store.vote("t-1", i, "approve", actor="ann")
    assert store.history("t-1") == before
    assert [v["actor"] for v in store.votes("t-1", i)] == ["ann", "bob"]
    assert store.pending("t-1") is not None  # a vote is not an ending


def test_assign_records_the_latest_assignment(store: InterruptStore) -> None:
    i = factories.mint(store, "t-1")["interrupt_id"]
    assert store.assignment("t-1", i) is None
    store.assign("t-1", i, to="bob", actor="ann")
    store.assign("t-1", i, to="finance", kind="role", actor="lead")
    found = store.assignment("t-1", i)
    assert found is not None and (found["to"], found["kind"], found["actor"]) == ("finance", "role", "lead")
    assert [e.data for e in store.history("t-1") if e.type == ASSIGNED] == [
        {"to": "bob", "kind": "principal"}, {"to": "finance", "kind": "role"},
    ]
    with pytest.raises(InvalidInputError):
        store.assign("t-1", i, to="x", kind="team", actor="ann")


def test_unknown_and_ended_interrupts_refuse_votes_and_assignments(store: InterruptStore) -> None:
    with pytest.raises(UnknownInterruptError):
        store.vote("t-none", "i-none", "approve", actor="ann")
    i = factories.mint(store, "t-1")["interrupt_id"]
    with pytest.raises(UnknownInterruptError):
        store.assign("t-1", "i-none", to="bob", actor="ann")
    store.resume("t-1", i, {"approved": True}, actor="ann")
    with pytest.raises(InterruptAlreadyResolvedError):
        store.vote("t-1", i, "approve", actor="bob")
    j = factories.mint(store, "t-2")["interrupt_id"]
    store.expire("t-2", j, reason="cancelled")
    with pytest.raises(InterruptExpiredError):
        store.assign("t-2", j, to="bob", actor="ann")
    assert not [e for e in store.events() if e.type in (VOTED, ASSIGNED)]


def test_racing_votes_of_one_principal_on_separate_connections_count_once(migrated_url: str) -> None:
    """Eight stores (eight connections) vote as one principal at once: one vote is
    recorded, seven are refused as already voted."""
    stores = [InterruptStore(migrated_url) for _ in range(8)]
    try:
        i = factories.mint(stores[0], "t-race")["interrupt_id"]
        start = threading.Barrier(len(stores))

        def race(s: InterruptStore) -> str:
            s.state("t-race")  # connect first
            start.wait(timeout=30)
            try:
                s.vote("t-race", i, "approve", actor="ann")
            except AlreadyVotedError:
                return "refused"
            return "voted"

        with ThreadPoolExecutor(len(stores)) as pool:
            results = list(pool.map(race, stores))
        assert sorted(results) == ["refused"] * 7 + ["voted"]
        assert [v["actor"] for v in stores[0].votes("t-race", i)] == ["ann"]
    finally:
        for s in stores:
            s.close()


def test_the_database_refuses_a_second_vote_of_one_principal(store: InterruptStore) -> None:
    """The index ``uq_symfonic_events_one_vote`` refuses a duplicate written past the store."""
    i = factories.mint(store, "t-1")["interrupt_id"]
    store.vote("t-1", i, "approve", actor="ann")
    last = store.history("t-1")[-1]
    row = {
        "thread_id": "t-1", "version": last.version + 1, "type": VOTED, "interrupt_id": i,
        "run_id": None, "actor": "ann", "data": {"decision": "approve"},
        "occurred_at": last.occurred_at, "hash": "e" * 64,
    }
    with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as conn:
        conn.execute(events_table.insert(), row)


def test_a_quorum_answer_records_its_approvers_and_the_audit_reports_them(store: InterruptStore) -> None:
    """The completing answer carries ``approvers``; the audit record has them (and an
    answer without a quorum has none); replay, verify and a rebuild agree."""
    i = factories.mint(store, "t-1")["interrupt_id"]
    j = factories.mint(store, "t-2")["interrupt_id"]
    for who in ("ann", "bob"):
        votes = store.vote("t-1", i, "approve", {"approved": True}, actor=who)
    count = tally(votes, 2, requester=None, four_eyes=False, veto=True)
    assert count.complete and count.approvers == ("ann", "bob")
    store.resume("t-1", i, {"approved": True}, actor="bob", approvers=count.approvers)
    store.resume("t-2", j, {"approved": True}, actor="cid")
    (record,) = store.audit(thread_id="t-1")
    assert record.approvers == ("ann", "bob") and record.as_dict()["approvers"] == ["ann", "bob"]
    (plain,) = store.audit(thread_id="t-2")
    assert plain.approvers == ()
    assert AUDIT_FIELDS[-1] == "approvers" and len(record.as_csv_row()) == len(AUDIT_FIELDS)
    assert store.verify().ok
    replayed = [event.type for event, _ in store.replay("t-1")]
    assert replayed.count(VOTED) == 2
    state = store.state("t-1")
    store.rebuild_projection()
    assert store.state("t-1") == state


def test_tally_counts_distinct_approvers_excludes_the_requester_and_vetoes() -> None:
    votes = [
        {"actor": "req", "decision": "approve"},
        {"actor": "ann", "decision": "accept"},
        {"actor": "bob", "decision": "edit"},
    ]
    assert tally(votes, 2, requester="req", four_eyes=True, veto=True).approvers == ("ann",)
    assert tally(votes, 2, requester="req", four_eyes=False, veto=True).complete
    rejected = [*votes, {"actor": "cid", "decision": "reject"}]
    assert tally(rejected, 2, requester=None, four_eyes=False, veto=True).vetoed_by == "cid"
    assert tally(rejected, 2, requester=None, four_eyes=False, veto=False).vetoed_by is None


async def test_the_async_store_votes_and_assigns_alike(astore: AsyncInterruptStore) -> None:
    i = (await astore.mint("t-a", factories.plain_marker("i-a"))) and "i-a"
    await astore.assign("t-a", i, to="bob", actor="ann")
    assert [v["actor"] for v in await astore.vote("t-a", i, "approve", actor="bob")] == ["bob"]
    with pytest.raises(AlreadyVotedError):
        await astore.vote("t-a", i, "approve", actor="bob")
    found = await astore.assignment("t-a", i)
    assert found is not None and found["to"] == "bob"


# --- the migration ---------------------------------------------------------------------


def test_0020_adds_the_one_vote_index_and_its_downgrade_drops_only_it(engine: Engine, db_url: str) -> None:
    """Up from 0018 adds the index; down drops it keeping the votes; up again restores it."""
    migrate(engine, "up", BEFORE)
    assert INDEX not in event_indexes(engine)
    migrate(engine, "up", THIS)
    assert INDEX in event_indexes(engine)
    migrate(engine, "up", "head")  # the store opens at the head only
    with InterruptStore(db_url) as store:
        i = factories.mint(store, "t-1")["interrupt_id"]
        store.vote("t-1", i, "approve", actor="ann")
        kept = store.events()
    migrate(engine, "down", BEFORE)
    with engine.connect() as conn:
        assert current_revision(conn) == BEFORE
        rows = conn.execute(sa.select(events_table.c.position, events_table.c.type)).all()
    assert INDEX not in event_indexes(engine)
    assert sorted(rows) == [(e.position, e.type) for e in kept]
    migrate(engine, "up", "head")
    assert INDEX in event_indexes(engine)
    with InterruptStore(db_url) as store:
        assert store.verify().ok
        with pytest.raises(AlreadyVotedError):
            store.vote("t-1", i, "approve", actor="ann")


def test_the_notifier_accepts_a_subscription_to_votes_and_assignments(store: InterruptStore, tmp_path: Path) -> None:
    """The registry declares both types, so the notifier's check of its ``events`` globs
    finds ``interrupt.voted`` and ``interrupt.assigned`` (a typo it names)."""
    from symfonic_store.notify.notifier import Notifier

    secret = tmp_path / "secret"
    secret.write_text("whsec_" + "A" * 32, encoding="utf-8")
    config = {"subscriptions": [{
        "name": "votes", "events": ["interrupt.voted", "interrupt.assigned", "interrupt.votd"],
        "webhook": {"url": "http://127.0.0.1:9/hook", "secret_file": str(secret)},
    }]}
    notifier = Notifier(store, config)
    assert notifier.unknown_patterns() == [("votes", "interrupt.votd")]


def test_assignment_rules_admit_the_assignee_its_role_and_reassign_roles() -> None:
    from symfonic_store.store.rules import assignee_refusal, reassign_refusal

    bob = {"to": "bob", "kind": "principal"}
    finance = {"to": "finance", "kind": "role"}
    assert assignee_refusal(None, "ann", frozenset()) is None
    assert assignee_refusal(bob, "bob", frozenset()) is None
    assert "assigned to 'bob'" in str(assignee_refusal(bob, "ann", frozenset({"finance"})))
    assert assignee_refusal(finance, "ann", frozenset({"finance"})) is None
    assert "role 'finance'" in str(assignee_refusal(finance, "finance", frozenset()))
    assert reassign_refusal(None, "ann", frozenset(), frozenset()) is None
    assert reassign_refusal(bob, "lead", frozenset({"lead"}), frozenset({"lead"})) is None
    assert "reassign roles (lead)" in str(reassign_refusal(bob, "ann", frozenset({"x"}), frozenset({"lead"})))


def test_the_policy_reads_quorum_veto_and_reassign_and_refuses_bad_values() -> None:
    from symfonic_store.policy import Policy

    policy = Policy.from_dict({
        "pay": {"roles": ["finance"], "quorum": 2, "four_eyes": True, "reassign": ["lead"]},
        "ship": {"quorum": 3, "veto": False},
    })
    assert policy.quorum_for("pay") == (2, True, True)
    assert policy.quorum_for("ship") == (3, False, False)
    assert policy.quorum_for("other") is None
    assert policy.reassign_roles("pay") == frozenset({"lead"})
    for bad in ({"quorum": 1}, {"quorum": True}, {"quorum": 2.5}, {"veto": "no"}, {"reassign": "lead"}):
        with pytest.raises(InvalidInputError):
            Policy.from_dict({"x": bad})


def test_a_thread_with_votes_and_an_assignment_archives_and_still_verifies(store: InterruptStore, tmp_path: Path) -> None:
    """The archive moves a finished thread's votes and assignment with its other events;
    the file verifies, and ``verify`` and a rebuild pass after the move."""
    import langgraph.types  # noqa: F401 -- loaded before the clock is frozen (pydantic's date types)
    from freezegun import freeze_time

    from symfonic_store.services import archive as archiving

    with freeze_time("2026-01-10") as clock:
        i = factories.mint(store, "t-arch")["interrupt_id"]
        store.assign("t-arch", i, to="finance", kind="role", actor="lead")
        store.vote("t-arch", i, "approve", actor="ann")
        store.vote("t-arch", i, "approve", actor="bob")
        store.resume("t-arch", i, {"approved": True}, actor="bob", approvers=("ann", "bob"))
        clock.move_to("2026-03-01")
        out = tmp_path / "votes.jsonl"
        result = store.archive("2026-02-01", out)
    assert result.threads == ["t-arch"] and result.events == 5
    assert archiving.verify_archive(out, {}).ok
    assert store.history("t-arch") == []
    assert store.verify().ok
    store.rebuild_projection()
    assert store.verify().ok
