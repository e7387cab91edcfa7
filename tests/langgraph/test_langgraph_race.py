"""Approvers racing on one interrupt of a real graph: one wins, the approved action runs once.

Each approver has its own store (its own engine and connections), and with ``invoke``
its own thread, lined up on a ``threading.Barrier``; with ``ainvoke`` its own
``AsyncInterruptStore``, lined up on an ``asyncio.Barrier``. Every case runs with the
store and the checkpointer on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from typing import Any

import pytest
from graph_rig import Rig, config_for, new_store, open_rig, open_saver, ready, tool_messages
from langgraph.types import Command

from symfonic_store import (
    RESUME_REJECTED,
    RESUMED,
    InterruptAlreadyResolvedError,
    SymfonicStoreError,
)
from symfonic_store.demo import build_agent_graph, refund_tools

APPROVERS = ("alice", "bob", "carol", "dave")


@pytest.fixture(params=["invoke", "ainvoke"])
def driver(request: pytest.FixtureRequest) -> str:
    """How the graph is driven: ``invoke`` + InterruptStore, or ``ainvoke`` + AsyncInterruptStore."""
    return str(request.param)


@pytest.fixture
async def rig(migrated_url: str, driver: str) -> AsyncIterator[Rig]:
    """The refund agent with a store and a checkpointer on one database."""
    async with open_rig(migrated_url, driver) as r:
        yield r


def answer_of(actor: str) -> dict[str, Any]:
    return {"approved": True, "by": actor}


async def at_once(rig: Rig, attempt: Callable[[Any, str], Any], parties: list[Any]) -> list[Any]:
    """Run ``attempt(party, actor)`` for every approver at the same instant; errors are results."""
    if rig.is_async:
        abarrier = asyncio.Barrier(len(APPROVERS))

        async def arun(party: Any, actor: str) -> Any:
            await abarrier.wait()
            try:
                return await attempt(party, actor)
            except SymfonicStoreError as exc:
                return exc

        return list(await asyncio.gather(*(arun(p, a) for p, a in zip(parties, APPROVERS, strict=True))))

    barrier = threading.Barrier(len(APPROVERS), timeout=30)

    def run(party: Any, actor: str) -> Any:
        barrier.wait()
        try:
            return attempt(party, actor)
        except SymfonicStoreError as exc:
            return exc

    with ThreadPoolExecutor(len(APPROVERS)) as pool:
        return list(pool.map(run, parties, APPROVERS))


async def race_store_resume(rig: Rig, thread_id: str, interrupt_id: str) -> dict[str, Any]:
    """Four approvers call ``store.resume`` at once, each through its own store."""
    stores = [new_store(rig.url, rig.driver) for _ in APPROVERS]
    try:
        for s in stores:  # connect and check the schema before lining up
            assert await ready(s.pending(thread_id)) is not None
        results = await at_once(
            rig,
            lambda s, actor: s.resume(thread_id, interrupt_id, answer_of(actor), actor=actor),
            stores,
        )
    finally:
        for s in stores:
            await ready(s.aclose() if rig.is_async else s.close())
    return dict(zip(APPROVERS, results, strict=True))


def split(results: dict[str, Any]) -> tuple[str, Command[Any], dict[str, Exception]]:
    commands = {a: r for a, r in results.items() if isinstance(r, Command)}
    errors = {a: r for a, r in results.items() if not isinstance(r, Command)}
    assert len(commands) == 1, results
    ((winner, command),) = commands.items()
    return winner, command, errors


async def test_four_approvers_one_command_and_one_refund(rig: Rig) -> None:
    """Four concurrent store.resume calls give one command and three recorded refusals; the refund runs once."""
    iid = await rig.start("t-race")
    tool_call_id = (await rig.s("pending", "t-race"))["tool_call_id"]

    winner, command, errors = split(await race_store_resume(rig, "t-race", iid))

    assert all(isinstance(e, InterruptAlreadyResolvedError) for e in errors.values()), errors
    history = await rig.s("history", "t-race")
    (resumed,) = [e for e in history if e.type == RESUMED]
    assert resumed.actor == winner and resumed.data["response"] == answer_of(winner)
    rejected = [e for e in history if e.type == RESUME_REJECTED]
    assert sorted(e.actor for e in rejected) == sorted(errors)
    assert {e.data["why"] for e in rejected} == {"already_resolved"}
    assert {e.actor: e.data["response"] for e in rejected} == {a: answer_of(a) for a in errors}

    out = await rig.invoke(command, "t-race")
    (answer,) = tool_messages(out["messages"], tool_call_id)
    assert json.loads(answer.content) == answer_of(winner)
    assert out["messages"][-1].content == "Done: refunded $420.00 to order 1181."
    assert rig.ledger.issued == [{"refunded": True, "order_id": "1181", "amount": 420.0}]

    # Applying the winning command again changes nothing.
    settled = await rig.s("history", "t-race")
    await rig.invoke(command, "t-race")
    assert rig.ledger.count == 1
    assert len(await rig.s("history", "t-race")) == len(settled)
    (record,) = await rig.s("audit", thread_id="t-race")
    assert (record.outcome, record.actor) == ("resumed", winner)


async def test_loser_bypassing_the_store_is_refused(rig: Rig) -> None:
    """A losing approver who sends Command(resume=...) straight to the graph is refused and recorded; the winner's command still goes through, once."""
    iid = await rig.start("t-bypass")
    tool_call_id = (await rig.s("pending", "t-bypass"))["tool_call_id"]
    winner, command, errors = split(await race_store_resume(rig, "t-bypass", iid))
    loser = sorted(errors)[0]
    before = await rig.s("history", "t-bypass")

    with pytest.raises(InterruptAlreadyResolvedError):
        await rig.invoke(Command(resume=answer_of(loser)), "t-bypass", actor="mallory")

    after = await rig.s("history", "t-bypass")
    assert len(after) == len(before) + 1
    assert after[-1].type == RESUME_REJECTED
    assert (after[-1].actor, after[-1].data) == (
        "mallory",
        {"response": answer_of(loser), "why": "already_resolved"},
    )
    snapshot = await rig.get_state("t-bypass")
    assert snapshot.next == ("interrupt",)
    assert not tool_messages(list(snapshot.values["messages"]), tool_call_id)
    assert rig.ledger.count == 0

    # The refused answer was not kept by the graph: the winner's command is applied.
    out = await rig.invoke(command, "t-bypass")
    (answer,) = tool_messages(out["messages"], tool_call_id)
    assert json.loads(answer.content) == answer_of(winner)
    assert not any(loser in str(m.content) for m in out["messages"])
    assert rig.ledger.count == 1
    assert [e.type for e in (await rig.s("history", "t-bypass"))].count(RESUMED) == 1


async def test_four_approvers_racing_through_the_graph_refund_once(rig: Rig) -> None:
    """Four approvers who all bypass the store and resume the graph at once: one answer is applied, the refund runs once."""
    iid = await rig.start("t-graphs")
    tool_call_id = (await rig.s("pending", "t-graphs"))["tool_call_id"]

    async with AsyncExitStack() as stack:
        graphs = []
        for _ in APPROVERS:
            store = new_store(rig.url, rig.driver)
            stack.push_async_callback(
                lambda s=store: ready(s.aclose() if rig.is_async else s.close())
            )
            assert await ready(store.pending("t-graphs")) is not None
            saver = await stack.enter_async_context(open_saver(rig.url, rig.driver))
            graphs.append(
                build_agent_graph(store, checkpointer=saver, tools=refund_tools(rig.ledger))
            )

        def attempt(graph: Any, actor: str) -> Any:
            config = config_for("t-graphs", actor=actor)
            resume = Command(resume=answer_of(actor))
            return graph.ainvoke(resume, config) if rig.is_async else graph.invoke(resume, config)

        results = dict(zip(APPROVERS, await at_once(rig, attempt, graphs), strict=True))

    finished = {a: r for a, r in results.items() if not isinstance(r, Exception)}
    assert len(finished) == 1, results
    ((winner, out),) = finished.items()
    assert all(isinstance(results[a], InterruptAlreadyResolvedError) for a in results if a != winner)
    (answer,) = tool_messages(out["messages"], tool_call_id)
    assert json.loads(answer.content) == answer_of(winner)
    assert rig.ledger.count == 1

    history = await rig.s("history", "t-graphs")
    (resumed,) = [e for e in history if e.type == RESUMED]
    assert (resumed.interrupt_id, resumed.actor) == (iid, winner)
    rejected = [e for e in history if e.type == RESUME_REJECTED]
    assert sorted(e.actor for e in rejected) == sorted(a for a in APPROVERS if a != winner)
    messages = await rig.messages("t-graphs")
    assert len(tool_messages(messages, tool_call_id)) == 1
    assert messages[-1].content == "Done: refunded $420.00 to order 1181."
