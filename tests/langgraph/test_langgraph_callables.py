"""The node, router and tools node are LangGraph runnables that can also be called directly."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from symfonic_store import (
    InterruptStore,
    build_interrupt_marker,
    create_tools_node,
    make_interrupt_router,
    new_interrupt_id,
)


def test_the_router_is_a_path_function_of_state_and_config(store: InterruptStore) -> None:
    """router(state, config) returns the route and records it, like LangGraph's call would."""
    router = make_interrupt_router(store)
    marker = build_interrupt_marker(name="approve", interrupt_id=new_interrupt_id(), payload={})
    route = router({"messages": [], **marker}, {"configurable": {"thread_id": "direct"}})
    assert route == "interrupt"
    assert [e.type for e in store.history("direct")] == ["interrupt.minted", "route.decided"]
    assert store.history("direct")[-1].data["route"] == "interrupt"


def test_the_tools_node_can_be_called_with_a_state() -> None:
    """tools(state) runs the last AI message's tool calls like the node LangGraph runs."""
    tools = create_tools_node([])
    update = tools({"messages": [AIMessage("no calls")]})
    assert update == {"messages": []}
