"""The marker protocol records who asked (SPEC §12 ``requested_by``, §13).

The router's mint and the interrupt node's mint record the run's actor as the mint's
actor, the way the native paths do: the Agent Server's authenticated user first, else
``config["configurable"]["actor"]``. Real graphs with real checkpointers on the store's
own database, on SQLite and PostgreSQL, through ``invoke`` and ``ainvoke``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from graph_rig import Rig, config_for, open_rig
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph

from symfonic_store import MINTED, ROUTE_DECIDED
from symfonic_store.langgraph import InterruptState, create_interrupt_node
from symfonic_store.langgraph.actor import SERVER_USER_KEY
from symfonic_store.protocol import build_interrupt_marker


@pytest.fixture(params=["invoke", "ainvoke"])
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def rig(migrated_url: str, driver: str) -> AsyncIterator[Rig]:
    async with open_rig(migrated_url, driver) as r:
        yield r


def of_type(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


CALLERS = [
    pytest.param({"actor": "carol"}, "carol", id="configurable-actor"),
    pytest.param({SERVER_USER_KEY: "carol", "actor": "mallory"}, "carol", id="agent-server-user-first"),
]


@pytest.mark.parametrize(("configurable", "requester"), CALLERS)
async def test_the_routers_mint_records_the_runs_actor(rig: Rig, configurable: dict[str, Any], requester: str) -> None:
    """The demo agent's router mints the marker: the mint's actor (the audit's requested_by) is the caller."""
    await rig.invoke({"messages": [HumanMessage("Please refund $420 to order 1181.")], "run_id": "r1"},
                     "t-router", **configurable)
    history = await rig.s("history", "t-router")
    assert [e.type for e in history] == [ROUTE_DECIDED, MINTED, ROUTE_DECIDED]
    (minted,) = of_type(history, MINTED)
    assert minted.actor == requester
    (opened,) = await rig.s("list_pending")
    iid = opened["interrupt_id"]
    await rig.s("resume", "t-router", iid, {"approved": True}, actor="dave")
    (record,) = await rig.s("audit", thread_id="t-router")
    assert (record.requested_by, record.actor, record.outcome) == (requester, "dave", "resumed")


def node_only_graph(store: Any, checkpointer: Any) -> Any:
    """START -> ``raise`` (a marker) -> the store's interrupt node -> END: no router, so
    the node's own mint is the one recorded."""

    def raise_marker(state: dict[str, Any]) -> dict[str, Any]:
        return build_interrupt_marker(
            name="refund_approval", interrupt_id="i-node-requester", payload={"amount": 5},
            run_id=state.get("run_id"),
        )

    builder = StateGraph(InterruptState)
    builder.add_node("raise", raise_marker)
    builder.add_node("interrupt", create_interrupt_node(store))
    builder.add_edge(START, "raise")
    builder.add_edge("raise", "interrupt")
    builder.add_edge("interrupt", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize(("configurable", "requester"), CALLERS)
async def test_the_nodes_mint_records_the_runs_actor(rig: Rig, configurable: dict[str, Any], requester: str) -> None:
    """The interrupt node mints the marker (no router): its actor is the caller; whoever answers later is not."""
    graph = node_only_graph(rig.store, rig.saver)
    config = config_for("t-node", **configurable)
    state = {"messages": [], "run_id": "r1"}
    if rig.is_async:
        await graph.ainvoke(state, config)
    else:
        graph.invoke(state, config)
    (minted,) = of_type(await rig.s("history", "t-node"), MINTED)
    assert (minted.interrupt_id, minted.actor) == ("i-node-requester", requester)
    await rig.s("resume", "t-node", "i-node-requester", {"approved": True}, actor="dave")
    (record,) = await rig.s("audit", thread_id="t-node")
    assert (record.requested_by, record.actor) == (requester, "dave")
