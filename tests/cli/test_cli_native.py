"""The command line answers and wakes LangGraph's own interrupts through the gateway."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import run_cli

GRAPH_MODULE = '''
"""A payments graph that pauses with plain interrupt(): imported by --graph."""
import sqlite3
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

wired: list[int] = []


class State(TypedDict, total=False):
    answers: list[Any]


def approve(state: State) -> dict:
    answer = interrupt({{"name": "wire_approval", "amount": 999}})
    if isinstance(answer, dict) and answer.get("approved") is True:
        wired.append(999)
    return {{"answers": [answer]}}


builder = StateGraph(State)
builder.add_node("approve", approve)
builder.add_edge(START, "approve")
builder.add_edge("approve", END)
checkpointer = SqliteSaver(sqlite3.connect({checkpoints!r}, check_same_thread=False))
graph = builder.compile(checkpointer=checkpointer, name="payments")
'''


def _module(tmp_path: Path, name: str) -> str:
    (tmp_path / f"{name}.py").write_text(GRAPH_MODULE.format(checkpoints=str(tmp_path / "cp.db")))
    return name


def _pause(db_url: str, tmp_path: Path, name: str, thread_id: str) -> str:
    import importlib
    import sys

    from symfonic_store import InterruptGateway, InterruptStore

    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
    with InterruptStore(db_url) as store:
        store.setup()
        InterruptGateway(module.graph, store).invoke({}, {"configurable": {"thread_id": thread_id}})
        (opened,) = store.open_interrupts(thread_id)
    return str(opened["interrupt_id"])


def test_resume_with_graph_answers_a_langgraph_interrupt_once(migrated_url: str, tmp_path: Path) -> None:
    """`resume --graph` admits the answer through the gateway and resumes the graph; a second answer exits 1."""
    name = _module(tmp_path, f"payments_{tmp_path.name}")
    interrupt_id = _pause(migrated_url, tmp_path, name, "t-cli")
    without = run_cli("resume", "t-cli", interrupt_id, "--actor", "alice", db=migrated_url, cwd=tmp_path)
    assert without.returncode == 2 and "--graph" in without.stderr

    done = run_cli(
        "resume", "t-cli", interrupt_id, "--actor", "alice", "--response", '{"approved": true}',
        "--graph", f"{name}:graph", db=migrated_url, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "outcome": "resumed", "thread_id": "t-cli", "interrupt_id": interrupt_id, "actor": "alice"
    }
    again = run_cli(
        "resume", "t-cli", interrupt_id, "--actor", "bob", "--response", '{"approved": true}',
        "--graph", f"{name}:graph", db=migrated_url, cwd=tmp_path,
    )
    assert again.returncode == 1 and "already answered by 'alice'" in again.stderr
    audit = json.loads(run_cli("audit", "--format", "json", db=migrated_url).stdout)
    assert [(r["actor"], r["outcome"]) for r in audit] == [("alice", "resumed")]


def test_sweep_with_graph_wakes_an_expired_langgraph_interrupt(migrated_url: str, tmp_path: Path) -> None:
    """`sweep --graph` expires a stale native interrupt and wakes its graph with the expiry answer."""
    name = _module(tmp_path, f"payments_sweep_{tmp_path.name}")
    interrupt_id = _pause(migrated_url, tmp_path, name, "t-sweep")
    done = run_cli(
        "sweep", "--ttl", "0", "--graph", f"{name}:graph", "--format", "json", db=migrated_url, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["expired"] == [{"thread_id": "t-sweep", "interrupt_id": interrupt_id, "reason": "ttl"}]
    assert report["woken"] == 1
    audit = json.loads(run_cli("audit", "--format", "json", db=migrated_url).stdout)
    assert [(r["outcome"], r["reason"], r["actor"]) for r in audit] == [("expired", "ttl", None)]


def test_a_dry_run_sweep_lists_what_it_would_expire_in_its_table(migrated_url: str) -> None:
    """`sweep --dry-run` (table) names each interrupt it would expire, and writes nothing."""
    from cli_helpers import mint_stale

    from symfonic_store import InterruptStore

    with InterruptStore(migrated_url) as store:
        store.setup()
        stale = mint_stale(store, "t-dry", age=3600)
        before = store.history("t-dry")
        done = run_cli("sweep", "--ttl", "60", "--dry-run", db=migrated_url)
        assert done.returncode == 0, done.stderr
        assert "would expire 1 interrupt(s)" in done.stdout
        assert any("t-dry" in line and stale in line and "ttl" in line for line in done.stdout.splitlines())
        assert store.history("t-dry") == before


def test_vote_with_graph_resumes_a_langgraph_interrupt_its_quorum_decided(migrated_url: str, tmp_path: Path) -> None:
    """`vote --needed 2`: without --graph the deciding vote on a LangGraph interrupt says
    "decided" and leaves it open; with --graph the deciding vote answers it through the
    gateway with both approvers, and the graph resumes once."""
    name = _module(tmp_path, f"payments_vote_{tmp_path.name}")
    interrupt_id = _pause(migrated_url, tmp_path, name, "t-vote")
    quorum = ("--needed", "2", "--response", '{"approved": true}')
    first = run_cli("vote", "t-vote", interrupt_id, "approve", "--actor", "ann", *quorum,
                    "--graph", f"{name}:graph", db=migrated_url, cwd=tmp_path)
    assert json.loads(first.stdout)["outcome"] == "voted", first.stderr
    other = _pause(migrated_url, tmp_path, name, "t-vote-open")
    run_cli("vote", "t-vote-open", other, "approve", "--actor", "ann", *quorum, db=migrated_url)
    left = run_cli("vote", "t-vote-open", other, "approve", "--actor", "bob", *quorum, db=migrated_url)
    assert json.loads(left.stdout)["outcome"] == "decided", left.stderr
    done = run_cli("vote", "t-vote", interrupt_id, "approve", "--actor", "bob", *quorum,
                   "--graph", f"{name}:graph", db=migrated_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "outcome": "resumed", "thread_id": "t-vote", "interrupt_id": interrupt_id, "actor": "bob",
        "approvers": ["ann", "bob"],
    }
    audit = json.loads(run_cli("audit", "--thread", "t-vote", "--format", "json", db=migrated_url).stdout)
    assert [(r["actor"], r["outcome"], r["approvers"]) for r in audit] == [("bob", "resumed", ["ann", "bob"])]
    pending = json.loads(run_cli("pending", "--format", "json", db=migrated_url).stdout)
    assert [p["thread_id"] for p in pending] == ["t-vote-open"]
