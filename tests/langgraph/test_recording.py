"""Answers and interrupts that bypass the gateway are still recorded (SPEC §8).

Graphs compiled with ``store.recording_checkpointer(saver)`` are invoked directly, as
any LangGraph user would; the store records every interrupt they raise and every
answer LangGraph consumes, with the actor of the call's config and ``via: "direct"``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from graph_rig import config_for, new_store, open_saver, ready
from langgraph.types import Command
from native_graphs import Wires, breakpoint_graph, node_graph

from symfonic_store import InterruptAlreadyResolvedError, InterruptGateway, InterruptInProgressError

DRIVERS = ["invoke", "ainvoke"]


async def run(graph: Any, driver: str, value: Any, thread_id: str, **configurable: Any) -> Any:
    config = config_for(thread_id, **configurable)
    if driver == "ainvoke":
        return await graph.ainvoke(value, config)
    return graph.invoke(value, config)


def of_type(events: list[Any], type_: str) -> list[Any]:
    return [e for e in events if e.type == type_]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_direct_answer_is_recorded_with_the_config_actor(migrated_url: str, driver: str) -> None:
    """graph.invoke(Command(resume=...)) without the gateway: mint and resume recorded, via direct."""
    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            wires = Wires()
            graph = node_graph(store.recording_checkpointer(saver), wires)
            out = await run(graph, driver, {}, "t-direct", actor="requester")
            (paused,) = out["__interrupt__"]
            (opened,) = await ready(store.open_interrupts("t-direct"))
            assert opened["interrupt_id"] == paused.id and opened["actor"] == "requester"

            await run(graph, driver, Command(resume={paused.id: {"approved": True}}), "t-direct", actor="carol")
            assert wires.sent == [999]
            events = await ready(store.history("t-direct"))
            (resumed,) = of_type(events, "interrupt.resumed")
            assert resumed.actor == "carol" and resumed.data["via"] == "direct"
            assert resumed.data["response"] == {"approved": True}
            assert await ready(store.open_interrupts("t-direct")) == []
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_direct_answer_the_node_raises_on_is_not_taken_and_not_kept(migrated_url: str, driver: str) -> None:
    """A direct answer the node raises on: recorded not_taken, and the next answer is the one the node receives."""
    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            wires = Wires()
            graph = node_graph(store.recording_checkpointer(saver), wires)
            (paused,) = (await run(graph, driver, {}, "t-raise"))["__interrupt__"]
            with pytest.raises(ValueError):
                await run(graph, driver, Command(resume={paused.id: "bad"}), "t-raise", actor="mallory")
            (rejected,) = of_type(await ready(store.history("t-raise")), "interrupt.resume_rejected")
            assert rejected.actor == "mallory" and rejected.data["why"] == "not_taken"
            assert rejected.data["via"] == "direct"
            await run(graph, driver, Command(resume={paused.id: {"approved": True}}), "t-raise", actor="alice")
            assert wires.sent == [999]
            (resumed,) = of_type(await ready(store.history("t-raise")), "interrupt.resumed")
            assert resumed.actor == "alice"
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


async def test_a_direct_invoke_past_a_refused_breakpoint_is_recorded_as_a_bypass(migrated_url: str) -> None:
    """A breakpoint refused through the gateway, then run past with invoke(None): the bypass is in the audit."""
    store = new_store(migrated_url, "invoke")
    store.setup()
    try:
        async with open_saver(migrated_url, "invoke") as saver:
            wires = Wires()
            graph = breakpoint_graph(store.recording_checkpointer(saver), wires)
            gate = InterruptGateway(graph, store)
            gate.invoke({}, config_for("t-bypass"))
            (opened,) = store.open_interrupts("t-bypass")
            gate.answer("t-bypass", opened["interrupt_id"], {"approved": False}, actor="bob")
            graph.invoke(None, config_for("t-bypass", actor="mallory"))
            assert wires.sent == [999]  # the database cannot stop a direct run: it records it
            events = store.history("t-bypass")
            bypass = [e for e in of_type(events, "interrupt.resume_rejected") if e.data.get("via") == "direct"]
            assert [e.actor for e in bypass] == ["mallory"]
            assert "refused" in bypass[0].data["error"]
    finally:
        store.close()


async def test_racing_answers_through_gateways_in_threads_admit_exactly_one(migrated_url: str) -> None:
    """Eight callers answer one interrupt at once, each with its own gateway: one wire, seven refusals recorded."""
    store = new_store(migrated_url, "invoke")
    store.setup()
    try:
        async with open_saver(migrated_url, "invoke") as saver:
            wires = Wires()
            graph = node_graph(saver, wires)
            (paused,) = InterruptGateway(graph, store).invoke({}, config_for("t-race"))["__interrupt__"]
            barrier = threading.Barrier(8)
            outcomes: list[str] = []

            def answer(i: int) -> None:
                gate = InterruptGateway(graph, store)
                barrier.wait()
                try:
                    gate.answer("t-race", paused.id, {"approved": True}, actor=f"approver-{i}")
                    outcomes.append("applied")
                except (InterruptInProgressError, InterruptAlreadyResolvedError) as exc:
                    outcomes.append(type(exc).__name__)

            threads = [threading.Thread(target=answer, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert outcomes.count("applied") == 1 and len(outcomes) == 8
            assert wires.sent == [999]
            events = store.history("t-race")
            assert len(of_type(events, "interrupt.resumed")) == 1
            assert len(of_type(events, "interrupt.resume_rejected")) == 7
    finally:
        store.close()


async def test_racing_async_answers_admit_exactly_one(migrated_url: str) -> None:
    """Eight concurrent aanswer() calls on the async store: one applied, seven refused."""
    store = new_store(migrated_url, "ainvoke")
    await store.setup()
    try:
        async with open_saver(migrated_url, "ainvoke") as saver:
            wires = Wires()
            gate = InterruptGateway(node_graph(saver, wires), store)
            (paused,) = (await gate.ainvoke({}, config_for("t-arace")))["__interrupt__"]

            async def answer(i: int) -> str:
                try:
                    await gate.aanswer("t-arace", paused.id, {"approved": True}, actor=f"a-{i}")
                    return "applied"
                except (InterruptInProgressError, InterruptAlreadyResolvedError) as exc:
                    return type(exc).__name__

            outcomes = await asyncio.gather(*(answer(i) for i in range(8)))
            assert outcomes.count("applied") == 1
            assert wires.sent == [999]
    finally:
        await store.aclose()
