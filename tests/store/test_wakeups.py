"""Owed wake-ups belong to the graph whose name the mint recorded: the sweep of another
graph never delivers them, ``list_wakeups`` / ``symfonic-store wakeups`` show them by graph,
and ``drop_wakeups`` / ``wakeups --drop`` give them up on the record (who and when)."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, mint_stale, run_cli, run_json
from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory

from symfonic_store import NOT_HELD, AsyncInterruptStore, InterruptStore, InvalidInputError
from symfonic_store.db.schema import wakeups
from symfonic_store.server.metrics import ServiceMetrics

START = "2030-01-01 00:00:00"


@pytest.fixture
def clock() -> Iterator[FrozenDateTimeFactory]:
    """The clock, frozen at a whole second and moved only by the test."""
    with freeze_time(START, ignore=["_pytest.timing"]) as frozen:
        yield frozen


def native_mint(store: InterruptStore, thread_id: str, graph: str | None, interrupt_id: str = "a" * 32) -> str:
    """Record a LangGraph interrupt as the gateway of graph ``graph`` does (no graph run)."""
    store.record_waiting(
        thread_id,
        [{"interrupt_id": interrupt_id, "value": {"name": "wire"}, "task_id": "task-1",
          "checkpoint_id": "cp-1", "checkpoint_ns": "", "breakpoint": False}],
        graph=graph,
    )
    return interrupt_id


def wakeup_rows(store: InterruptStore) -> dict[str, dict[str, Any]]:
    """The wake-up table as stored, by thread: graph, dropped_by, dropped_at."""
    query = sa.select(wakeups.c.thread_id, wakeups.c.graph, wakeups.c.dropped_by, wakeups.c.dropped_at)
    with store.engine.connect() as conn:
        return {
            r.thread_id: {"graph": r.graph, "dropped_by": r.dropped_by, "dropped_at": r.dropped_at}
            for r in conn.execute(query)
        }


def owed_gauge(store: InterruptStore) -> float:
    """``symfonic_owed_wakeups`` as /metrics renders it."""
    for line in ServiceMetrics(store).render().decode().splitlines():
        if line.startswith("symfonic_owed_wakeups "):
            return float(line.split()[1])
    raise AssertionError("no symfonic_owed_wakeups in the metrics")


# --- the store ----------------------------------------------------------------------------


def test_a_sweep_for_one_graph_delivers_only_what_is_owed_to_it_or_to_no_graph(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """Graph 'refunds' is handed its own and the unnamed wake-ups, never 'payments''s, which stays owed to it; the report names it."""
    native_mint(store, "t-pay", "payments")
    native_mint(store, "t-ref", "refunds")
    marker = mint_stale(store, "t-marker", age=10)
    clock.tick(timedelta(seconds=61))
    silent = store.sweep(ttl_seconds=60)
    assert silent.owed == 3
    assert silent.owed_to == {"payments": 1, "refunds": 1, None: 1}
    assert wakeup_rows(store)["t-pay"]["graph"] == "payments"
    assert wakeup_rows(store)["t-marker"]["graph"] is None

    called: list[tuple[str, str, str]] = []
    report = store.sweep(ttl_seconds=60, on_expired=lambda *a: called.append(a), graph="refunds")
    assert sorted(t for t, _, _ in called) == ["t-marker", "t-ref"]
    assert sorted(t for t, _, _ in report.redelivered) == ["t-marker", "t-ref"]
    assert report.owed == 1 and report.owed_to == {"payments": 1}
    assert report.as_dict()["owed_to"] == [{"graph": "payments", "owed": 1}]
    assert "1 wake-up(s) still owed (1 to graph 'payments')" in str(report)
    advice = report.owed_advice()
    assert advice is not None
    assert "sweep --graph MODULE:ATTR" in advice and "wakeups --drop --graph payments --actor WHO" in advice
    assert [w["thread_id"] for w in store.list_wakeups()] == ["t-pay"]
    assert marker  # delivered to the graph that asked for the unnamed ones


def test_a_callback_whose_graph_does_not_hold_the_thread_leaves_the_wake_up_owed(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """NOT_HELD is neither a delivery nor a failure: the wake-up stays owed, untried, for the graph that holds it."""
    mint_stale(store, "t-elsewhere", age=10)
    clock.tick(timedelta(seconds=61))
    report = store.sweep(ttl_seconds=60, on_expired=lambda *a: NOT_HELD, graph="payments")
    assert [t for t, _, _ in report.not_held] == ["t-elsewhere"]
    assert report.redelivered == [] and report.wake_failures == []
    assert report.owed == 1 and report.owed_to == {None: 1}
    assert report.as_dict()["not_held"][0]["thread_id"] == "t-elsewhere"
    (owed,) = store.list_wakeups()
    assert (owed["thread_id"], owed["graph"], owed["attempts"]) == ("t-elsewhere", None, 0)
    # Released at once: the next sweep (of the right graph) takes it without waiting a lease.
    delivered = store.sweep(ttl_seconds=60, on_expired=lambda *a: True, graph="other")
    assert [t for t, _, _ in delivered.redelivered] == ["t-elsewhere"] and delivered.owed == 0


def test_dropped_wake_ups_are_recorded_and_no_longer_owed_delivered_or_counted(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """drop_wakeups records who and when in the wake-up table; listing, sweeps and the metrics gauge leave them out."""
    native_mint(store, "t-pay", "payments")
    mint_stale(store, "t-marker", age=10)
    clock.tick(timedelta(seconds=61))
    store.sweep(ttl_seconds=60)
    assert store.owed_wakeups() == 2 and owed_gauge(store) == 2
    listed = store.list_wakeups()
    assert [(w["graph"], w["thread_id"], w["reason"]) for w in listed] == [
        ("payments", "t-pay", "ttl"), (None, "t-marker", "ttl")
    ]
    assert listed[0]["expired_at"] == datetime(2030, 1, 1, 0, 1, 1, tzinfo=UTC)

    clock.tick(timedelta(seconds=5))
    dropped = store.drop_wakeups(graph="payments", actor="ops-oncall")
    assert [w["thread_id"] for w in dropped] == ["t-pay"]
    row = wakeup_rows(store)["t-pay"]
    assert row["dropped_by"] == "ops-oncall"
    assert row["dropped_at"] == datetime(2030, 1, 1, 0, 1, 6, tzinfo=UTC)
    assert store.owed_wakeups() == 1 and owed_gauge(store) == 1
    assert [w["thread_id"] for w in store.list_wakeups()] == ["t-marker"]

    called: list[str] = []
    report = store.sweep(ttl_seconds=60, on_expired=lambda t, i, r: called.append(t))
    assert called == ["t-marker"] and report.owed == 0  # never the dropped one
    assert wakeup_rows(store)["t-pay"]["dropped_by"] == "ops-oncall"  # the record stays

    with pytest.raises(InvalidInputError, match="no wake-up is owed to graph 'payments'"):
        store.drop_wakeups(graph="payments", actor="ops-oncall")
    with pytest.raises(InvalidInputError, match="actor"):
        store.drop_wakeups(graph="payments", actor="")


def test_drop_wakeups_of_no_named_graph(store: InterruptStore, clock: FrozenDateTimeFactory) -> None:
    """graph=None drops the wake-ups whose mint names no graph, and only those."""
    native_mint(store, "t-pay", "payments")
    mint_stale(store, "t-marker", age=10)
    clock.tick(timedelta(seconds=61))
    store.sweep(ttl_seconds=60)
    assert [w["thread_id"] for w in store.drop_wakeups(graph=None, actor="ops")] == ["t-marker"]
    assert [w["graph"] for w in store.list_wakeups()] == ["payments"]


async def test_the_async_store_lists_and_drops_wake_ups(astore: AsyncInterruptStore) -> None:
    """The async twin lists the owed wake-ups by graph and drops them the same way."""
    from symfonic_store import build_interrupt_marker

    marker = build_interrupt_marker(name="approval", interrupt_id="i-1", payload={})["_interrupt_pending"]
    marker["minted_at"] = 0.0
    await astore.mint("t-1", marker)
    await astore.sweep(ttl_seconds=60)
    assert [(w["graph"], w["thread_id"]) for w in await astore.list_wakeups()] == [(None, "t-1")]
    assert [w["thread_id"] for w in await astore.drop_wakeups(graph=None, actor="ops")] == ["t-1"]
    assert await astore.list_wakeups() == [] and await astore.owed_wakeups() == 0


# --- the command line ---------------------------------------------------------------------

GRAPH_MODULE = '''
"""A graph that pauses with plain interrupt(), named {name!r}: imported by --graph."""
import sqlite3
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    answers: list[Any]


def approve(state: State) -> dict:
    answer = interrupt({{"name": "approval", "amount": 999}})
    return {{"answers": [answer]}}


builder = StateGraph(State)
builder.add_node("approve", approve)
builder.add_edge(START, "approve")
builder.add_edge("approve", END)
checkpointer = SqliteSaver(sqlite3.connect({checkpoints!r}, check_same_thread=False))
graph = builder.compile(checkpointer=checkpointer, name={name!r})
'''


def _graph_module(tmp_path: Path, graph_name: str) -> str:
    """Write a module whose graph is named ``graph_name``, with its own checkpoints; its module name."""
    module = f"{graph_name}_{tmp_path.name}"
    (tmp_path / f"{module}.py").write_text(
        GRAPH_MODULE.format(name=graph_name, checkpoints=str(tmp_path / f"{graph_name}.db"))
    )
    return module


def _pause(db_url: str, tmp_path: Path, module_name: str, thread_id: str) -> tuple[Any, str]:
    """Run the module's graph through a gateway until it pauses; (the graph, the interrupt id)."""
    from symfonic_store import InterruptGateway

    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(str(tmp_path))
    with InterruptStore(db_url) as store:
        InterruptGateway(module.graph, store).invoke({}, {"configurable": {"thread_id": thread_id}})
        (opened,) = store.open_interrupts(thread_id)
    return module.graph, str(opened["interrupt_id"])


def test_sweep_of_another_graph_never_claims_a_wake_up_owed_to_payments(migrated_url: str, tmp_path: Path) -> None:
    """`sweep --graph refunds` leaves the wake-up owed to 'payments' owed (and says so on stderr); `sweep --graph payments` delivers it."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        orphan = mint_stale(store, "t-orphan", age=3600)  # no graph holds this thread
    payments, refunds = _graph_module(tmp_path, "payments"), _graph_module(tmp_path, "refunds")
    graph, interrupt_id = _pause(migrated_url, tmp_path, payments, "t-pay")
    config: Any = {"configurable": {"thread_id": "t-pay"}}

    silent = run_json("sweep", "--ttl", "0", "--format", "json", db=migrated_url)
    assert silent["owed"] == 2

    other = run_cli("sweep", "--ttl", "0", "--graph", f"{refunds}:graph", "--format", "json", db=migrated_url, cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    report = json.loads(other.stdout)
    assert report["redelivered"] == [] and report["woken"] == 0
    assert [n["thread_id"] for n in report["not_held"]] == ["t-orphan"]
    assert report["owed"] == 2
    assert report["owed_to"] == [{"graph": "payments", "owed": 1}, {"graph": None, "owed": 1}]
    assert graph.get_state(config).interrupts  # payments' graph is still paused
    notes = [line for line in other.stderr.splitlines() if "wake-up(s) still owed" in line]
    assert len(notes) == 1 and "graph 'payments'" in notes[0] and "no named graph" in notes[0]
    assert "sweep --graph MODULE:ATTR" in notes[0] and "wakeups --drop" in notes[0]

    own = run_json("sweep", "--ttl", "0", "--graph", f"{payments}:graph", "--format", "json", db=migrated_url, cwd=tmp_path)
    assert own["redelivered"] == [{"thread_id": "t-pay", "interrupt_id": interrupt_id, "reason": "ttl"}]
    assert own["woken"] == 1 and own["owed"] == 1
    assert own["owed_to"] == [{"graph": None, "owed": 1}]
    assert not graph.get_state(config).interrupts  # woken with the expiry answer
    with InterruptStore(migrated_url) as store:
        assert [(w["thread_id"], w["interrupt_id"]) for w in store.list_wakeups()] == [("t-orphan", orphan)]


def test_wakeups_lists_by_graph_and_drop_records_who_and_when(migrated_url: str) -> None:
    """`wakeups` shows the owed ones by graph (table and json); `--drop --graph X --actor A` records the drop; later lists leave it out."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        with freeze_time("2030-01-01 00:00:00", ignore=["_pytest.timing"]) as clock:
            native_mint(store, "t-pay", "payments")
            marker = mint_stale(store, "t-marker", age=10)
            clock.tick(timedelta(seconds=61))
            store.sweep(ttl_seconds=60)

    listed = run_cli("wakeups", db=migrated_url)
    assert listed.returncode == 0, listed.stderr
    assert "2 wake-up(s) owed (1 to payments, 1 to (none))" in listed.stdout
    lines = listed.stdout.splitlines()
    assert any("payments" in line and "t-pay" in line and "ttl" in line for line in lines)
    assert any("(none)" in line and "t-marker" in line and marker in line for line in lines)

    as_json = run_json("wakeups", "--format", "json", db=migrated_url)
    assert [(w["graph"], w["thread_id"]) for w in as_json] == [("payments", "t-pay"), (None, "t-marker")]
    assert as_json[0]["expired_at"] == "2030-01-01T00:01:01+00:00" and as_json[0]["attempts"] == 0
    assert [w["thread_id"] for w in run_json("wakeups", "--graph", "payments", "--format", "json", db=migrated_url)] == ["t-pay"]
    assert [w["thread_id"] for w in run_json("wakeups", "--unnamed", "--format", "json", db=migrated_url)] == ["t-marker"]

    dropped = run_cli("wakeups", "--drop", "--graph", "payments", "--actor", "ops-oncall", db=migrated_url)
    assert dropped.returncode == 0, dropped.stderr
    assert "dropped 1 wake-up(s) as 'ops-oncall'" in dropped.stdout and "t-pay" in dropped.stdout
    with InterruptStore(migrated_url) as store:
        row = wakeup_rows(store)["t-pay"]
        assert row["dropped_by"] == "ops-oncall" and row["dropped_at"] is not None
        assert store.owed_wakeups() == 1
    assert [w["thread_id"] for w in run_json("wakeups", "--format", "json", db=migrated_url)] == ["t-marker"]
    unnamed = run_json("wakeups", "--drop", "--unnamed", "--actor", "ops", "--format", "json", db=migrated_url)
    assert [w["thread_id"] for w in unnamed] == ["t-marker"]
    assert run_cli("wakeups", db=migrated_url).stdout.strip() == "no wake-ups are owed"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--drop", "--graph", "payments"), "--actor"),
        (("--drop", "--actor", "ops"), "--graph"),
        (("--actor", "ops"), "--actor"),
        (("--graph", "payments", "--unnamed"), "not both"),
        (("--graph", "nobody"), "no wake-up is owed to 'nobody'"),
        (("--drop", "--graph", "nobody", "--actor", "ops"), "no wake-up is owed to graph 'nobody'"),
    ],
)
def test_bad_wakeups_usage_is_a_clear_error_that_changes_nothing(
    migrated_url: str, args: tuple[str, ...], named: str
) -> None:
    """No --actor with --drop, no graph to drop, an unknown graph: one error line, exit 2, nothing dropped."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        with freeze_time("2030-01-01 00:00:00", ignore=["_pytest.timing"]) as clock:
            native_mint(store, "t-pay", "payments")
            clock.tick(timedelta(seconds=61))
            store.sweep(ttl_seconds=60)
    refused = run_cli("wakeups", *args, db=migrated_url)
    assert named in assert_clean_error(refused, 2)
    with InterruptStore(migrated_url) as store:
        assert [w["thread_id"] for w in store.list_wakeups()] == ["t-pay"]
        assert wakeup_rows(store)["t-pay"]["dropped_by"] is None


def _idle_graph() -> Any:
    """A real compiled graph whose checkpointer has never seen any thread."""
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        n: int

    builder = StateGraph(State)
    builder.add_node("step", lambda state: {"n": 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=InMemorySaver(), name="idle")


def test_make_graph_waker_leaves_a_thread_its_checkpointer_does_not_hold_owed(store: InterruptStore) -> None:
    """The ready waker returns NOT_HELD for a thread its graph never ran: not reported delivered, still owed."""
    from symfonic_store import make_graph_waker

    mint_stale(store, "t-other", age=3600)
    report = store.sweep(ttl_seconds=60, on_expired=make_graph_waker(_idle_graph()))
    assert [t for t, _, _ in report.not_held] == ["t-other"]
    assert report.redelivered == [] and report.owed == 1
    assert [w["thread_id"] for w in store.list_wakeups()] == ["t-other"]


async def test_the_async_waker_leaves_a_thread_its_checkpointer_does_not_hold_owed(
    astore: AsyncInterruptStore,
) -> None:
    """make_async_graph_waker does the same through aget_state, on the asyncio store."""
    from symfonic_store import build_interrupt_marker, make_async_graph_waker

    marker = build_interrupt_marker(name="approval", interrupt_id="i-1", payload={})["_interrupt_pending"]
    marker["minted_at"] = 0.0
    await astore.mint("t-other", marker)
    report = await astore.sweep(ttl_seconds=60, on_expired=make_async_graph_waker(_idle_graph()))
    assert [t for t, _, _ in report.not_held] == ["t-other"]
    assert report.owed == 1 and await astore.owed_wakeups() == 1


def test_a_drop_made_while_the_wake_up_is_being_delivered_keeps_its_record(
    store: InterruptStore, clock: FrozenDateTimeFactory
) -> None:
    """An operator drops the wake-up while the sweep's callback runs: the delivery does not erase who dropped it."""
    mint_stale(store, "t-1", age=3600)
    store.sweep(ttl_seconds=60)

    def drop_meanwhile(thread_id: str, interrupt_id: str, reason: str) -> None:
        store.drop_wakeups(graph=None, actor="ops")

    report = store.sweep(ttl_seconds=60, on_expired=drop_meanwhile)
    assert [t for t, _, _ in report.redelivered] == ["t-1"] and report.owed == 0
    assert wakeup_rows(store)["t-1"]["dropped_by"] == "ops"
