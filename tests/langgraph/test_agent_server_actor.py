"""Who the actor of a call is (SPEC §13), decided in one place, and what the records carry.

No server here: configs shaped as the Agent Server shapes them (its user in
``configurable["langgraph_auth_user_id"]``), through the recording checkpointer and the
store's own checkpointer on each backend. The real server: test_agent_server.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from symfonic_store import InterruptStore
from symfonic_store.events import MINTED, RESUMED
from symfonic_store.langgraph.actor import Actor, actor_of


@pytest.mark.parametrize("configurable, expected", [
    ({}, Actor(None)),
    ({"actor": "ann"}, Actor("ann")),
    ({"actor": 7}, Actor("7")),
    ({"langgraph_auth_user_id": "alice"}, Actor("alice", "agent-server")),
    ({"langgraph_auth_user_id": "alice", "actor": "alice"}, Actor("alice", "agent-server")),
    ({"langgraph_auth_user_id": "alice", "actor": "mallory"}, Actor("alice", "agent-server", "mallory")),
    # Never authenticated: the empty identity (no auth) and Studio's built-in user.
    ({"langgraph_auth_user_id": "", "actor": "ann"}, Actor("ann")),
    ({"langgraph_auth_user_id": "  ", "actor": "ann"}, Actor("ann")),
    ({"langgraph_auth_user_id": None, "actor": "ann"}, Actor("ann")),
    ({"langgraph_auth_user_id": "langgraph-studio-user", "actor": "ann"}, Actor("ann")),
    ({"langgraph_auth_user_id": "langgraph-studio-user"}, Actor(None)),
])
def test_actor_of(configurable: dict[str, Any], expected: Actor) -> None:
    assert actor_of({"configurable": configurable}) == expected


def test_actor_of_no_config() -> None:
    assert actor_of(None) == Actor(None)
    assert actor_of({}) == Actor(None)


def test_what_the_data_carries() -> None:
    assert Actor("ann").data() == {}
    assert Actor("alice", "agent-server").data() == {"authenticated_by": "agent-server"}
    assert Actor("alice", "agent-server", "mallory").data() == {
        "authenticated_by": "agent-server", "claimed_actor": "mallory"}


def interrupt_graph(checkpointer: Any) -> Any:
    """One node that pauses with ``interrupt()`` and returns the answer."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    class State(TypedDict, total=False):
        amount: int
        answer: Any

    def ask(state: State) -> State:
        return {"answer": interrupt({"name": "refund", "amount": state.get("amount")})}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=checkpointer)


def _served_config(thread_id: str, user: str | None, claim: str | None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if user is not None:
        configurable["langgraph_auth_user_id"] = user
    if claim is not None:
        configurable["actor"] = claim
    return {"configurable": configurable}


@pytest.mark.parametrize("saver", ["recording", "store"])
def test_the_checkpointers_record_the_servers_user(store: InterruptStore, saver: str) -> None:
    from langgraph.types import Command

    checkpointer = (store.recording_checkpointer(InMemorySaver()) if saver == "recording"
                    else store.checkpointer())
    graph = interrupt_graph(checkpointer)
    graph.invoke({"amount": 3}, _served_config("t-served", "alice", "mallory"))
    (pending,) = store.open_interrupts("t-served")
    graph.invoke(Command(resume={pending["interrupt_id"]: "yes"}), _served_config("t-served", "bob", None))
    events = store.history("t-served")
    (mint,) = [e for e in events if e.type == MINTED]
    (answer,) = [e for e in events if e.type == RESUMED]
    assert (mint.actor, mint.data["authenticated_by"], mint.data["claimed_actor"]) == (
        "alice", "agent-server", "mallory")
    assert (answer.actor, answer.data["authenticated_by"]) == ("bob", "agent-server")
    assert "claimed_actor" not in answer.data
    (record,) = store.audit(thread_id="t-served")
    assert (record.requested_by, record.actor, record.authenticated_by) == ("alice", "bob", "agent-server")


def test_without_a_server_user_the_claim_is_recorded_as_before(store: InterruptStore) -> None:
    from langgraph.types import Command

    graph = interrupt_graph(store.recording_checkpointer(InMemorySaver()))
    graph.invoke({"amount": 3}, _served_config("t-plain", "langgraph-studio-user", "ann"))
    (pending,) = store.open_interrupts("t-plain")
    graph.invoke(Command(resume={pending["interrupt_id"]: "yes"}), _served_config("t-plain", "", "ben"))
    events = store.history("t-plain")
    assert [(e.type, e.actor) for e in events if e.type in (MINTED, RESUMED)] == [
        (MINTED, "ann"), (RESUMED, "ben")]
    for event in events:
        assert "authenticated_by" not in event.data and "claimed_actor" not in event.data


@pytest.mark.parametrize("saver", ["recording", "store"])
def test_a_breakpoint_run_past_records_the_servers_user_as_authenticated(store: InterruptStore, saver: str) -> None:
    """``invoke(None)`` past an open breakpoint under a server's user: the bypass carries
    ``authenticated_by`` and the client's different claim, as every other record does."""
    from native_graphs import Wires, breakpoint_graph

    from symfonic_store import InterruptGateway

    checkpointer = (store.recording_checkpointer(InMemorySaver()) if saver == "recording"
                    else store.checkpointer())
    wires = Wires()
    graph = breakpoint_graph(checkpointer, wires)
    InterruptGateway(graph, store).invoke({}, _served_config("t-past", None, "ann"))
    (opened,) = store.open_interrupts("t-past")
    graph.invoke(None, _served_config("t-past", "alice", "mallory"))
    assert wires.sent == [999]
    (bypass,) = [e for e in store.history("t-past") if e.type == RESUMED]
    assert bypass.interrupt_id == opened["interrupt_id"]
    assert (bypass.actor, bypass.data["bypass"], bypass.data["via"]) == ("alice", True, "direct")
    assert (bypass.data["authenticated_by"], bypass.data["claimed_actor"]) == ("agent-server", "mallory")


def test_a_breakpoint_run_past_without_a_server_user_records_the_claim_alone(store: InterruptStore) -> None:
    from native_graphs import Wires, breakpoint_graph

    from symfonic_store import InterruptGateway

    graph = breakpoint_graph(store.checkpointer(), Wires())
    InterruptGateway(graph, store).invoke({}, _served_config("t-past-plain", None, "ann"))
    graph.invoke(None, _served_config("t-past-plain", "langgraph-studio-user", "ben"))
    (bypass,) = [e for e in store.history("t-past-plain") if e.type == RESUMED]
    assert bypass.actor == "ben" and bypass.data["bypass"] is True
    assert "authenticated_by" not in bypass.data and "claimed_actor" not in bypass.data


def test_record_checkpoint_moved_refuses_an_identity_of_free_text(store: InterruptStore) -> None:
    from symfonic_store.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        store.record_checkpoint_moved("t-x", "c-1", identity={"authenticated_by": "me, trust me"})
    with pytest.raises(InvalidInputError):
        store.record_checkpoint_moved("t-x", "c-1", identity={"role": "admin"})


def _node_graph(store: InterruptStore) -> Any:
    """START -> a node returning a seed marker -> the store's interrupt node -> END."""
    from langgraph.graph import END, START, StateGraph

    from symfonic_store import InterruptState, build_interrupt_marker, create_interrupt_node

    def raise_marker(state: dict[str, Any]) -> dict[str, Any]:
        return build_interrupt_marker(name="approve", interrupt_id="i-node-0001", payload={"n": 1})

    builder = StateGraph(InterruptState)
    builder.add_node("raise", raise_marker)
    builder.add_node("interrupt", create_interrupt_node(store))
    builder.add_edge(START, "raise")
    builder.add_edge("raise", "interrupt")
    builder.add_edge("interrupt", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("user", ["alice", None])
def test_the_marker_nodes_answer_records_how_its_actor_was_established(
    store: InterruptStore, user: str | None
) -> None:
    """An answer the seed's node admits: the server's user, authenticated by the Agent Server,
    the client's claim beside it unused; without a server user, the claim with no authentication."""
    from langgraph.types import Command

    graph = _node_graph(store)
    configurable: dict[str, Any] = {"thread_id": "t-node", "actor": "mallory"}
    if user is not None:
        configurable["langgraph_auth_user_id"] = user
    graph.invoke({"messages": []}, {"configurable": configurable})
    graph.invoke(Command(resume={"approved": True}), {"configurable": configurable})
    (resumed,) = [e for e in store.history("t-node") if e.type == RESUMED]
    if user is None:
        assert resumed.actor == "mallory" and "authenticated_by" not in resumed.data
    else:
        assert resumed.actor == "alice" and resumed.data["authenticated_by"] == "agent-server"
