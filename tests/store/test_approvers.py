"""Who may approve: the ``approvers=`` policy, through the front door and through the node.

``approvers="payload"`` reads the marker payload's ``approvers`` list (when it has one);
a callable ``(thread_id, marker, actor) -> bool`` decides anything else. A refused actor
gets ``ResumeNotAllowedError``, the attempt is recorded as ``interrupt.resume_rejected``
with ``why: "not_allowed"`` and that actor, and the interrupt stays pending for someone
who is allowed. Without a policy, ``not_allowed`` never happens (SPEC §2).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import factories
import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from symfonic_store import (
    EXPIRED,
    RESUME_REJECTED,
    RESUMED,
    AsyncInterruptStore,
    InterruptStore,
    InvalidInputError,
    ResumeNotAllowedError,
    create_interrupt_node,
    expired_resume_value,
)
from symfonic_store.langgraph import InterruptState

APPROVERS = ["alice", "carol"]


def marker(interrupt_id: str = "i-1", approvers: Any = APPROVERS, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"order": 1181, "amount": 420, **extra}
    if approvers is not None:
        payload["approvers"] = approvers
    return factories.marker(interrupt_id, payload=payload)


def rejections(events: list[Any]) -> list[tuple[str | None, str, Any]]:
    """``(actor, why, response)`` of every recorded rejection."""
    return [
        (e.actor, e.data["why"], e.data["response"]) for e in events if e.type == RESUME_REJECTED
    ]


@pytest.fixture
def guarded(migrated_url: str) -> Iterator[InterruptStore]:
    """A store whose approvers come from the marker payload, on each backend."""
    s = InterruptStore(migrated_url, approvers="payload")
    s.setup()
    yield s
    s.close()


@pytest.fixture
async def aguarded(migrated_url: str) -> AsyncIterator[AsyncInterruptStore]:
    """The asyncio twin of ``guarded``."""
    s = AsyncInterruptStore(migrated_url, approvers="payload")
    await s.setup()
    yield s
    await s.aclose()


# --- the front door -------------------------------------------------------------------


def test_a_listed_approver_resumes(guarded: InterruptStore) -> None:
    """An actor named in payload.approvers gets the command and is recorded as the approver."""
    guarded.mint("t", marker())
    command = guarded.resume("t", "i-1", {"approved": True}, actor="alice")
    assert command.resume == {"approved": True}
    resumed = [e for e in guarded.history("t") if e.type == RESUMED]
    assert [(e.actor, e.data["response"]) for e in resumed] == [("alice", {"approved": True})]
    assert guarded.pending("t") is None


def test_an_unlisted_actor_is_refused_recorded_and_the_interrupt_stays_pending(
    guarded: InterruptStore,
) -> None:
    """An unlisted actor gets ResumeNotAllowedError, recorded with their actor; alice can still approve."""
    minted = marker()
    guarded.mint("t", minted)
    with pytest.raises(ResumeNotAllowedError, match="mallory") as info:
        guarded.resume("t", "i-1", {"approved": True}, actor="mallory")
    assert (info.value.thread_id, info.value.interrupt_id) == ("t", "i-1")
    with pytest.raises(ResumeNotAllowedError):  # every attempt is refused and recorded
        guarded.resume("t", "i-1", {"approved": False}, actor="bob")
    history = guarded.history("t")
    assert rejections(history) == [
        ("mallory", "not_allowed", {"approved": True}),
        ("bob", "not_allowed", {"approved": False}),
    ]
    assert not [e for e in history if e.type in (RESUMED, EXPIRED)]
    assert guarded.pending("t") == minted["_interrupt_pending"]
    assert guarded.is_current("t")
    assert [p["interrupt_id"] for p in guarded.list_pending()] == ["i-1"]

    guarded.resume("t", "i-1", {"approved": True}, actor="carol")
    (record,) = guarded.audit(thread_id="t")
    assert (record.outcome, record.actor, record.response) == (
        "resumed",
        "carol",
        {"approved": True},
    )


def test_a_payload_without_an_approvers_list_lets_anyone_resume(guarded: InterruptStore) -> None:
    """With the payload policy, a marker that lists no approvers is open to any actor."""
    guarded.mint("t", marker(approvers=None))
    guarded.resume("t", "i-1", None, actor="anyone")
    assert [e.actor for e in guarded.history("t") if e.type == RESUMED] == ["anyone"]


def test_an_empty_approvers_list_lets_nobody_resume(guarded: InterruptStore) -> None:
    """``approvers: []`` is a list that names nobody: every actor is refused."""
    guarded.mint("t", marker(approvers=[]))
    with pytest.raises(ResumeNotAllowedError):
        guarded.resume("t", "i-1", None, actor="alice")
    assert guarded.pending("t") is not None


def test_without_a_policy_not_allowed_never_happens(store: InterruptStore) -> None:
    """With no approvers policy configured an approvers list in the payload is just data."""
    store.mint("t", marker())
    store.resume("t", "i-1", {"approved": True}, actor="mallory")
    history = store.history("t")
    assert [e.actor for e in history if e.type == RESUMED] == ["mallory"]
    assert rejections(history) == []


def test_a_callable_policy_sees_thread_marker_and_actor(migrated_url: str) -> None:
    """A callable policy is asked with (thread_id, marker, actor) and its answer decides."""
    asked: list[tuple[str, dict[str, Any], str | None]] = []

    def only_managers(thread_id: str, pending: dict[str, Any], actor: str | None) -> bool:
        asked.append((thread_id, pending, actor))
        return actor is not None and actor.startswith("manager:")

    minted = marker(approvers=None)
    with InterruptStore(migrated_url, approvers=only_managers) as store:
        store.setup()
        store.mint("t", minted)
        with pytest.raises(ResumeNotAllowedError):
            store.resume("t", "i-1", {"approved": True}, actor="intern:joe")
        store.resume("t", "i-1", {"approved": True}, actor="manager:ann")
        history = store.history("t")
    expected_marker = minted["_interrupt_pending"]
    assert asked == [
        ("t", expected_marker, "intern:joe"),
        ("t", expected_marker, "manager:ann"),
    ]
    assert rejections(history) == [("intern:joe", "not_allowed", {"approved": True})]
    assert [e.actor for e in history if e.type == RESUMED] == ["manager:ann"]


def test_a_policy_that_raises_writes_nothing(migrated_url: str) -> None:
    """A policy's own exception propagates unchanged and the attempt leaves no half-written trace."""

    def broken(thread_id: str, pending: dict[str, Any], actor: str | None) -> bool:
        raise LookupError("directory service down")

    with InterruptStore(migrated_url, approvers=broken) as store:
        store.setup()
        store.mint("t", marker())
        before = store.history("t")
        with pytest.raises(LookupError, match="directory service down"):
            store.resume("t", "i-1", None, actor="alice")
        assert store.history("t") == before
        assert store.pending("t") is not None


@pytest.mark.parametrize("bad", ["everyone", 42, ["alice"]])
def test_an_unknown_approvers_setting_is_refused(sqlite_url: str, bad: Any) -> None:
    """``approvers=`` accepts None, "payload" or a callable; anything else names the field."""
    with pytest.raises(InvalidInputError, match="approvers"):
        InterruptStore(sqlite_url, approvers=bad)


async def test_the_async_store_applies_the_same_policy(aguarded: AsyncInterruptStore) -> None:
    """The asyncio store refuses and records an unlisted actor, then admits a listed one."""
    await aguarded.mint("t", marker())
    with pytest.raises(ResumeNotAllowedError):
        await aguarded.resume("t", "i-1", {"approved": True}, actor="mallory")
    assert await aguarded.pending("t") is not None
    command = await aguarded.resume("t", "i-1", {"approved": True}, actor="alice")
    assert command.resume == {"approved": True}
    history = await aguarded.history("t")
    assert rejections(history) == [("mallory", "not_allowed", {"approved": True})]
    assert [e.actor for e in history if e.type == RESUMED] == ["alice"]


# --- through the interrupt node -------------------------------------------------------

CALL_ID = "call-refund-1"


def approval_graph(store: InterruptStore | AsyncInterruptStore) -> Any:
    """START -> agent (a tool call and its marker) -> the store-aware interrupt node -> END."""

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        call = {"name": "refund", "args": {"order": 1181}, "id": CALL_ID, "type": "tool_call"}
        pending = marker()["_interrupt_pending"] | {"tool_call_id": CALL_ID}
        return {"messages": [AIMessage("", tool_calls=[call])], "_interrupt_pending": pending}

    builder = StateGraph(InterruptState)
    builder.add_node("agent", agent)
    builder.add_node("interrupt", create_interrupt_node(store))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "interrupt")
    builder.add_edge("interrupt", END)
    return builder.compile(checkpointer=InMemorySaver())


def config(thread_id: str, actor: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if actor is not None:
        configurable["actor"] = actor
    return {"configurable": configurable}


def tool_answers(graph: Any, thread_id: str) -> list[Any]:
    messages = graph.get_state(config(thread_id)).values.get("messages", [])
    return [json.loads(m.content) for m in messages if isinstance(m, ToolMessage)]


def test_a_bypassing_resume_by_an_unlisted_actor_never_reaches_the_graph(
    guarded: InterruptStore,
) -> None:
    """Through the node, an unlisted actor's answer raises, is recorded, and the graph stays paused."""
    graph = approval_graph(guarded)
    first = graph.invoke({"messages": []}, config("t"))
    assert first["__interrupt__"]
    with pytest.raises(ResumeNotAllowedError):
        graph.invoke(Command(resume={"approved": True}), config("t", actor="mallory"))
    with pytest.raises(ResumeNotAllowedError):  # no actor in the config: nobody is listed
        graph.invoke(Command(resume={"approved": True}), config("t"))

    assert rejections(guarded.history("t")) == [
        ("mallory", "not_allowed", {"approved": True}),
        (None, "not_allowed", {"approved": True}),
    ]
    assert tool_answers(graph, "t") == []
    assert "interrupt" in graph.get_state(config("t")).next
    assert guarded.pending("t") is not None

    done = graph.invoke(Command(resume={"approved": True}), config("t", actor="alice"))
    assert tool_answers(graph, "t") == [{"approved": True}]
    assert done["_interrupt_pending"] is None
    assert graph.get_state(config("t")).next == ()
    assert [e.actor for e in guarded.history("t") if e.type == RESUMED] == ["alice"]


def test_an_answer_admitted_at_the_front_door_is_applied_by_the_node(
    guarded: InterruptStore,
) -> None:
    """store.resume by a listed approver, then the graph resumed without an actor, applies it once."""
    graph = approval_graph(guarded)
    graph.invoke({"messages": []}, config("t"))
    command = guarded.resume("t", "i-1", {"approved": True}, actor="carol")
    graph.invoke(command, config("t"))
    assert tool_answers(graph, "t") == [{"approved": True}]
    history = guarded.history("t")
    assert [e.actor for e in history if e.type == RESUMED] == ["carol"]
    assert rejections(history) == []


def test_the_expiry_wake_up_is_not_blocked_by_the_policy(guarded: InterruptStore) -> None:
    """A sweep-style wake-up of an expired interrupt reaches the agent even with no approver actor."""
    graph = approval_graph(guarded)
    graph.invoke({"messages": []}, config("t"))
    guarded.expire("t", "i-1", reason="cancelled")
    graph.invoke(Command(resume=expired_resume_value("cancelled")), config("t"))
    assert tool_answers(graph, "t") == [{"expired": True, "reason": "cancelled"}]
    history = guarded.history("t")
    assert rejections(history) == []
    assert not [e for e in history if e.type == RESUMED]


async def test_the_async_node_refuses_an_unlisted_actor(aguarded: AsyncInterruptStore) -> None:
    """Under ainvoke with the asyncio store, an unlisted actor's bypass is refused and recorded."""
    graph = approval_graph(aguarded)
    await graph.ainvoke({"messages": []}, config("t"))
    with pytest.raises(ResumeNotAllowedError):
        await graph.ainvoke(Command(resume={"approved": True}), config("t", actor="mallory"))
    assert rejections(await aguarded.history("t")) == [
        ("mallory", "not_allowed", {"approved": True})
    ]
    assert tool_answers(graph, "t") == []
    assert "interrupt" in graph.get_state(config("t")).next
    await graph.ainvoke(Command(resume={"approved": True}), config("t", actor="alice"))
    assert tool_answers(graph, "t") == [{"approved": True}]
    assert graph.get_state(config("t")).next == ()
