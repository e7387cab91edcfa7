"""The quorum at the store (SPEC §15, "quorum for Python callers"): ``store.vote(...,
needed=, veto=, exclude=)`` counts the vote and resumes the seed marker it decides, once,
with ``data["approvers"]`` -- as the service records it; a veto ends it; racing votes on
separate connections resume it exactly once; the return is still the list of votes."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import factories
import pytest

from symfonic_store import (
    RESUME_REJECTED,
    RESUMED,
    VOTED,
    AsyncInterruptStore,
    InterruptAlreadyResolvedError,
    InterruptStore,
    InvalidInputError,
    ResumeNotAllowedError,
)
from symfonic_store.store.vote_ops import AlreadyVotedError, NotAVoteError, Votes


def test_the_vote_that_completes_the_quorum_resumes_the_marker_once_with_the_approvers(
    store: InterruptStore,
) -> None:
    """The first vote is recorded and counted (not decided); the second distinct approver's
    resumes the marker with its own response and actor and both approvers; later votes are
    refused as already resolved, nothing written."""
    i = factories.mint(store, "t-1")["interrupt_id"]
    first = store.vote("t-1", i, "approve", {"approved": True, "n": 1}, actor="ann", needed=2)
    assert isinstance(first, Votes) and isinstance(first, list)
    assert [v["actor"] for v in first] == ["ann"]
    assert (first.needed, first.approvers, first.decided, first.resumed) == (2, ("ann",), False, None)
    assert store.pending("t-1") is not None
    done = store.vote("t-1", i, "accept", {"approved": True, "n": 2}, actor="bob", needed=2)
    assert done.decided and done.approvers == ("ann", "bob") and done.resume_approvers == ("ann", "bob")
    assert done.resumed is not None and done.resumed.resume == {"approved": True, "n": 2}
    (resumed,) = [e for e in store.history("t-1") if e.type == RESUMED]
    assert (resumed.actor, resumed.data["approvers"]) == ("bob", ["ann", "bob"])
    assert resumed.data["response"] == {"approved": True, "n": 2}
    assert store.pending("t-1") is None
    before = store.history("t-1")
    with pytest.raises(InterruptAlreadyResolvedError):
        store.vote("t-1", i, "approve", actor="cid", needed=2)
    assert store.history("t-1") == before
    (record,) = store.audit(thread_id="t-1")
    assert record.approvers == ("ann", "bob")


def test_an_excluded_actor_votes_but_never_counts(store: InterruptStore) -> None:
    """``exclude`` (the requester under four-eyes): its approving vote is recorded and left
    out of the count, so two more approvers are needed."""
    i = factories.mint(store, "t-4")["interrupt_id"]
    own = store.vote("t-4", i, "approve", actor="req", needed=2, exclude="req")
    assert [v["actor"] for v in own] == ["req"] and own.approvers == () and not own.decided
    one = store.vote("t-4", i, "approve", actor="ann", needed=2, exclude=["req"])
    assert one.approvers == ("ann",) and not one.decided
    two = store.vote("t-4", i, "approve", actor="bob", needed=2, exclude=("req", "x"))
    assert two.decided and two.resumed is not None
    (resumed,) = [e for e in store.history("t-4") if e.type == RESUMED]
    assert resumed.data["approvers"] == ["ann", "bob"]


def test_a_reject_vetoes_unless_veto_is_false(store: InterruptStore) -> None:
    """With ``veto`` a reject ends the marker at once, resumed with that rejection and no
    approvers; with ``veto=False`` it is recorded and does not count."""
    i = factories.mint(store, "t-v")["interrupt_id"]
    store.vote("t-v", i, "approve", {"approved": True}, actor="ann", needed=2)
    vetoed = store.vote("t-v", i, "reject", {"approved": False}, actor="bob", needed=2)
    assert vetoed.decided and vetoed.vetoed_by == "bob" and vetoed.resume_approvers == ()
    assert vetoed.resumed is not None
    (resumed,) = [e for e in store.history("t-v") if e.type == RESUMED]
    assert resumed.actor == "bob" and resumed.data["response"] == {"approved": False}
    assert "approvers" not in resumed.data

    j = factories.mint(store, "t-nv")["interrupt_id"]
    kept = store.vote("t-nv", j, "reject", {"approved": False}, actor="ann", needed=2, veto=False)
    assert not kept.decided and kept.vetoed_by is None and kept.approvers == ()
    store.vote("t-nv", j, "approve", actor="bob", needed=2, veto=False)
    assert store.vote("t-nv", j, "approve", actor="cid", needed=2, veto=False).decided


def test_what_is_not_a_vote_is_refused_and_nothing_is_written(store: InterruptStore) -> None:
    """Under a quorum only approve, accept or reject vote (NotAVoteError, an
    InvalidInputError, nothing written); ``needed`` must be an integer of at least 2."""
    i = factories.mint(store, "t-n")["interrupt_id"]
    before = store.history("t-n")
    for word in ("edit", None):
        with pytest.raises(NotAVoteError, match="quorum of 2"):
            store.vote("t-n", i, word, actor="ann", needed=2)
    for bad in (1, 0, True, 2.0, "2"):
        with pytest.raises(InvalidInputError, match="needed"):
            store.vote("t-n", i, "approve", actor="ann", needed=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="exclude"):
        store.vote("t-n", i, "approve", actor="ann", needed=2, exclude=[""])
    assert store.history("t-n") == before
    plain = store.vote("t-n", i, "edit", actor="ann")  # without a quorum: recorded, as before
    assert (plain.needed, plain.decided) == (None, False)
    with pytest.raises(AlreadyVotedError):
        store.vote("t-n", i, "approve", actor="ann", needed=2)


def test_a_langgraph_interrupt_or_resume_marker_false_is_left_to_the_caller(store: InterruptStore) -> None:
    """A deciding vote on LangGraph's own interrupt does not resume it (its gateway must):
    ``native`` and ``resume_approvers`` say how; ``resume_marker=False`` leaves a marker alike."""
    store.record_waiting("t-g", [{"interrupt_id": "n-1", "value": {"question": "ship?"}}], graph="g")
    store.vote("t-g", "n-1", "approve", actor="ann", needed=2)
    decided = store.vote("t-g", "n-1", "approve", actor="bob", needed=2)
    assert decided.decided and decided.native and decided.resumed is None
    assert decided.resume_approvers == ("ann", "bob")
    assert not [e for e in store.history("t-g") if e.type == RESUMED]
    i = factories.mint(store, "t-m")["interrupt_id"]
    store.vote("t-m", i, "approve", actor="ann", needed=2, resume_marker=False)
    left = store.vote("t-m", i, "approve", actor="bob", needed=2, resume_marker=False)
    assert left.decided and not left.native and left.resumed is None
    assert store.pending("t-m") is not None


def test_racing_completing_votes_on_separate_connections_resume_exactly_once(migrated_url: str) -> None:
    """After one vote, six actors on six stores (six connections) race the completing vote:
    the approved action runs once (a counter), one ``interrupt.resumed`` with two approvers,
    the completing actor last; every vote is recorded once; the losers are refused as
    already resolved (a loser's refusal recorded when its vote was in before the resume)."""
    racers = [f"fin{n}" for n in range(6)]
    stores = [InterruptStore(migrated_url) for _ in racers]
    approved_actions = 0
    counted = threading.Lock()
    try:
        i = factories.mint(stores[0], "t-race")["interrupt_id"]
        stores[0].vote("t-race", i, "approve", {"approved": True}, actor="ann", needed=2)
        start = threading.Barrier(len(stores))

        def race(n: int) -> str:
            nonlocal approved_actions
            s = stores[n]
            s.state("t-race")  # connect first
            start.wait(timeout=30)
            try:
                votes = s.vote("t-race", i, "approve", {"approved": True}, actor=racers[n], needed=2)
            except InterruptAlreadyResolvedError:
                return "lost"
            if votes.resumed is not None:
                with counted:
                    approved_actions += 1  # the action the approval allows, run by its winner
                return "resumed"
            return "voted"

        with ThreadPoolExecutor(len(stores)) as pool:
            results = list(pool.map(race, range(len(stores))))
        assert approved_actions == 1 and results.count("resumed") == 1, results
        assert set(results) <= {"resumed", "lost"}, results
        history = stores[0].history("t-race")
        (resumed,) = [e for e in history if e.type == RESUMED]
        voters = [e.actor for e in history if e.type == VOTED]
        assert len(voters) == len(set(voters)) and voters[0] == "ann"
        approvers = resumed.data["approvers"]
        assert len(set(approvers)) == 2 and approvers[-1] == resumed.actor and set(approvers) <= set(voters)
        refused = [e for e in history if e.type == RESUME_REJECTED]
        assert len(voters) - 2 == len(refused)  # each later vote's resume refused, recorded
        assert stores[0].verify().ok
    finally:
        for s in stores:
            s.close()


def test_an_assigned_interrupt_admits_its_assignee_or_its_role_only(store: InterruptStore) -> None:
    """``admit_assignee``: an interrupt never assigned, its assignee, a holder of its role
    -- nothing recorded; anyone else is refused, recorded as the service's refusal is."""
    i = factories.mint(store, "t-as")["interrupt_id"]
    store.admit_assignee("t-as", i, actor="ann")
    store.assign("t-as", i, to="bob", actor="lead")
    before = store.history("t-as")
    store.admit_assignee("t-as", i, {"approved": True}, actor="bob")
    assert store.history("t-as") == before
    with pytest.raises(ResumeNotAllowedError, match="assigned to 'bob', not to 'cid'"):
        store.admit_assignee("t-as", i, {"approved": True}, actor="cid", roles=["finance"])
    last = store.history("t-as")[-1]
    assert (last.type, last.actor) == (RESUME_REJECTED, "cid")
    assert last.data == {"response": {"approved": True}, "why": "not_allowed",
                         "error": "the interrupt is assigned to 'bob', not to 'cid'", "via": "service"}
    store.assign("t-as", i, to="finance", kind="role", actor="lead")
    store.admit_assignee("t-as", i, actor="cid", roles={"finance"})
    with pytest.raises(ResumeNotAllowedError, match="role 'finance'"):
        store.admit_assignee("t-as", i, actor="bob")
    (attempts,) = [r.attempts for r in store.audit(thread_id="t-as")]
    assert [a["actor"] for a in attempts] == ["cid", "bob"]  # refused answers, as the service's
    with pytest.raises(InvalidInputError, match="roles"):
        store.admit_assignee("t-as", i, actor="bob", roles=[""])


async def test_the_async_store_counts_the_quorum_alike(astore: AsyncInterruptStore) -> None:
    await astore.mint("t-a", factories.plain_marker("i-a"))
    first = await astore.vote("t-a", "i-a", "approve", {"approved": True}, actor="ann", needed=2)
    assert [v["actor"] for v in first] == ["ann"] and not first.decided
    done = await astore.vote("t-a", "i-a", "approve", {"approved": True}, actor="bob", needed=2)
    assert done.decided and done.resumed is not None
    history = await astore.history("t-a")
    (resumed,) = [e for e in history if e.type == RESUMED]
    assert resumed.data["approvers"] == ["ann", "bob"]
