"""The crash SPEC §12 is about: the server dies after the approved node acted, before its step
committed. The approved action must not run twice, and the audit must not hide it.

A real graph and its PostgresSaver on a private PostgreSQL cluster (``tests/pgcluster.py``;
never the shared server). The approved node calls an idempotent tool written as
docs/reliability.md shows: it records its effect under ``symfonic_answer_id`` in a file
(a place the database crash does not touch) and acts only when that id has no effect yet.
The server is stopped like a power cut from inside the node, right after the tool acted;
LangGraph's checkpoint of that step is never written. After a restart and the claim's
lease (the clock moved with freezegun), the sweep records ``outcome_unknown`` with the
claimant, every answer is refused until ``symfonic-store settle``, and after
``settle --as not-taken`` a new approval re-runs the node -- and the tool still acted once.
"""

from __future__ import annotations

import json
import operator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
import sqlalchemy as sa
from cli_helpers import run_cli
from freezegun import freeze_time
from graph_rig import config_for, libpq_conninfo
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import RunnableConfig, interrupt
from pgcluster import PrivateCluster
from psycopg.rows import dict_row

from symfonic_store import (
    DatabaseError,
    InterruptGateway,
    InterruptInProgressError,
    InterruptOutcomeUnknownError,
    InterruptStore,
)
from symfonic_store.events import RESUME_REJECTED, RESUMED

# --- the idempotent tool, as docs/reliability.md writes it ----------------------------


class Effects:
    """Where the refunds are sent: a file, which the database crash does not touch."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def done(self, key: str) -> bool:
        return any(e["key"] == key for e in self.all())

    def record(self, key: str, amount: int) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"key": key, "amount": amount}) + "\n")

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]


def send_refund(effects: Effects, amount: int, config: RunnableConfig) -> str:
    """The tool: acts once per answer id, however often the node runs."""
    key = config["configurable"]["symfonic_answer_id"]
    if effects.done(key):
        return "already sent"
    effects.record(key, amount)  # the side effect, recorded under its key
    return "sent"


class State(TypedDict, total=False):
    results: Annotated[list[str], operator.add]


def refund_graph(checkpointer: Any, effects: Effects, runs: list[str], crash: list[Any]) -> Any:
    """``interrupt()`` for approval; on approval the node sends the refund (and, while
    ``crash`` holds a callback, stops the server right after: before the step commits)."""

    def approve(state: State, config: RunnableConfig) -> dict[str, Any]:
        answer = interrupt({"name": "refund_approval", "amount": 1300})
        runs.append(str(answer))
        if not (isinstance(answer, dict) and answer.get("approved") is True):
            return {"results": ["refused"]}
        result = send_refund(effects, 1300, config)
        if crash:
            crash.pop()()
        return {"results": [result]}

    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer, name="refunds")


def test_a_server_crash_after_the_node_acted_is_outcome_unknown_and_the_tool_acts_once(
    cluster: PrivateCluster, crash_url: str, tmp_path: Path
) -> None:
    """Crash between the tool's effect and the step's commit: outcome_unknown with its actor, no answer until settle, one effect."""
    effects = Effects(tmp_path / "refunds.jsonl")
    runs: list[str] = []
    thread = "t-refund"

    # The answering process: it claims, runs the node, and the server dies under it.
    with InterruptStore(crash_url) as store:
        store.setup()
        with psycopg.connect(libpq_conninfo(crash_url), autocommit=True, row_factory=dict_row) as conn:
            saver = PostgresSaver(conn)
            saver.setup()
            gate = InterruptGateway(refund_graph(saver, effects, runs, [cluster.crash]), store)
            gate.invoke({}, config_for(thread, actor="requester"))
            ((thread_id, interrupt_id),) = [
                (o["thread_id"], o["interrupt_id"]) for o in store.open_interrupts(thread)
            ]
            # The answering call is told the truth: its database is gone after the claim
            # committed, so what became of the step is unknown (SPEC §12), never a raw
            # driver error and never "nothing was written".
            with pytest.raises(DatabaseError) as died:
                gate.answer(thread_id, interrupt_id, {"approved": True}, actor="alice")
            assert not cluster.is_running(), died.value
            assert getattr(died.value, "outcome_unknown", False) is True, died.value
            assert "nothing of it was written" not in str(died.value)
    assert len(effects.all()) == 1 and runs == ["{'approved': True}"]  # the node acted once

    cluster.start()  # the restart: a new process, new connections
    with InterruptStore(crash_url) as store, psycopg.connect(
        libpq_conninfo(crash_url), autocommit=True, row_factory=dict_row
    ) as conn:
        gate = InterruptGateway(refund_graph(PostgresSaver(conn), effects, runs, []), store)
        state = gate.graph.get_state(config_for(thread))
        assert [iv.id for iv in state.interrupts] == [interrupt_id]  # the step never committed
        (opened,) = store.open_interrupts(thread)
        assert opened["claimed_by"] == "alice" and "outcome_unknown" not in opened
        with pytest.raises(InterruptInProgressError):  # within the lease: alice may still be at it
            gate.answer(thread, interrupt_id, {"approved": True}, actor="bob")

        with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
            report = store.sweep(on_expired=gate.waker())
        assert report.claims_settled == [(thread, interrupt_id, "outcome_unknown")]
        (unknown,) = [
            e for e in store.history(thread)
            if e.type == RESUME_REJECTED and e.data.get("detected_by") == "sweep"
        ]
        assert unknown.actor == "alice" and unknown.data["why"] == "outcome_unknown"
        assert unknown.data["response"] == {"approved": True}
        (record,) = store.audit(thread_id=thread)
        assert ("alice", "outcome_unknown") in [(a["actor"], a["why"]) for a in record.attempts]
        assert record.outcome != "resumed"

        for actor in ("bob", "alice"):  # nobody can answer until an operator settles it
            with pytest.raises(InterruptOutcomeUnknownError) as refused:
                gate.answer(thread, interrupt_id, {"approved": True}, actor=actor)
            assert refused.value.claimant == "alice"
        assert len(runs) == 1  # a refused answer runs nothing

        settled = run_cli("settle", thread, interrupt_id, "--as", "not-taken", "--actor", "ops", db=crash_url)
        assert settled.returncode == 0, settled.stderr

        out = gate.answer(thread, interrupt_id, {"approved": True}, actor="bob")
        assert out["results"] == ["already sent"]  # the node ran again; the tool did not act
        assert len(runs) == 2
        assert len(effects.all()) == 1  # exactly one refund, whatever the crash
        history = store.history(thread)
        (resumed,) = [e for e in history if e.type == RESUMED]
        assert resumed.actor == "bob"
        rejected = [(e.actor, e.data["why"], e.data.get("settled_by")) for e in history if e.type == RESUME_REJECTED]
        assert rejected == [
            ("bob", "in_progress", None),
            ("alice", "outcome_unknown", None),
            ("bob", "outcome_unknown", None),
            ("alice", "outcome_unknown", None),
            ("alice", "not_taken", "ops"),
        ]


# --- the answering process killed, on both backends ----------------------------------

REFUND_MODULE = '''\
"""A refund that needs approval; its tool keys its effect on symfonic_answer_id."""
import json
import operator
import os
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

URL = {url!r}
REFUNDS = Path({refunds!r})
RUNS = Path({runs!r})


def _saver():
    if URL.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect({path!r}, check_same_thread=False))
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    saver = PostgresSaver(psycopg.connect({conninfo!r}, autocommit=True, row_factory=dict_row))
    saver.setup()
    return saver


def send_refund(amount, config):
    """Acts once per answer id, however often the node runs."""
    key = config["configurable"]["symfonic_answer_id"]
    sent = REFUNDS.read_text().splitlines() if REFUNDS.exists() else []
    if any(json.loads(line)["key"] == key for line in sent):
        return "already sent"
    with REFUNDS.open("a") as f:  # the effect, recorded under its key
        f.write(json.dumps({{"key": key, "amount": amount}}) + "\\n")
    return "sent"


class State(TypedDict, total=False):
    results: Annotated[list[str], operator.add]


def approve(state, config):
    answer = interrupt({{"name": "refund_approval", "amount": 1300}})
    with RUNS.open("a") as f:
        f.write("ran\\n")
    if not (isinstance(answer, dict) and answer.get("approved") is True):
        return {{"results": ["refused"]}}
    result = send_refund(1300, config)
    if os.environ.get("DIE_AFTER_THE_EFFECT"):
        os._exit(17)  # the answering process dies before the step commits
    return {{"results": [result]}}


builder = StateGraph(State)
builder.add_node("approve", approve)
builder.add_edge(START, "approve")
builder.add_edge("approve", END)
graph = builder.compile(checkpointer=_saver(), name="refunds")
'''

ANSWERER = """
import sys
sys.path.insert(0, sys.argv[1])
import refunds
from symfonic_store import InterruptGateway, InterruptStore
store = InterruptStore(sys.argv[2])
InterruptGateway(refunds.graph, store).answer(sys.argv[3], sys.argv[4], {"approved": True}, actor="alice")
"""


def test_an_answering_process_killed_after_the_node_acted_is_outcome_unknown(migrated_url: str, tmp_path: Path) -> None:
    """The answering process dies after the tool acted: outcome_unknown by its actor, refused until settle, one refund (both backends)."""
    import subprocess
    import sys

    from cli_helpers import cli_env
    from service_rig import import_module_file

    conninfo = "" if migrated_url.startswith("sqlite") else libpq_conninfo(migrated_url)
    module = tmp_path / "refunds.py"
    module.write_text(REFUND_MODULE.format(
        url=migrated_url, refunds=str(tmp_path / "refunds.jsonl"), runs=str(tmp_path / "runs.txt"),
        path=str(sa.make_url(migrated_url).database), conninfo=conninfo,
    ))
    refunds = import_module_file(module)
    effects, runs = Effects(tmp_path / "refunds.jsonl"), tmp_path / "runs.txt"
    thread = "t-killed"
    with InterruptStore(migrated_url) as store:
        store.setup()
        gate = InterruptGateway(refunds.graph, store)
        gate.invoke({}, config_for(thread, actor="requester"))
        ((_, interrupt_id),) = [(o["thread_id"], o["interrupt_id"]) for o in store.open_interrupts(thread)]
        answering = subprocess.run(
            [sys.executable, "-c", ANSWERER, str(tmp_path), migrated_url, thread, interrupt_id],
            env=cli_env({"DIE_AFTER_THE_EFFECT": "1"}), capture_output=True, text=True, timeout=120,
        )
        assert answering.returncode == 17, answering.stderr
        assert len(effects.all()) == 1 and len(runs.read_text().splitlines()) == 1

        with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
            report = store.sweep(on_expired=gate.waker())
        assert report.claims_settled == [(thread, interrupt_id, "outcome_unknown")]
        (unknown,) = [e for e in store.history(thread) if e.type == RESUME_REJECTED]
        assert (unknown.actor, unknown.data["why"]) == ("alice", "outcome_unknown")
        with pytest.raises(InterruptOutcomeUnknownError):
            gate.answer(thread, interrupt_id, {"approved": True}, actor="bob")

        store.settle(thread, interrupt_id, outcome="not_taken", actor="ops")
        out = gate.answer(thread, interrupt_id, {"approved": True}, actor="bob")
        assert out["results"] == ["already sent"]
        assert len(runs.read_text().splitlines()) == 2 and len(effects.all()) == 1
        (resumed,) = [e for e in store.history(thread) if e.type == RESUMED]
        assert resumed.actor == "bob"
    refunds.graph.checkpointer.conn.close()
