"""Agent Inbox's actions on a graph a real Agent Server serves, sent as Agent Inbox sends them
(SPEC §13; langchain-ai/agent-inbox ``ThreadContext.tsx``), driven by ``langgraph-sdk``.

- submit (accept, edit, response): ``runs.stream(thread, graph_id, command={"resume":
  [response]}, stream_mode="events")``;
- ignore: ``runs.create(thread, graph_id, command={"resume": [{"type": "ignore", "args":
  null}]})``;
- "Mark as resolved", the thread-level ignore: ``threads.update_state(thread, values=null,
  as_node=END)``.

One server per backend for the module, on a fresh store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from agent_server_rig import AgentServer, served

from symfonic_store import InterruptStore
from symfonic_store.events import EXPIRED, MINTED, RESUMED

INBOX_GRAPH = '''
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    to: str
    response: Any


def review(state: State) -> State:
    request = {
        "action_request": {"action": "send_email", "args": {"to": state.get("to")}},
        "config": {"allow_ignore": True, "allow_respond": True, "allow_edit": True,
                   "allow_accept": True},
        "description": "Send this email?",
    }
    return {"response": interrupt([request])[0]}


builder = StateGraph(State)
builder.add_node("review", review)
builder.add_edge(START, "review")
builder.add_edge("review", END)
graph = builder.compile()
'''
"""An Agent Inbox graph: one ``HumanInterrupt`` in a list, answered with a list."""


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
    ids=["sqlite", "postgres"],
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AgentServer, InterruptStore]]:
    folder = tmp_path_factory.mktemp(f"agent-inbox-{request.param}")
    with served(str(request.param), folder, graphs={"inbox": INBOX_GRAPH}) as (running, url):
        store = InterruptStore(url)
        try:
            yield running, store
        finally:
            store.close()


def _waiting(client: Any) -> tuple[str, str]:
    thread_id = str(client.threads.create(metadata={"test": uuid.uuid4().hex})["thread_id"])
    out = client.runs.wait(thread_id, "inbox", input={"to": "bob@example.com"})
    (pending,) = out["__interrupt__"]
    return thread_id, str(pending["id"])


def _one(store: InterruptStore, thread_id: str, kind: str) -> Any:
    (event,) = [e for e in store.history(thread_id) if e.type == kind]
    return event


RESPONSES = {
    "accept": {"type": "accept", "args": None},
    "edit": {"type": "edit", "args": {"action": "send_email", "args": {"to": "carol@example.com"}}},
    "response": {"type": "response", "args": "not this week"},
}


@pytest.mark.parametrize("kind", sorted(RESPONSES))
def test_a_submitted_response_is_resumed_with_its_decision(
    server: tuple[AgentServer, InterruptStore], kind: str
) -> None:
    running, store = server
    alice, bob = running.client("tok-alice"), running.client("tok-bob")
    thread_id, interrupt_id = _waiting(alice)
    response = RESPONSES[kind]
    # As Agent Inbox submits: a stream of events, the resume a list of one response.
    chunks = list(bob.runs.stream(
        thread_id, "inbox", command={"resume": [response]}, stream_mode="events"
    ))
    assert chunks and not any(c.event == "error" for c in chunks), chunks
    assert bob.threads.get_state(thread_id)["values"]["response"] == response
    resumed = _one(store, thread_id, RESUMED)
    assert resumed.interrupt_id == interrupt_id
    assert resumed.actor == "bob"
    assert resumed.data["decision"] == kind
    assert resumed.data["authenticated_by"] == "agent-server"
    assert resumed.data["response"] == [response]
    (record,) = store.audit(thread_id=thread_id)
    assert (record.decision, record.decision_source, record.requested_by) == (kind, "recorded", "alice")


def test_the_ignore_response_is_resumed_as_ignore(server: tuple[AgentServer, InterruptStore]) -> None:
    running, store = server
    alice = running.client("tok-alice")
    thread_id, interrupt_id = _waiting(alice)
    # As Agent Inbox's "Ignore" sends it: runs.create, not waited on.
    run = alice.runs.create(thread_id, "inbox", command={"resume": [{"type": "ignore", "args": None}]})
    alice.runs.join(thread_id, run["run_id"])
    resumed = _one(store, thread_id, RESUMED)
    assert (resumed.interrupt_id, resumed.actor, resumed.data["decision"]) == (interrupt_id, "alice", "ignore")
    assert store.open_interrupts(thread_id) == []


def test_mark_as_resolved_closes_the_interrupt_as_an_ignore_by_the_servers_user(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = server
    alice, bob = running.client("tok-alice"), running.client("tok-bob")
    thread_id, interrupt_id = _waiting(alice)
    assert thread_id in {t["thread_id"] for t in bob.threads.search(status="interrupted", limit=1000)}
    # Agent Inbox's ignoreThread: client.threads.updateState(id, {values: null, asNode: END}).
    bob.threads.update_state(thread_id, None, as_node="__end__")
    closed = _one(store, thread_id, EXPIRED)
    assert closed.interrupt_id == interrupt_id
    assert closed.data["reason"] == "superseded"
    assert closed.data["decision"] == "ignore"
    # The update's config names no authenticated user; the request's auth context does.
    assert closed.actor == "bob"
    assert closed.data["authenticated_by"] == "agent-server"
    assert closed.data["detected_by"] == "checkpointer"  # no gateway ran
    (record,) = store.audit(thread_id=thread_id, decision="ignore")
    assert (record.decision, record.decision_source, record.authenticated_by) == ("ignore", "recorded", "agent-server")
    assert not [e for e in store.history(thread_id) if e.type == RESUMED]
    pending = {(p["thread_id"], p["interrupt_id"]) for p in store.list_pending()}
    assert (thread_id, interrupt_id) not in pending
    assert thread_id not in {t["thread_id"] for t in bob.threads.search(status="interrupted", limit=1000)}


def test_mark_as_resolved_by_studios_built_in_user_records_no_actor(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = server
    thread_id, interrupt_id = _waiting(running.client("tok-alice"))
    # `langgraph dev` without disable_studio_auth admits this header without credentials.
    studio = running.client(headers={"x-auth-scheme": "langsmith"})
    studio.threads.update_state(thread_id, None, as_node="__end__")
    closed = _one(store, thread_id, EXPIRED)
    assert (closed.interrupt_id, closed.data["decision"]) == (interrupt_id, "ignore")
    assert closed.actor is None
    assert "authenticated_by" not in closed.data


def test_an_update_with_values_is_superseded_without_a_decision(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = server
    alice = running.client("tok-alice")
    thread_id, interrupt_id = _waiting(alice)
    alice.threads.update_state(thread_id, {"response": {"type": "accept"}}, as_node="review")
    closed = _one(store, thread_id, EXPIRED)
    assert (closed.interrupt_id, closed.data["reason"]) == (interrupt_id, "superseded")
    assert "decision" not in closed.data
    assert closed.actor is None


def test_the_mint_records_the_runs_graph_and_assistant(server: tuple[AgentServer, InterruptStore]) -> None:
    running, store = server
    alice = running.client("tok-alice")
    thread_id, _ = _waiting(alice)
    (assistant,) = alice.assistants.search(graph_id="inbox")
    mint = _one(store, thread_id, MINTED)
    assert mint.data["graph_id"] == "inbox"
    assert mint.data["assistant_id"] == assistant["assistant_id"]
    assert mint.data["graph"] == "inbox"
    assert mint.data["name"] == "send_email"
