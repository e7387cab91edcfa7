"""``symfonic-store vote`` (SPEC §15, quorum for Python callers) on SQLite and PostgreSQL:
the store's quorum from the command line, its exit codes those of ``resume``, and racing
voters in separate processes resume the interrupt once."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from cli_helpers import TIMEOUT, assert_clean_error, mint_stale, popen_cli, run_cli, run_json

from symfonic_store import RESUMED, VOTED, InterruptStore


@pytest.fixture
def migrated(migrated_url: str) -> Iterator[InterruptStore]:
    store = InterruptStore(migrated_url)
    yield store
    store.close()


def test_vote_counts_a_quorum_and_its_completing_vote_resumes_once(
    migrated: InterruptStore, migrated_url: str
) -> None:
    """The first vote prints voted 1 of 2; the second approver's prints resumed with both
    approvers and the resume value; one more is refused as already answered (exit 1), a
    second vote of one actor as already voted (exit 1)."""
    i = mint_stale(migrated, "t-q", age=5)
    args = ("--needed", "2", "--response", '{"approved": true}')
    first = run_json("vote", "t-q", i, "approve", "--actor", "ann", *args, db=migrated_url)
    assert first == {"outcome": "voted", "votes": 1, "needed": 2, "thread_id": "t-q", "interrupt_id": i,
                     "actor": "ann"}
    again = run_cli("vote", "t-q", i, "approve", "--actor", "ann", *args, db=migrated_url)
    assert "already voted" in assert_clean_error(again, 1)
    done = run_cli("vote", "t-q", i, "accept", "--actor", "bob", *args, db=migrated_url)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stderr
    said = json.loads(done.stdout)
    assert (said["outcome"], said["approvers"], said["resume"]) == ("resumed", ["ann", "bob"], {"approved": True})
    (resumed,) = [e for e in migrated.history("t-q") if e.type == RESUMED]
    assert (resumed.actor, resumed.data["approvers"]) == ("bob", ["ann", "bob"])
    late = run_cli("vote", "t-q", i, "approve", "--actor", "cid", *args, db=migrated_url)
    assert "already" in assert_clean_error(late, 1)


def test_vote_excludes_vetoes_and_refuses_what_is_not_a_vote(migrated: InterruptStore, migrated_url: str) -> None:
    """--exclude never counts (the requester); a reject vetoes (resumed with it, no
    approvers) unless --no-veto; under --needed an "edit" and --needed 1 are exit 2,
    nothing written; without --needed any word is recorded."""
    i = mint_stale(migrated, "t-x", age=5)
    own = run_json("vote", "t-x", i, "approve", "--actor", "req", "--needed", "2", "--exclude", "req", db=migrated_url)
    assert (own["outcome"], own["votes"]) == ("voted", 0)
    before = migrated.history("t-x")
    edit = run_cli("vote", "t-x", i, "edit", "--actor", "ann", "--needed", "2", db=migrated_url)
    assert "quorum of 2" in assert_clean_error(edit, 2)
    one = run_cli("vote", "t-x", i, "approve", "--actor", "ann", "--needed", "1", db=migrated_url)
    assert "needed" in assert_clean_error(one, 2)
    assert migrated.history("t-x") == before
    kept = run_json("vote", "t-x", i, "reject", "--actor", "ann", "--needed", "2", "--no-veto",
                    "--exclude", "req", db=migrated_url)
    assert (kept["outcome"], kept["votes"]) == ("voted", 0)
    vetoed = run_json("vote", "t-x", i, "reject", "--actor", "bob", "--needed", "2",
                      "--response", '{"approved": false}', db=migrated_url)
    assert vetoed["outcome"] == "resumed" and "approvers" not in vetoed
    assert vetoed["resume"] == {"approved": False}
    j = mint_stale(migrated, "t-plain", age=5)
    plain = run_json("vote", "t-plain", j, "edit", "--actor", "ann", db=migrated_url)
    assert (plain["outcome"], plain["votes"], plain["needed"]) == ("voted", 1, None)
    assert [e.actor for e in migrated.history("t-plain") if e.type == VOTED] == ["ann"]


def test_voters_racing_in_separate_processes_resume_the_interrupt_once(
    migrated: InterruptStore, migrated_url: str
) -> None:
    """Four ``vote`` processes race the completing vote after a first one: one prints
    resumed (the approved action, counted once), the others voted nothing more or were
    refused as already resolved (exit 1); one ``interrupt.resumed``."""
    i = mint_stale(migrated, "t-race", age=5)
    migrated.vote("t-race", i, "approve", actor="ann", needed=2)
    racers = [popen_cli("vote", "t-race", i, "approve", "--actor", f"fin{n}", "--needed", "2", db=migrated_url)
              for n in range(4)]
    finished = [(p.wait(timeout=TIMEOUT), *p.communicate()) for p in racers]
    approved_actions = sum(1 for code, out, _ in finished if code == 0 and json.loads(out)["outcome"] == "resumed")
    assert approved_actions == 1, finished
    for code, out, err in finished:
        assert code == 0 or (code == 1 and "already" in err and out == ""), (code, out, err)
    (resumed,) = [e for e in migrated.history("t-race") if e.type == RESUMED]
    assert resumed.data["approvers"][-1] == resumed.actor and len(resumed.data["approvers"]) == 2
