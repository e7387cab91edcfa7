"""``symfonic-store sweep`` as the cron job: two at once, and waking graphs with --graph."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, mint_stale, popen_cli, run_cli, run_json, run_process
from commit_faults import LostAtCommit
from langchain_core.messages import AIMessage, HumanMessage

from symfonic_store import EXPIRED, InterruptStore
from symfonic_store.cli.main import main as cli_main

GRAPH_MODULE = '''\
"""A deployment's refund agent, as `symfonic-store sweep --graph refund_graph:graph` finds it."""
import sqlite3

from langgraph.checkpoint.sqlite import SqliteSaver

from symfonic_store import InterruptStore
from symfonic_store.demo import build_agent_graph

store = InterruptStore({url!r})
checkpointer = SqliteSaver(sqlite3.connect({checkpoints!r}, check_same_thread=False))
graph = build_agent_graph(store, checkpointer=checkpointer)


class _ModelOffline:
    """The same threads, but waking them fails."""

    def get_state(self, config):
        return graph.get_state(config)

    def invoke(self, *args, **kwargs):
        raise RuntimeError("the model endpoint is offline")


broken = _ModelOffline()
'''


def test_two_sweep_processes_expire_every_stale_interrupt_exactly_once(migrated_url: str) -> None:
    """Two `sweep` processes started together split the work: each stale interrupt expires once."""
    store = InterruptStore(migrated_url)
    store.setup()
    stale = {(f"t-{n:03d}", mint_stale(store, f"t-{n:03d}", age=3600)) for n in range(120)}
    mint_stale(store, "t-fresh", age=1)

    sweeps = [
        popen_cli("sweep", "--ttl", "60", "--batch-size", "5", "--format", "json", db=migrated_url)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=180) for p in sweeps]
    assert [p.returncode for p in sweeps] == [0, 0], [err for _, err in outputs]

    expired = [e for out, _ in outputs for e in json.loads(out)["expired"]]
    pairs = [(e["thread_id"], e["interrupt_id"]) for e in expired]
    assert len(pairs) == len(set(pairs)) == len(stale)
    assert set(pairs) == stale
    assert {e["reason"] for e in expired} == {"ttl"}

    endings = [e for e in store.events() if e.type == "interrupt.expired"]
    assert len(endings) == len(stale)
    assert [p["thread_id"] for p in store.list_pending()] == ["t-fresh"]
    store.close()


@pytest.fixture
def refund_graph(migrated_url: str, tmp_path: Path) -> Iterator[ModuleType]:
    """The module `refund_graph.py` in tmp_path, also imported here to drive the threads."""
    path = tmp_path / "refund_graph.py"
    path.write_text(GRAPH_MODULE.format(url=migrated_url, checkpoints=str(tmp_path / "checkpoints.db")))
    name = f"refund_graph_{tmp_path.name}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    module.store.setup()
    yield module
    module.store.close()
    module.checkpointer.conn.close()
    del sys.modules[name]


def _ask_for_refund(module: ModuleType, thread_id: str) -> str:
    config: Any = {"configurable": {"thread_id": thread_id}}
    module.graph.invoke({"messages": [HumanMessage("refund $420 to order 1181")]}, config)
    marker = module.store.pending(thread_id)
    assert marker is not None
    return str(marker["interrupt_id"])


def _last_reply(module: ModuleType, thread_id: str) -> str:
    state = module.graph.get_state({"configurable": {"thread_id": thread_id}})
    replies = [m for m in state.values["messages"] if isinstance(m, AIMessage) and m.content]
    return str(replies[-1].content)


def test_sweep_graph_wakes_only_threads_still_waiting(
    refund_graph: ModuleType, migrated_url: str, tmp_path: Path
) -> None:
    """--graph MODULE:ATTR resumes each expired, still-waiting thread with the timeout wake-up."""
    store: InterruptStore = refund_graph.store
    waiting = _ask_for_refund(refund_graph, "t-waiting")
    orphan = mint_stale(store, "t-orphan", age=3600)  # no graph is paused on this one

    # A real process: the module is found on the folder the command runs in.
    swept = run_process(
        "sweep", "--ttl", "0", "--graph", "refund_graph:graph", "--format", "json",
        db=migrated_url, cwd=tmp_path,
    )
    assert swept.returncode == 0, swept.stderr
    report = json.loads(swept.stdout)
    assert sorted((e["thread_id"], e["interrupt_id"]) for e in report["expired"]) == [
        ("t-orphan", orphan),
        ("t-waiting", waiting),
    ]
    assert report["woken"] == 1 and report["wake_failures"] == []

    assert "timed out" in _last_reply(refund_graph, "t-waiting")
    assert not refund_graph.graph.get_state({"configurable": {"thread_id": "t-waiting"}}).interrupts
    (record,) = store.audit(thread_id="t-waiting")
    assert (record.outcome, record.reason, record.actor) == ("expired", "ttl", None)
    assert "interrupt.resumed" not in [e.type for e in store.history("t-waiting")]


def test_sweep_graph_delivers_the_wake_ups_an_earlier_sweep_left_owed(
    refund_graph: ModuleType, migrated_url: str, tmp_path: Path
) -> None:
    """A sweep without --graph leaves the wake-up owed; a later `sweep --graph` wakes that graph and reports it delivered."""
    waiting = _ask_for_refund(refund_graph, "t-waiting")
    config: Any = {"configurable": {"thread_id": "t-waiting"}}

    silent = run_json("sweep", "--ttl", "0", "--format", "json", db=migrated_url, cwd=tmp_path)
    expiry = {"thread_id": "t-waiting", "interrupt_id": waiting, "reason": "ttl"}
    assert silent["expired"] == [expiry] and silent["owed"] == 1
    assert refund_graph.graph.get_state(config).interrupts  # still paused

    woke = run_json(
        "sweep", "--ttl", "0", "--graph", "refund_graph:graph", "--format", "json",
        db=migrated_url, cwd=tmp_path,
    )
    assert woke["expired"] == [] and woke["redelivered"] == [expiry]
    assert woke["woken"] == 1 and woke["owed"] == 0 and woke["complete"] is True
    assert "timed out" in _last_reply(refund_graph, "t-waiting")
    assert not refund_graph.graph.get_state(config).interrupts

    quiet = run_cli("sweep", "--ttl", "0", "--graph", "refund_graph:graph", db=migrated_url, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == "sweep expired 0 interrupt(s); ttl 0s; woke 0 graph(s)"


def test_failed_or_impossible_graph_wake_ups(
    refund_graph: ModuleType, migrated_url: str, tmp_path: Path
) -> None:
    """A failing wake-up exits 1 naming the thread; a graph that cannot be imported exits 2 first."""
    # In this process: the fixture's module is already imported under its own name.
    module = refund_graph.__name__
    store: InterruptStore = refund_graph.store
    kept = mint_stale(store, "t-kept", age=3600)
    for spec, named in (("no_such_module:graph", "no_such_module"), (f"{module}:store", "not a compiled")):
        refused = run_cli("sweep", "--ttl", "0", "--graph", spec, db=migrated_url, cwd=tmp_path)
        assert named in assert_clean_error(refused, 2)
    still = store.pending("t-kept")
    assert still is not None and still["interrupt_id"] == kept

    _ask_for_refund(refund_graph, "t-offline")
    failed = run_cli("sweep", "--ttl", "0", "--graph", f"{module}:broken", db=migrated_url, cwd=tmp_path)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    assert "t-offline" in failed.stderr and "the model endpoint is offline" in failed.stderr
    assert failed.stderr.rstrip().splitlines()[-1].startswith("symfonic-store: error:")
    assert "sweep expired 2 interrupt(s)" in failed.stdout and "1 wake-up(s) failed" in failed.stdout
    assert {r.thread_id: r.outcome for r in store.audit()} == {"t-kept": "expired", "t-offline": "expired"}


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """The real command line in this process (so a fault can be staged): code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("output", ["json", "table"])
def test_a_sweep_that_stops_partway_prints_what_it_committed(migrated_url: str, output: str) -> None:
    """Connection lost at the second batch's commit: stdout has the committed batch, stderr the failure, exit 1."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        first = [(f"t-{n}", mint_stale(store, f"t-{n}", age=3600)) for n in range(5)][:2]

    # Every engine, so the one the command line creates for itself too.
    with LostAtCommit(sa.Engine, at_batch=2) as fault:
        code, out, err = run_main(
            ["--db", migrated_url, "sweep", "--ttl", "60", "--batch-size", "2", "--format", output]
        )
    assert fault.fired
    assert code == 1, err
    if output == "json":
        report = json.loads(out)
        assert [(e["thread_id"], e["interrupt_id"]) for e in report["expired"]] == first
        assert report["complete"] is False
    else:
        assert "sweep stopped partway; before it stopped it expired 2 interrupt(s) (2 ttl)" in out
    errors = [line for line in err.splitlines() if line.startswith("symfonic-store: error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert "committed 2 expiry(ies)" in errors[0] and "may or may not have been saved" in errors[0]
    assert "nothing" not in errors[0]
    with InterruptStore(migrated_url) as store:
        assert len([e for e in store.events() if e.type == EXPIRED]) == 4  # batch 2 did commit


def test_a_sweep_without_a_ttl_says_so_on_stderr_and_still_expires_moved_on_runs(migrated_url: str) -> None:
    """No --ttl and no SYMFONIC_STORE_TTL: a note on stderr (exit 0, as before); the run_id rule still expires; with a TTL, no note."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        mint_stale(store, "t-old", age=86400)
        store.mint("t-moved", {"name": "approval", "interrupt_id": "i-moved", "payload": {}, "run_id": "r-1"})
        store.record_route("t-moved", "finish", run_id="r-2")

    forgot = run_cli("sweep", db=migrated_url)
    assert forgot.returncode == 0, forgot.stderr
    notes = [line for line in forgot.stderr.splitlines() if line.startswith("symfonic-store: note:")]
    assert any("no TTL configured" in n and "--ttl" in n and "run_id" in n for n in notes), forgot.stderr
    assert "sweep expired 1 interrupt(s) (1 run_id); ttl none" in forgot.stdout
    assert "symfonic-store: error:" not in forgot.stderr

    as_json = run_cli("sweep", "--format", "json", db=migrated_url)
    assert as_json.returncode == 0 and "no TTL configured" in as_json.stderr
    assert json.loads(as_json.stdout)["ttl_seconds"] is None

    for configured in (run_cli("sweep", "--ttl", "60", db=migrated_url),
                       run_cli("sweep", db=migrated_url, env={"SYMFONIC_STORE_TTL": "60"})):
        assert configured.returncode == 0, configured.stderr
        assert "no TTL configured" not in configured.stderr


def test_every_sweep_lists_what_it_expired_in_its_table(migrated_url: str) -> None:
    """A real sweep (not only --dry-run) prints thread, interrupt and reason of each expiry."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        stale = {t: mint_stale(store, t, age=3600) for t in ("t-a", "t-b")}
        mint_stale(store, "t-fresh", age=1)

    done = run_cli("sweep", "--ttl", "60", db=migrated_url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "2 interrupt(s) expired" in lines
    for thread_id, interrupt_id in stale.items():
        assert any(thread_id in line and interrupt_id in line and "ttl" in line for line in lines), done.stdout
    assert not any("t-fresh" in line for line in lines)
