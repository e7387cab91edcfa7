"""The store-aware LangGraph integration, end to end (SPEC §4).

A real ``StateGraph`` (the refund agent of :func:`symfonic_store.demo.build_agent_graph`
with the scripted chat model, no network), tools that raise interrupts, and real
checkpointers on the store's own database: every test runs with the store on SQLite
(``SqliteSaver`` / ``AsyncSqliteSaver`` on the same file) and on PostgreSQL
(``PostgresSaver`` / ``AsyncPostgresSaver`` in the same schema), driven by ``invoke``
with ``InterruptStore`` and by ``ainvoke`` with ``AsyncInterruptStore``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from freezegun import freeze_time
from graph_rig import Rig, libpq_conninfo, open_rig, ready, tool_messages
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from symfonic_store import (
    EXPIRED,
    MINTED,
    RESUME_REJECTED,
    RESUMED,
    ROUTE_DECIDED,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
)
from symfonic_store.db.schema import EVENTS_TABLE, THREADS_TABLE
from symfonic_store.demo import RefundLedger, build_agent_graph, refund_tools

TTL = 60.0


@pytest.fixture(params=["invoke", "ainvoke"])
def driver(request: pytest.FixtureRequest) -> str:
    """How the graph is driven: ``invoke`` + InterruptStore, or ``ainvoke`` + AsyncInterruptStore."""
    return str(request.param)


@pytest.fixture
async def rig(migrated_url: str, driver: str) -> AsyncIterator[Rig]:
    """The refund agent with a store (no TTL) and a checkpointer on one database."""
    async with open_rig(migrated_url, driver) as r:
        yield r


def of_type(events: list, kind: str) -> list:
    return [e for e in events if e.type == kind]


# --- pausing -----------------------------------------------------------------------


async def test_pause_records_mint_and_route_decisions(rig: Rig) -> None:
    """A tool's interrupt pauses the graph; the store's pending marker is the graph's, and history holds the mint and the routes."""
    iid = await rig.start("t-pause")

    graph_marker = (await rig.get_state("t-pause")).values["_interrupt_pending"]
    assert await rig.s("pending", "t-pause") == graph_marker
    assert graph_marker["interrupt_id"] == iid
    assert graph_marker["run_id"] == "r1"
    assert graph_marker["payload"] == {
        "order_id": "1181",
        "amount": 420.0,
        "question": "Refund $420.00 to order 1181?",
    }

    history = await rig.s("history", "t-pause")
    assert [e.type for e in history] == [ROUTE_DECIDED, MINTED, ROUTE_DECIDED]
    assert [e.data["route"] for e in of_type(history, ROUTE_DECIDED)] == ["continue", "interrupt"]
    minted = history[1]
    assert minted.interrupt_id == iid and minted.run_id == "r1"
    assert {k: minted.data[k] for k in graph_marker} == graph_marker
    assert history[2].data == {"route": "interrupt", "interrupt_id": iid, "reason": None}
    assert await rig.s("state", "t-pause") == {"_interrupt_pending": graph_marker, "run_id": "r1"}


# --- the front door: store.resume ---------------------------------------------------


async def test_store_resume_completes_the_graph_once(rig: Rig) -> None:
    """store.resume's command completes the run; the tool call gets exactly the response; a repeat records nothing."""
    iid = await rig.start("t-front")
    tool_call_id = (await rig.s("pending", "t-front"))["tool_call_id"]

    command = await rig.s("resume", "t-front", iid, {"approved": True}, actor="alice")
    assert isinstance(command, Command)
    out = await rig.invoke(command, "t-front")

    assert "__interrupt__" not in out
    (answer,) = tool_messages(out["messages"], tool_call_id)
    assert json.loads(answer.content) == {"approved": True}
    assert answer.name == "interrupt:approval_required"
    assert out["messages"][-1].content == "Done: refunded $420.00 to order 1181."
    assert rig.ledger.count == 1
    assert out["_interrupt_pending"] is None

    history = await rig.s("history", "t-front")
    (resumed,) = of_type(history, RESUMED)
    assert resumed.actor == "alice" and resumed.data["response"] == {"approved": True}
    (record,) = await rig.s("audit", thread_id="t-front")
    assert (record.outcome, record.actor, record.response) == ("resumed", "alice", {"approved": True})

    # The same approval again: the same command, no new event, nothing applied twice.
    again = await rig.s("resume", "t-front", iid, {"approved": True}, actor="alice")
    assert again == command
    out_again = await rig.invoke(again, "t-front")
    assert len(await rig.s("history", "t-front")) == len(history)
    assert len(out_again["messages"]) == len(out["messages"])
    assert rig.ledger.count == 1


async def test_rejection_is_told_to_the_agent(rig: Rig) -> None:
    """A rejection reaches the agent as the tool's answer, and no refund is issued."""
    iid = await rig.start("t-no")
    command = await rig.s("resume", "t-no", iid, {"approved": False, "note": "too much"}, actor="bob")
    out = await rig.invoke(command, "t-no")
    assert out["messages"][-1].content == (
        "The refund of $420.00 for order 1181 was rejected (too much): no refund was issued."
    )
    assert rig.ledger.count == 0
    (record,) = await rig.s("audit", actor="bob")
    assert record.outcome == "resumed" and record.response == {"approved": False, "note": "too much"}


# --- resumes that bypass the store --------------------------------------------------


async def test_bypassing_resume_is_admitted_with_the_config_actor(rig: Rig) -> None:
    """Command(resume=...) sent straight to the graph is admitted once, by the actor in the config."""
    iid = await rig.start("t-bypass")
    out = await rig.invoke(Command(resume={"approved": True}), "t-bypass", actor="carol")

    assert out["messages"][-1].content == "Done: refunded $420.00 to order 1181."
    history = await rig.s("history", "t-bypass")
    (resumed,) = of_type(history, RESUMED)
    assert (resumed.interrupt_id, resumed.actor) == (iid, "carol")
    assert resumed.data["response"] == {"approved": True}
    assert not of_type(history, RESUME_REJECTED)
    (record,) = await rig.s("audit", thread_id="t-bypass")
    assert (record.outcome, record.actor, record.response) == ("resumed", "carol", {"approved": True})

    # Afterwards the store's front door sees a resolved interrupt.
    with pytest.raises(InterruptAlreadyResolvedError):
        await rig.s("resume", "t-bypass", iid, {"approved": False}, actor="dave")


# --- stale markers -----------------------------------------------------------------


async def test_new_run_expires_the_old_marker_exactly_once(rig: Rig) -> None:
    """A new run_id makes the paused marker stale: one router expiry however many steps follow; a late resume is refused."""
    old = await rig.start("t-run", run_id="r1")

    out = await rig.ask("t-run", "Any news?", run_id="r2")
    assert "__interrupt__" not in out
    await rig.ask("t-run", "Hello again", run_id="r2")
    new = await rig.start("t-run", run_id="r3")
    assert new != old

    history = await rig.s("history", "t-run")
    (expiry,) = of_type(history, EXPIRED)
    assert expiry.interrupt_id == old
    assert expiry.data == {"reason": "run_id", "detected_by": "router"}
    assert expiry.run_id == "r2"
    stale_routes = [e for e in of_type(history, ROUTE_DECIDED) if e.data["reason"] == "run_id"]
    assert len(stale_routes) >= 3  # every later look at the old marker says why, none re-expires
    assert all(e.data["interrupt_id"] == old for e in stale_routes)
    assert (await rig.s("pending", "t-run"))["interrupt_id"] == new
    assert (await rig.s("state", "t-run"))["run_id"] == "r3"

    with pytest.raises(InterruptExpiredError):
        await rig.s("resume", "t-run", old, {"approved": True}, actor="alice")
    rejected = of_type(await rig.s("history", "t-run"), RESUME_REJECTED)
    assert [(e.interrupt_id, e.actor, e.data["why"]) for e in rejected] == [(old, "alice", "expired")]
    assert len(of_type(await rig.s("history", "t-run"), EXPIRED)) == 1


async def test_ttl_expiry_is_recorded_once_by_the_router(migrated_url: str, driver: str) -> None:
    """Past the TTL (frozen clock) the router records one ttl expiry, only once; a late resume is refused and recorded."""
    start = datetime.now(UTC)
    async with open_rig(migrated_url, driver, ttl_seconds=TTL) as rig:
        with freeze_time(start, real_asyncio=True) as clock:
            iid = await rig.start("t-ttl")
            clock.tick(TTL)
            # Exactly at the TTL the marker is still current: the router routes to it again.
            out = await rig.ask("t-ttl", "Any news?")
            assert out["__interrupt__"][0].value["interrupt_id"] == iid
            assert not of_type(await rig.s("history", "t-ttl"), EXPIRED)

            clock.tick(1)
            out = await rig.ask("t-ttl", "Any news now?")
            assert "__interrupt__" not in out
            await rig.ask("t-ttl", "Still nothing?")

            history = await rig.s("history", "t-ttl")
            (expiry,) = of_type(history, EXPIRED)
            assert expiry.interrupt_id == iid
            assert expiry.data == {"reason": "ttl", "detected_by": "router"}
            routes = of_type(history, ROUTE_DECIDED)
            assert [e.data["reason"] for e in routes[-2:]] == ["ttl", "ttl"]
            assert await rig.s("pending", "t-ttl") is None

            with pytest.raises(InterruptExpiredError):
                await rig.s("resume", "t-ttl", iid, {"approved": True}, actor="alice")
            history = await rig.s("history", "t-ttl")
            assert len(of_type(history, EXPIRED)) == 1
            (rejected,) = of_type(history, RESUME_REJECTED)
            assert (rejected.actor, rejected.data["why"]) == ("alice", "expired")
            assert rig.ledger.count == 0


async def test_update_state_as_node_records_the_route(rig: Rig) -> None:
    """update_state(..., as_node="agent") makes LangGraph evaluate the router, and that decision is recorded."""
    iid = await rig.start("t-update")
    before = await rig.s("history", "t-update")

    await rig.update_state(
        "t-update", {"messages": [AIMessage("Waiting for a person to approve.")]}, as_node="agent"
    )

    after = await rig.s("history", "t-update")
    assert len(after) == len(before) + 1
    decided = after[-1]
    assert decided.type == ROUTE_DECIDED
    assert decided.data == {"route": "interrupt", "interrupt_id": iid, "reason": None}
    assert decided.run_id == "r1"
    assert (await rig.get_state("t-update")).next == ("interrupt",)

    # The thread still resumes through the front door.
    command = await rig.s("resume", "t-update", iid, {"approved": True}, actor="alice")
    out = await rig.invoke(command, "t-update")
    assert out["messages"][-1].content == "Done: refunded $420.00 to order 1181."
    assert rig.ledger.count == 1


# --- waking a graph after a sweep ---------------------------------------------------


async def test_sweep_wakes_the_graph_on_its_timeout_path(migrated_url: str, driver: str) -> None:
    """The sweep's waker resumes the paused graph with the timeout; the agent says so, and the interrupt stays expired."""
    start = datetime.now(UTC)
    async with open_rig(migrated_url, driver, ttl_seconds=TTL) as rig:
        with freeze_time(start, real_asyncio=True) as clock:
            late = await rig.start("t-late")
            clock.tick(TTL + 1)
            woken: list[tuple[str, str, str, bool]] = []
            waker = rig.waker()
            if rig.is_async:

                async def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
                    woken.append((thread_id, interrupt_id, reason, await waker(thread_id, interrupt_id, reason)))

            else:

                def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
                    woken.append((thread_id, interrupt_id, reason, waker(thread_id, interrupt_id, reason)))

            report = await rig.s("sweep", on_expired=on_expired)

        assert report.expired == [("t-late", late, "ttl")]
        assert woken == [("t-late", late, "ttl", True)]
        assert not report.wake_failures
        messages = await rig.messages("t-late")
        assert "the request timed out" in messages[-1].content
        assert "no refund was issued for order 1181" in messages[-1].content
        assert json.loads(messages[-2].content) == {"expired": True, "reason": "ttl"}
        assert not (await rig.get_state("t-late")).next
        assert rig.ledger.count == 0

        history = await rig.s("history", "t-late")
        assert not of_type(history, RESUMED)
        assert of_type(history, EXPIRED)[0].data == {"reason": "ttl", "detected_by": "sweep"}
        (record,) = await rig.s("audit", thread_id="t-late")
        assert (record.outcome, record.reason, record.actor) == ("expired", "ttl", None)

        # A thread no longer waiting on that interrupt is skipped.
        assert await _call(waker, "t-late", late, "ttl") is False
        assert await _call(waker, "t-nobody", late, "ttl") is False


async def test_approval_of_an_expired_interrupt_is_refused_by_the_graph(rig: Rig) -> None:
    """An approval sent through the graph to an expired interrupt raises, is recorded, and never reaches the agent; only the wake-up gets through."""
    iid = await rig.start("t-dead")
    await rig.s("expire", "t-dead", iid, reason="cancelled", actor="ops")
    tool_call_id = (await rig.get_state("t-dead")).values["_interrupt_pending"]["tool_call_id"]

    with pytest.raises(InterruptExpiredError):
        await rig.invoke(Command(resume={"approved": True}), "t-dead", actor="mallory")
    # Not even dressed up as a wake-up.
    forged = {"expired": True, "reason": "cancelled", "approved": True}
    with pytest.raises(InterruptExpiredError):
        await rig.invoke(Command(resume=forged), "t-dead", actor="mallory")

    assert (await rig.get_state("t-dead")).next == ("interrupt",)
    assert not tool_messages(await rig.messages("t-dead"), tool_call_id)
    rejected = of_type(await rig.s("history", "t-dead"), RESUME_REJECTED)
    assert [(e.actor, e.data["why"], e.data["response"]) for e in rejected] == [
        ("mallory", "expired", {"approved": True}),
        ("mallory", "expired", forged),
    ]

    # The genuine wake-up is handed to the agent, and records no resume.
    assert await _call(rig.waker(), "t-dead", iid, "cancelled") is True
    messages = await rig.messages("t-dead")
    (answer,) = tool_messages(messages, tool_call_id)
    assert json.loads(answer.content) == {"expired": True, "reason": "cancelled"}
    assert "the request timed out" in messages[-1].content
    assert rig.ledger.count == 0
    assert not of_type(await rig.s("history", "t-dead"), RESUMED)
    (record,) = await rig.s("audit", thread_id="t-dead")
    assert (record.outcome, record.reason, record.actor) == ("expired", "cancelled", "ops")


# --- one database for both ---------------------------------------------------------


async def test_store_and_checkpointer_share_one_database(migrated_url: str, driver: str) -> None:
    """The store and LangGraph's checkpointer live in one SQLite file / one PostgreSQL schema, and a thread paused there resumes after everything is reopened."""
    async with open_rig(migrated_url, driver) as first:
        iid = await first.start("t-shared")

    tables = _tables(migrated_url)
    assert {EVENTS_TABLE, THREADS_TABLE} <= tables  # the store's
    assert "checkpoints" in tables  # LangGraph's

    async with open_rig(migrated_url, driver) as second:
        assert (await second.s("pending", "t-shared"))["interrupt_id"] == iid
        assert (await second.get_state("t-shared")).next == ("interrupt",)
        command = await second.s("resume", "t-shared", iid, {"approved": True}, actor="alice")
        out = await second.invoke(command, "t-shared")
        assert out["messages"][-1].content == "Done: refunded $420.00 to order 1181."
        assert second.ledger.count == 1
        assert [e.type for e in await second.s("history", "t-shared")] == [
            ROUTE_DECIDED, MINTED, ROUTE_DECIDED, RESUMED,
            ROUTE_DECIDED, ROUTE_DECIDED, ROUTE_DECIDED,
        ]
        assert (await second.s("verify")).ok


# --- without a store ---------------------------------------------------------------


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
async def test_agent_graph_without_a_store_is_the_seed_protocol(driver: str) -> None:
    """build_agent_graph(None) routes with interrupt_condition and resumes with a plain Command."""
    ledger = RefundLedger()
    graph = build_agent_graph(checkpointer=InMemorySaver(), tools=refund_tools(ledger))
    config = {"configurable": {"thread_id": "t-plain"}}
    ask = {"messages": [HumanMessage("refund $12.50 to order A-7")], "run_id": "r1"}
    if driver == "ainvoke":
        paused = await graph.ainvoke(ask, config)
        out = await graph.ainvoke(Command(resume={"approved": True}), config)
    else:
        paused = graph.invoke(ask, config)
        out = graph.invoke(Command(resume={"approved": True}), config)
    assert paused["__interrupt__"][0].value["payload"]["order_id"] == "A-7"
    assert out["messages"][-1].content == "Done: refunded $12.50 to order A-7."
    assert ledger.issued == [{"refunded": True, "order_id": "A-7", "amount": 12.5}]


# --- helpers -----------------------------------------------------------------------


async def _call(waker: Any, *args: str) -> bool:
    return bool(await ready(waker(*args)))


def _tables(db_url: str) -> set[str]:
    if db_url.startswith("sqlite"):
        engine = sa.create_engine(db_url)
        try:
            return set(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()
    import psycopg

    with psycopg.connect(libpq_conninfo(db_url)) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return {r[0] for r in rows}
