"""A breakpoint is minted only where one is declared (SPEC §8), never for a run in flight.

A thread whose run is between two nodes looks like a static breakpoint (next nodes, no
interrupt): the gateway mints ``bp-<checkpoint>`` only for a next node in the graph's or
the call's ``interrupt_before`` (or a checkpoint written by a node in
``interrupt_after``), and the store never while an answer's claim on the thread is live.
Real graphs, each gateway with its own store and LangGraph checkpointer on one database,
SQLite and PostgreSQL, ``invoke`` and ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from graph_rig import config_for, new_store, open_saver, ready
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from native_graphs import State, Wires

from symfonic_store import EXPIRED, MINTED, InterruptGateway, InterruptInProgressError

WAIT = 60  # seconds an Event may take before the test fails (never slept)


@pytest.fixture(params=["invoke", "ainvoke"])
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Gates:
    """Gateways on one graph shape, each with its own store and checkpointer."""

    def __init__(self, url: str, driver: str, stack: AsyncExitStack) -> None:
        self.url, self.driver, self.stack = url, driver, stack

    @property
    def is_async(self) -> bool:
        return self.driver == "ainvoke"

    async def gate(self, build: Callable[[Any], Any]) -> InterruptGateway:
        store = new_store(self.url, self.driver)
        await ready(store.setup())
        self.stack.push_async_callback(lambda: ready(store.aclose() if self.is_async else store.close()))
        saver = await self.stack.enter_async_context(open_saver(self.url, self.driver))
        return InterruptGateway(build(saver), store)

    async def invoke(self, gate: InterruptGateway, value: Any, thread_id: str, **kwargs: Any) -> Any:
        config = config_for(thread_id, actor="requester")
        if self.is_async:
            return await gate.ainvoke(value, config, **kwargs)
        return gate.invoke(value, config, **kwargs)

    async def answer(self, gate: InterruptGateway, thread_id: str, interrupt_id: str, actor: str) -> Any:
        if self.is_async:
            return await gate.aanswer(thread_id, interrupt_id, {"approved": True}, actor=actor)
        return gate.answer(thread_id, interrupt_id, {"approved": True}, actor=actor)

    async def s(self, gate: InterruptGateway, method: str, *args: Any, **kwargs: Any) -> Any:
        return await ready(getattr(gate.store, method)(*args, **kwargs))


class Announcing(BaseCheckpointSaver[Any]):
    """``saver``, which sets ``saved`` once each checkpoint is saved: LangGraph saves a
    step's checkpoint in the background while the next step runs (``durability="async"``),
    and the race needs the thread's checkpoint between the two nodes to be there."""

    def __init__(
        self, saver: BaseCheckpointSaver[Any], saved: threading.Event, hold: threading.Event | None = None
    ) -> None:
        super().__init__(serde=saver.serde)
        self.saver, self.saved, self.hold = saver, saved, hold

    def _held(self) -> None:
        """With ``hold``: the run waits, its checkpoint saved, until the test sets it."""
        if self.hold is not None:
            assert self.hold.wait(WAIT), "the test never released the winner's run"

    @property
    def config_specs(self) -> Any:
        return self.saver.config_specs

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        out = self.saver.put(config, checkpoint, metadata, new_versions)
        self.saved.set()
        self._held()
        return out

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        out = await self.saver.aput(config, checkpoint, metadata, new_versions)
        self.saved.set()
        await asyncio.to_thread(self._held)
        return out

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.saver.put_writes(config, writes, task_id, task_path)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await self.saver.aput_writes(config, writes, task_id, task_path)

    def get_tuple(self, config: Any) -> Any:
        return self.saver.get_tuple(config)

    async def aget_tuple(self, config: Any) -> Any:
        return await self.saver.aget_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Any:
        return self.saver.list(config, **kwargs)

    def alist(self, config: Any, **kwargs: Any) -> Any:
        return self.saver.alist(config, **kwargs)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.saver.get_next_version(current, channel)


@asynccontextmanager
async def gates(url: str, driver: str) -> AsyncIterator[Gates]:
    async with AsyncExitStack() as stack:
        yield Gates(url, driver, stack)


def approve_then_act(
    checkpointer: Any, wires: Wires, started: threading.Event, release: threading.Event, **compile: Any
) -> Any:
    """``interrupt()`` in ``approve``; then ``act`` wires the money once ``release`` is set
    (it sets ``started`` first: the run is in flight between the two nodes)."""

    def approve(state: State) -> dict[str, Any]:
        return {"answers": [interrupt({"name": "wire_approval", "amount": 70})]}

    def act(state: State) -> dict[str, Any]:
        started.set()
        assert release.wait(WAIT), "the test never released the winner's node"
        wires.send(70)
        return {"done": ["act"]}

    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_node("act", act)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=checkpointer, name="wire-act", **compile)


def plan_then_wire(checkpointer: Any, wires: Wires, **compile: Any) -> Any:
    """``plan`` then ``wire`` (which sends the money); breakpoints as ``compile`` says."""

    def plan(state: State) -> dict[str, Any]:
        return {"done": ["plan"]}

    def wire(state: State) -> dict[str, Any]:
        wires.send(999)
        return {"done": [*state.get("done", []), "wire"]}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("wire", wire)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "wire")
    builder.add_edge("wire", END)
    return builder.compile(checkpointer=checkpointer, name="wire-plan", **compile)


async def test_a_loser_reading_the_winners_run_in_flight_mints_no_breakpoint(migrated_url: str, driver: str) -> None:
    """The winner's node is held until the loser has read the thread (next == ("act",), no interrupt): no bp- mint, one wire, one audit record."""
    wires, started, release, saved = Wires(), threading.Event(), threading.Event(), threading.Event()

    def in_flight() -> bool:  # the winner's node runs and the checkpoint before it is saved
        return started.wait(WAIT) and saved.wait(WAIT)

    async with gates(migrated_url, driver) as g:
        winner = await g.gate(lambda saver: approve_then_act(Announcing(saver, saved), wires, started, release))
        loser = await g.gate(lambda saver: approve_then_act(saver, wires, started, release))
        out = await g.invoke(winner, {}, "t-race-bp")
        (paused,) = out["__interrupt__"]
        saved.clear()

        if g.is_async:
            running = asyncio.create_task(g.answer(winner, "t-race-bp", paused.id, "alice"))
            assert await asyncio.to_thread(in_flight)
            try:
                assert (await loser.graph.aget_state(config_for("t-race-bp"))).next == ("act",)
                with pytest.raises(InterruptInProgressError):
                    await g.answer(loser, "t-race-bp", paused.id, "bob")
            finally:
                release.set()
            await running
        else:
            with ThreadPoolExecutor(1) as pool:
                running_sync = pool.submit(winner.answer, "t-race-bp", paused.id, {"approved": True}, actor="alice")
                assert in_flight()
                try:
                    assert loser.graph.get_state(config_for("t-race-bp")).next == ("act",)
                    with pytest.raises(InterruptInProgressError):
                        await g.answer(loser, "t-race-bp", paused.id, "bob")
                finally:
                    release.set()
                running_sync.result(timeout=WAIT)

        assert wires.sent == [70]
        history = await g.s(winner, "history", "t-race-bp")
        assert [e.interrupt_id for e in history if e.type == MINTED] == [paused.id]
        assert not [e for e in history if e.type == EXPIRED]
        (record,) = await g.s(winner, "audit", thread_id="t-race-bp")
        assert (record.interrupt_id, record.outcome, record.actor) == (paused.id, "resumed", "alice")
        assert [(a["actor"], a["why"]) for a in record.attempts] == [("bob", "in_progress")]
        assert await g.s(winner, "open_interrupts", "t-race-bp") == []


async def test_a_declared_breakpoint_reached_under_a_live_claim_is_minted_by_the_winner(
    migrated_url: str, driver: str
) -> None:
    """interrupt_before=["act"]: the winner's run is held once the breakpoint's checkpoint is saved, its claim live; the loser reading it mints nothing; the winner then mints it, as its own."""
    wires, started, release, saved = Wires(), threading.Event(), threading.Event(), threading.Event()
    release.set()  # act is never reached in this test: the breakpoint stops before it
    hold = threading.Event()
    async with gates(migrated_url, driver) as g:
        winner = await g.gate(
            lambda saver: approve_then_act(Announcing(saver, saved, hold), wires, started, release, interrupt_before=["act"])
        )
        loser = await g.gate(lambda saver: approve_then_act(saver, wires, started, release, interrupt_before=["act"]))
        hold.set()
        out = await g.invoke(winner, {}, "t-claim-bp")
        (paused,) = out["__interrupt__"]
        saved.clear()
        hold.clear()

        running: Any
        pool = ThreadPoolExecutor(1)
        try:
            if g.is_async:
                running = asyncio.create_task(g.answer(winner, "t-claim-bp", paused.id, "alice"))
            else:
                running = pool.submit(winner.answer, "t-claim-bp", paused.id, {"approved": True}, actor="alice")
            assert await asyncio.to_thread(saved.wait, WAIT)
            try:
                with pytest.raises(InterruptInProgressError):
                    await g.answer(loser, "t-claim-bp", paused.id, "bob")
                assert [e.interrupt_id for e in await g.s(loser, "history", "t-claim-bp") if e.type == MINTED] == [paused.id]
            finally:
                hold.set()
            await (running if g.is_async else asyncio.to_thread(running.result, WAIT))
        finally:
            pool.shutdown()

        assert wires.sent == [] and not started.is_set()
        history = await g.s(winner, "history", "t-claim-bp")
        (stop,) = [e for e in history if e.type == MINTED and e.interrupt_id.startswith("bp-")]
        assert (stop.actor, stop.data["payload"]) == ("alice", {"next": ["act"]})
        (opened,) = await g.s(winner, "open_interrupts", "t-claim-bp")
        assert opened["interrupt_id"] == stop.interrupt_id


async def test_a_declared_interrupt_after_breakpoint_is_still_recorded(migrated_url: str, driver: str) -> None:
    """interrupt_after=["plan"]: the checkpoint plan wrote is a breakpoint, minted once and continued on approval; the wire runs once."""
    wires = Wires()
    async with gates(migrated_url, driver) as g:
        gate = await g.gate(lambda saver: plan_then_wire(saver, wires, interrupt_after=["plan"]))
        await g.invoke(gate, {}, "t-after")
        (opened,) = await g.s(gate, "open_interrupts", "t-after")
        assert opened["interrupt_id"].startswith("bp-") and opened["payload"] == {"next": ["wire"]}
        assert wires.sent == []
        await g.answer(gate, "t-after", opened["interrupt_id"], "alice")
        assert wires.sent == [999]
        (record,) = await g.s(gate, "audit", thread_id="t-after")
        assert (record.outcome, record.actor, record.decision) == ("resumed", "alice", "approve")


async def test_a_calls_own_interrupt_before_is_a_breakpoint_another_gateway_can_answer(
    migrated_url: str, driver: str
) -> None:
    """invoke(..., interrupt_before=["wire"]) on a graph that declares none: the breakpoint is minted, and a gateway without the call's arguments answers it once."""
    wires = Wires()
    async with gates(migrated_url, driver) as g:
        caller = await g.gate(lambda saver: plan_then_wire(saver, wires))
        approver = await g.gate(lambda saver: plan_then_wire(saver, wires))
        await g.invoke(caller, {}, "t-call-bp", interrupt_before=["wire"])
        (opened,) = await g.s(caller, "open_interrupts", "t-call-bp")
        assert opened["interrupt_id"].startswith("bp-") and opened["payload"] == {"next": ["wire"]}
        await g.answer(approver, "t-call-bp", opened["interrupt_id"], "alice")
        assert wires.sent == [999]
        (record,) = await g.s(caller, "audit", thread_id="t-call-bp")
        assert (record.outcome, record.actor, record.requested_by) == ("resumed", "alice", "requester")


async def test_a_pause_nobody_declared_is_no_breakpoint(migrated_url: str, driver: str) -> None:
    """A run stopped between two undeclared nodes (its step limit): no breakpoint guards it, invoke(None) continues it, nothing is minted."""
    from langgraph.errors import GraphRecursionError

    wires = Wires()
    async with gates(migrated_url, driver) as g:
        gate = await g.gate(lambda saver: plan_then_wire(saver, wires))
        limited = {**config_for("t-limit", actor="requester"), "recursion_limit": 1}
        with pytest.raises(GraphRecursionError):
            await (gate.ainvoke({}, limited) if g.is_async else asyncio.to_thread(gate.invoke, {}, limited))
        state = gate.graph.aget_state(config_for("t-limit")) if g.is_async else gate.graph.get_state(config_for("t-limit"))
        assert (await ready(state)).next == ("wire",)
        await g.invoke(gate, None, "t-limit")
        assert wires.sent == [999]
        assert [e.type for e in await g.s(gate, "history", "t-limit")] == []


def test_no_breakpoint_is_minted_while_an_answers_claim_is_live(store: Any) -> None:
    """A declared breakpoint offered while another answer holds its claim is not minted; once the claim settles it is."""
    native = {"interrupt_id": "a" * 32, "value": {"name": "wire"}, "task_id": "task-1", "checkpoint_id": "c-1",
              "checkpoint_ns": "", "breakpoint": False}
    stop = {"interrupt_id": "bp-c-2", "value": {"next": ["act"]}, "task_id": None, "checkpoint_id": "c-2",
            "checkpoint_ns": "", "breakpoint": True, "declared": True}
    assert store.record_waiting("t-claimed", [native], actor="requester") == ["a" * 32]
    store.claim("t-claimed", "a" * 32, {"approved": True}, actor="alice")
    assert store.record_waiting("t-claimed", [stop]) == []
    assert [e.interrupt_id for e in store.history("t-claimed") if e.type == MINTED] == ["a" * 32]
    assert not [e for e in store.history("t-claimed") if e.type == EXPIRED]  # the claimed one stays
    store.confirm("t-claimed", "a" * 32)
    assert store.record_waiting("t-claimed", [stop], actor="alice") == ["bp-c-2"]
    undeclared = {**stop, "interrupt_id": "bp-c-3", "checkpoint_id": "c-3", "declared": False}
    assert store.record_waiting("t-claimed", [undeclared]) == []
    assert [e.interrupt_id for e in store.history("t-claimed") if e.type == MINTED] == ["a" * 32, "bp-c-2"]


def test_a_claim_the_sweep_marked_unknown_no_longer_holds_breakpoints_back(store: Any) -> None:
    """A claim whose process is gone (the sweep recorded it as ``outcome_unknown``) is not a
    run in flight: a declared breakpoint of the thread is minted again."""
    from freezegun import freeze_time

    native = {"interrupt_id": "b" * 32, "value": {"name": "wire"}, "task_id": "task-1", "checkpoint_id": "c-1",
              "checkpoint_ns": "", "breakpoint": False}
    stop = {"interrupt_id": "bp-c-9", "value": {"next": ["act"]}, "task_id": None, "checkpoint_id": "c-9",
            "checkpoint_ns": "", "breakpoint": True, "declared": True}
    with freeze_time("2026-12-07 12:00:00") as clock:
        store.record_waiting("t-lapsed", [native], actor="requester")
        store.claim("t-lapsed", "b" * 32, {"approved": True}, actor="alice")
        assert store.record_waiting("t-lapsed", [stop]) == []  # live: held back
        clock.tick(3600)
        report = store.sweep()
        assert ("t-lapsed", "b" * 32, "outcome_unknown") in report.claims_settled
        assert store.record_waiting("t-lapsed", [stop], actor="ops") == ["bp-c-9"]
