"""``store.checkpointer()``: each step's checkpoint and the events it caused, one transaction.

A graph compiled with the store's own checkpointer keeps its checkpoints in the store's
database; what the marker router and node, the gateway and the recording checkpointer
record commits inside the checkpointer's ``put``/``put_writes`` transactions. The
write transactions are counted where the store opens them (``run_write``), told apart
by whether the checkpointer opened them: a step adds none of the store's own, and the
checkpointer opens at most one per write of LangGraph's (on SQLite, writes that queue
together commit together). Answers are still admitted before the graph runs (one
transaction each).
"""

from __future__ import annotations

import collections
import contextvars
import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from consistency import assert_consistent
from graph_rig import config_for, new_store, open_own_rig, ready
from langchain_core.messages import HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from native_graphs import Wires, node_graph

from symfonic_store import InterruptGateway
from symfonic_store.langgraph import checkpointer as own
from symfonic_store.langgraph import saver_sql, saver_steps, saver_writer
from symfonic_store.store import execute

DRIVERS = ["invoke", "ainvoke"]


class Counts:
    """Write transactions: the checkpointer's, the store's own, and the checkpointer's writes."""

    def __init__(self) -> None:
        self.checkpointer = 0
        self.own = 0
        self.saver: collections.Counter[str] = collections.Counter()

    def reset(self) -> None:
        self.checkpointer = self.own = 0
        self.saver.clear()

    @property
    def saver_writes(self) -> int:
        return self.saver["put"] + self.saver["put_writes"]


_IN_CHECKPOINTER: contextvars.ContextVar[bool] = contextvars.ContextVar("in_checkpointer", default=False)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    seen = Counts()
    real_write = execute.run_write

    def run_write(conn: Any, work: Any, **options: Any) -> Any:
        # A retried transaction (a lost race) counts once.
        if _IN_CHECKPOINTER.get():
            seen.checkpointer += 1
        else:
            seen.own += 1
        return real_write(conn, work, **options)

    monkeypatch.setattr(execute, "run_write", run_write)
    for name in ("put", "put_writes"):
        real = getattr(saver_steps.BaseStoreCheckpointer, "_" + name)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            seen.saver[_name] += 1  # one put / put_writes of LangGraph's
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(saver_steps.BaseStoreCheckpointer, "_" + name, counted)
    for cls in (own.StoreCheckpointer, own.AsyncStoreCheckpointer):
        real_run = cls._run

        if cls is own.StoreCheckpointer:

            def marked(self: Any, op: Any, _real: Any = real_run) -> Any:
                token = _IN_CHECKPOINTER.set(True)
                try:
                    return _real(self, op)
                finally:
                    _IN_CHECKPOINTER.reset(token)
        else:

            async def marked(self: Any, op: Any, _real: Any = real_run) -> Any:  # type: ignore[misc]
                token = _IN_CHECKPOINTER.set(True)
                try:
                    return await _real(self, op)
                finally:
                    _IN_CHECKPOINTER.reset(token)

        monkeypatch.setattr(cls, "_run", marked)
    yield seen


async def run(graph: Any, driver: str, value: Any, thread_id: str, **configurable: Any) -> Any:
    config = config_for(thread_id, **configurable)
    if driver == "ainvoke":
        return await graph.ainvoke(value, config)
    return graph.invoke(value, config)


def types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_recorded_conversation_adds_no_commit_of_its_own_per_step(
    migrated_url: str, driver: str, counts: Counts
) -> None:
    """Five route decisions, a mint and a resume: one transaction per checkpointer write, plus the admission."""
    async with open_own_rig(migrated_url, driver) as rig:
        counts.reset()
        interrupt_id = await rig.start("t-1")
        assert counts.saver_writes > 0
        assert counts.own == 0  # the router's records rode along with LangGraph's writes
        assert 0 < counts.checkpointer <= counts.saver_writes  # writes that queue together commit together
        command = await rig.s("resume", "t-1", interrupt_id, {"approved": True}, actor="alice")
        assert counts.own == 1  # the admission: before the graph runs
        out = await rig.invoke(command, "t-1")
        assert "refunded" in out["messages"][-1].content and rig.ledger.count == 1
        assert counts.own == 1 and counts.checkpointer <= counts.saver_writes
        events = await rig.s("history", "t-1")
        assert collections.Counter(types(events)) == {
            "route.decided": 5, "interrupt.minted": 1, "interrupt.resumed": 1,
        }
        assert types(events)[:2] == ["route.decided", "interrupt.minted"]
        assert len(rig.saver._steps) == 0  # nothing left waiting for a step
        assert_consistent(rig.store) if driver == "invoke" else None


@pytest.mark.parametrize("durability", ["sync", "exit"])
async def test_every_durability_mode_records_the_whole_run(migrated_url: str, durability: str) -> None:
    """With durability sync or exit (one checkpoint per run) the same events are recorded, none left behind."""
    async with open_own_rig(migrated_url, "invoke") as rig:
        config = config_for("t-d", actor="alice")
        paused = rig.graph.invoke({"messages": [HumanMessage("Please refund $420 to order 1181.")]}, config, durability=durability)
        interrupt_id = paused["__interrupt__"][0].value["interrupt_id"]
        assert types(rig.store.history("t-d")) == ["route.decided", "interrupt.minted", "route.decided"]
        command = rig.store.resume("t-d", interrupt_id, {"approved": True}, actor="alice")
        rig.graph.invoke(command, config, durability=durability)
        assert collections.Counter(types(rig.store.history("t-d")))["route.decided"] == 5
        assert len(rig.saver._steps) == 0


async def test_a_step_langgraph_could_not_save_records_nothing(migrated_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """When saving the step that raised the marker fails, neither its mint nor its route decision is recorded."""
    async with open_own_rig(migrated_url, "invoke") as rig:
        real_call = saver_sql.SaverSql.call

        def failing(self: Any, conn: Any, method: str, *args: Any, **kwargs: Any) -> Any:
            if method in ("put", "put_writes") and "approval_required" in repr(args):
                raise RuntimeError("disk full")  # every save that carries the marker
            return real_call(self, conn, method, *args, **kwargs)

        monkeypatch.setattr(saver_sql.SaverSql, "call", failing)
        with pytest.raises(RuntimeError, match="disk full"):
            # "sync": the run stops at the step LangGraph could not save (with "async"
            # it runs one step further and saves that step's writes anyway).
            rig.graph.invoke(
                {"messages": [HumanMessage("Please refund $420 to order 1181.")]},
                config_for("t-fail"),
                durability="sync",
            )
        events = rig.store.history("t-fail")
        assert "interrupt.minted" not in types(events)
        assert [e.data["route"] for e in events if e.type == "route.decided"] == ["continue"]
        assert rig.store.list_pending() == []
        assert len(rig.saver._steps) == 0  # dropped with the transaction


@pytest.mark.parametrize("driver", DRIVERS)
async def test_gateway_mints_and_confirmations_commit_in_the_graphs_steps(
    migrated_url: str, driver: str, counts: Counts
) -> None:
    """A native interrupt: the mint (with the graph's name and requester) and the confirmation ride the steps; only the claim commits alone."""
    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        wires = Wires()
        gate = InterruptGateway(node_graph(store.checkpointer(), wires), store)
        call = gate.ainvoke if driver == "ainvoke" else gate.invoke
        counts.reset()
        out = await ready(call({}, config_for("t-g", actor="requester")))
        (paused,) = out["__interrupt__"]
        assert counts.own == 0 and 0 < counts.checkpointer <= counts.saver_writes
        (opened,) = await ready(store.open_interrupts("t-g"))
        assert opened["interrupt_id"] == paused.id
        assert (opened["graph"], opened["actor"]) == ("wire-node", "requester")

        counts.reset()
        answer = gate.aanswer if driver == "ainvoke" else gate.answer
        await ready(answer("t-g", paused.id, {"approved": True}, actor="alice"))
        assert wires.sent == [999]
        assert counts.own == 1  # the claim
        assert counts.checkpointer <= counts.saver_writes
        events = await ready(store.history("t-g"))
        (resumed,) = [e for e in events if e.type == "interrupt.resumed"]
        assert (resumed.actor, resumed.data["via"]) == ("alice", "gateway")
        assert await ready(store.open_interrupts("t-g")) == []
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


@pytest.mark.parametrize("driver", DRIVERS)
async def test_direct_answers_are_recorded_in_the_step_that_takes_them(migrated_url: str, driver: str) -> None:
    """Without the gateway: a refused answer is not_taken (and not kept), the next one resumed via direct."""
    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        wires = Wires()
        graph = node_graph(store.checkpointer(), wires)
        (paused,) = (await run(graph, driver, {}, "t-d", actor="requester"))["__interrupt__"]
        with pytest.raises(ValueError):
            await run(graph, driver, Command(resume={paused.id: "bad"}), "t-d", actor="mallory")
        await run(graph, driver, Command(resume={paused.id: {"approved": True}}), "t-d", actor="carol")
        assert wires.sent == [999]
        events = await ready(store.history("t-d"))
        (rejected,) = [e for e in events if e.type == "interrupt.resume_rejected"]
        (resumed,) = [e for e in events if e.type == "interrupt.resumed"]
        assert (rejected.actor, rejected.data["why"], rejected.data["via"]) == ("mallory", "not_taken", "direct")
        assert (resumed.actor, resumed.data["via"], resumed.data["response"]) == ("carol", "direct", {"approved": True})
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


def snapshot(store: Any, thread_id: str) -> tuple[Any, ...]:
    return (store.history(thread_id), store.audit(thread_id=thread_id), list(store.replay(thread_id)))


async def test_pruning_and_deleting_checkpoints_never_delete_events(migrated_url: str) -> None:
    """keep_latest, delete_for_runs, prune(delete) and delete_thread: the audit, replay and verify of the thread are unchanged."""
    async with open_own_rig(migrated_url, "invoke") as rig:
        store, saver = rig.store, rig.saver
        for thread_id in ("t-a", "t-b"):
            config = config_for(thread_id, actor="alice", run_id=f"run-{thread_id}")
            paused = rig.graph.invoke({"messages": [HumanMessage("Please refund $420 to order 1181.")]}, config)
            command = store.resume(thread_id, paused["__interrupt__"][0].value["interrupt_id"], {"approved": True}, actor="alice")
            rig.graph.invoke(command, config)
        before = {t: snapshot(store, t) for t in ("t-a", "t-b")}
        total = len(store.events())
        assert len(list(saver.list(config_for("t-a")))) > 2

        saver.prune(["t-a"], strategy="keep_latest")
        assert len(list(saver.list(config_for("t-a")))) == 1
        assert rig.graph.get_state(config_for("t-a")).values["messages"][-1].content.startswith("Done")
        saver.delete_for_runs(["run-t-b"])
        assert list(saver.list(config_for("t-b"))) == []
        saver.prune(["t-a"], strategy="delete")
        saver.delete_thread("t-b")
        assert list(saver.list(None)) == []

        assert {t: snapshot(store, t) for t in ("t-a", "t-b")} == before
        assert len(store.events()) == total
        assert [r.outcome for r in store.audit()] == ["resumed", "resumed"]
        assert store.verify().ok
        assert_consistent(store)


async def test_deleting_a_paused_thread_closes_what_it_waited_on(store: Any) -> None:
    """LangGraph waits on nothing on a deleted thread: its open interrupt is expired (superseded), its mint kept."""
    saver = store.checkpointer()
    graph = node_graph(saver, Wires())
    (paused,) = graph.invoke({}, config_for("t-x"))["__interrupt__"]
    assert [i["interrupt_id"] for i in store.open_interrupts("t-x")] == [paused.id]
    saver.delete_thread("t-x")
    assert store.open_interrupts("t-x") == []
    minted, expired = store.history("t-x")
    assert (minted.type, expired.type) == ("interrupt.minted", "interrupt.expired")
    assert expired.data == {"reason": "superseded", "detected_by": "gateway"}


async def test_a_copied_thread_waits_on_what_the_source_waited_on_and_is_recorded(store: Any) -> None:
    """copy_thread copies the checkpoints, not the events; the copy's interrupt is minted there and answerable."""
    saver = store.checkpointer()
    wires = Wires()
    graph = node_graph(saver, wires)
    (paused,) = graph.invoke({}, config_for("t-src", actor="requester"))["__interrupt__"]
    source_events = store.history("t-src")
    saver.copy_thread("t-src", "t-dst")
    assert graph.get_state(config_for("t-dst")).interrupts[0].id == paused.id
    assert store.history("t-src") == source_events
    (copied,) = store.open_interrupts("t-dst")
    assert copied["interrupt_id"] == paused.id and copied["actor"] is None
    graph.invoke(Command(resume={paused.id: {"approved": True}}), config_for("t-dst", actor="carol"))
    assert wires.sent == [999]
    assert types(store.history("t-dst")) == ["interrupt.minted", "interrupt.resumed"]
    assert [i["interrupt_id"] for i in store.open_interrupts("t-src")] == [paused.id]


def _concat(state: list[Any], writes: list[list[Any]]) -> list[Any]:
    return [*state, *(x for w in writes for x in w)]


class DeltaLog(TypedDict):
    items: Annotated[list[Any], DeltaChannel(_concat, snapshot_frequency=50)]
    n: Annotated[int, operator.add]


async def test_keep_latest_refuses_a_thread_with_a_delta_channel(store: Any) -> None:
    """A DeltaChannel rebuilds its value from older checkpoints: keep_latest refuses, and deletes nothing."""
    builder = StateGraph(DeltaLog)
    builder.add_node("step", lambda s: {"items": [s.get("n", 0)], "n": 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    saver = store.checkpointer()
    graph = builder.compile(checkpointer=saver)
    for _ in range(3):
        graph.invoke({"n": 0}, config_for("t-delta"))
    before = len(list(saver.list(config_for("t-delta"))))
    with pytest.raises(NotImplementedError, match="DeltaChannel"):
        saver.prune(["t-delta"], strategy="keep_latest")
    assert len(list(saver.list(config_for("t-delta")))) == before
    assert graph.get_state(config_for("t-delta")).values["items"] == [0, 1, 2]


async def test_the_async_twin_refuses_the_sync_api_and_the_sync_twin_runs_under_ainvoke(migrated_url: str) -> None:
    """AsyncInterruptStore's checkpointer says to use ainvoke; InterruptStore's works from ainvoke too."""
    astore = new_store(migrated_url, "ainvoke")
    await astore.setup()
    try:
        with pytest.raises(TypeError, match="async API"):
            node_graph(astore.checkpointer(), Wires()).invoke({}, config_for("t-1"))
    finally:
        await astore.aclose()
    store = new_store(migrated_url, "invoke")
    store.setup()
    try:
        graph = node_graph(store.checkpointer(), Wires())
        (paused,) = (await graph.ainvoke({}, config_for("t-2")))["__interrupt__"]
        assert [i["interrupt_id"] for i in store.open_interrupts("t-2")] == [paused.id]
    finally:
        store.close()


def test_sqlite_writes_that_queue_together_commit_together_and_a_bad_one_fails_alone(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers queued behind one SQLite commit share the next; the one that cannot be saved fails alone, the rest are saved."""
    import os
    import threading
    import time

    from symfonic_store import InterruptStore

    store = InterruptStore(sqlite_url)
    store.setup()
    saver = store.checkpointer()
    saver.setup()
    config = config_for("t-q", checkpoint_ns="")
    checkpoint = {
        "v": 4, "id": "1f000000-0000-6000-8000-000000000009", "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {}, "channel_versions": {}, "versions_seen": {}, "updated_channels": None,
    }
    stored = saver.put(config, checkpoint, {"source": "input", "step": -1}, {})
    writer = saver_writer.sqlite_writer(store.engine)
    outcomes: dict[int, BaseException | None] = {}

    def write(n: int) -> None:
        value: Any = object() if n == 3 else {"n": n}  # object(): JSON-plus refuses it
        try:
            saver.put_writes(stored, [("x", value)], f"task-{n}")
            outcomes[n] = None
        except BaseException as exc:
            outcomes[n] = exc

    groups = []
    real_commit = saver_writer.SqliteWriter._commit

    def counted(conn: Any, *, group: Any) -> None:
        groups.append(len(group))
        real_commit(conn, group=group)

    monkeypatch.setattr(saver_writer.SqliteWriter, "_commit", staticmethod(counted))
    try:
        with writer.lock:  # a commit in progress: everyone queues behind it
            threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while len(writer._queued) < 6 and time.monotonic() < deadline:
                os.sched_yield()
            assert len(writer._queued) == 6
        for t in threads:
            t.join()
    finally:
        store.close()
    assert groups[0] == 6  # the six queued writes went in one transaction first
    assert isinstance(outcomes.pop(3), TypeError)
    assert set(outcomes.values()) == {None}
    with InterruptStore(sqlite_url) as again:
        found = again.checkpointer().get_tuple(stored)
    assert found is not None
    assert sorted(w[0] for w in found.pending_writes or ()) == [f"task-{n}" for n in (0, 1, 2, 4, 5)]
