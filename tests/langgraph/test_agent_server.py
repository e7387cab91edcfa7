"""Graphs served by a real Agent Server (``langgraph dev``) with a custom auth handler (SPEC §13).

One server per backend for the module (:mod:`agent_server_rig`), started with the
factory the package ships (``symfonic_store.agent_server.checkpointer``, the dotted form)
on an empty database, the server's blocking-call check on; driven by ``langgraph-sdk``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_server_rig import INTERRUPT_GRAPH, AgentServer, served

from symfonic_store import InterruptStore
from symfonic_store.events import MINTED, RESUMED

BLOCKING_GRAPH = '''
import time
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    done: bool


async def nap(state: State) -> State:
    time.sleep(0.01)  # sleep-ok: a blocking call on the event loop: the server's check refuses it
    return {"done": True}


builder = StateGraph(State)
builder.add_node("nap", nap)
builder.add_edge(START, "nap")
builder.add_edge("nap", END)
graph = builder.compile()
'''

GRAPHS = {"agent": INTERRUPT_GRAPH, "blocker": BLOCKING_GRAPH}


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
    ids=["sqlite", "postgres"],
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AgentServer, InterruptStore]]:
    folder = tmp_path_factory.mktemp(f"agent-server-{request.param}")
    with served(str(request.param), folder, graphs=GRAPHS) as (running, url):
        store = InterruptStore(url)
        try:
            yield running, store
        finally:
            store.close()


def _thread(client: Any) -> str:
    return str(client.threads.create(metadata={"test": uuid.uuid4().hex})["thread_id"])


def _interrupted(client: Any, thread_id: str, actor: str | None = None) -> str:
    """Start the ``agent`` graph on ``thread_id``; returns the interrupt's id."""
    config = {"configurable": {"actor": actor}} if actor is not None else None
    out = client.runs.wait(thread_id, "agent", input={"amount": 42}, config=config)
    interrupts = out["__interrupt__"]
    assert len(interrupts) == 1, out
    return str(interrupts[0]["id"])


def _events(store: InterruptStore, thread_id: str, kind: str) -> list[Any]:
    return [e for e in store.history(thread_id) if e.type == kind]


def test_the_servers_user_is_the_actor_and_the_clients_claim_is_kept_aside(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = server
    alice, bob = running.client("tok-alice"), running.client("tok-bob")
    thread_id = _thread(alice)
    interrupt_id = _interrupted(alice, thread_id, actor="mallory")

    (mint,) = _events(store, thread_id, MINTED)
    assert mint.interrupt_id == interrupt_id
    assert mint.actor == "alice"
    assert mint.data["authenticated_by"] == "agent-server"
    assert mint.data["claimed_actor"] == "mallory"
    assert mint.data["payload"] == {"name": "refund", "amount": 42}

    # bob answers through the server, claiming to be carol: bob is recorded.
    out = bob.runs.wait(
        thread_id, "agent", command={"resume": {interrupt_id: {"approved": True}}},
        config={"configurable": {"actor": "carol"}},
    )
    assert out["answer"] == {"approved": True}
    (answer,) = _events(store, thread_id, RESUMED)
    assert answer.actor == "bob"
    assert answer.data["authenticated_by"] == "agent-server"
    assert answer.data["claimed_actor"] == "carol"
    assert answer.data["via"] == "direct"
    assert answer.data["decision"] == "approve"
    (record,) = [r for r in store.audit(thread_id=thread_id) if r.interrupt_id == interrupt_id]
    assert (record.actor, record.requested_by, record.authenticated_by) == ("bob", "alice", "agent-server")


def test_a_claim_equal_to_the_servers_user_is_not_repeated(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = server
    alice = running.client("tok-alice")
    thread_id = _thread(alice)
    interrupt_id = _interrupted(alice, thread_id, actor="alice")
    alice.runs.wait(thread_id, "agent", command={"resume": {interrupt_id: "yes"}})
    (mint,) = _events(store, thread_id, MINTED)
    (answer,) = _events(store, thread_id, RESUMED)
    for event in (mint, answer):
        assert event.actor == "alice"
        assert event.data["authenticated_by"] == "agent-server"
        assert "claimed_actor" not in event.data


def test_a_client_cannot_send_the_servers_user_key(server: tuple[AgentServer, InterruptStore]) -> None:
    """The server overwrites ``langgraph_auth_user_id`` with its own user's identity."""
    running, store = server
    alice = running.client("tok-alice")
    thread_id = _thread(alice)
    out = alice.runs.wait(thread_id, "agent", input={"amount": 1},
                          config={"configurable": {"langgraph_auth_user_id": "root", "actor": "root"}})
    assert out["__interrupt__"]
    (mint,) = _events(store, thread_id, MINTED)
    assert (mint.actor, mint.data["authenticated_by"], mint.data["claimed_actor"]) == (
        "alice", "agent-server", "root")


def test_a_request_without_credentials_is_refused(server: tuple[AgentServer, InterruptStore]) -> None:
    running, _ = server
    from langgraph_sdk.errors import APIStatusError

    with pytest.raises(APIStatusError) as refused:
        running.client().threads.create()
    assert refused.value.status_code in (401, 403)


def test_studios_built_in_user_is_not_an_authenticated_actor(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    """``langgraph dev`` admits ``x-auth-scheme: langsmith`` without credentials as
    ``langgraph-studio-user`` (no ``disable_studio_auth``): the client's claim stands,
    and nothing says it was authenticated."""
    running, store = server
    studio = running.client(headers={"x-auth-scheme": "langsmith"})
    thread_id = _thread(studio)
    interrupt_id = _interrupted(studio, thread_id, actor="dave")
    studio.runs.wait(thread_id, "agent", command={"resume": {interrupt_id: "ok"}})

    (mint,) = _events(store, thread_id, MINTED)
    assert mint.actor == "dave"
    (answer,) = _events(store, thread_id, RESUMED)
    assert answer.actor is None  # the answer's run claimed no actor
    for event in (mint, answer):
        assert "authenticated_by" not in event.data
        assert "claimed_actor" not in event.data
    (record,) = [r for r in store.audit(thread_id=thread_id) if r.interrupt_id == interrupt_id]
    assert record.authenticated_by is None


def test_list_pending_agrees_with_the_servers_interrupted_threads(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = server
    alice = running.client("tok-alice")
    waiting = [_thread(alice) for _ in range(3)]
    ids = [_interrupted(alice, t) for t in waiting]
    alice.runs.wait(waiting[1], "agent", command={"resume": {ids[1]: "done"}})

    pending = {(p["thread_id"], p["interrupt_id"]) for p in store.list_pending()}
    searched = alice.threads.search(status="interrupted", limit=1000)
    interrupted = {
        (t["thread_id"], i["id"])
        for t in searched
        for values in (t.get("interrupts") or {}).values()
        for i in values
    }
    # The module's other tests leave threads too: the whole server and the whole store agree.
    assert pending == interrupted
    assert (waiting[0], ids[0]) in pending and (waiting[2], ids[2]) in pending
    assert all(t != waiting[1] for t, _ in pending)


def test_the_servers_blocking_call_check_is_on(server: tuple[AgentServer, InterruptStore]) -> None:
    """The store passed its runs with the check on: a graph that blocks does not."""
    running, _ = server
    alice = running.client("tok-alice")
    thread_id = _thread(alice)
    run = alice.runs.create(thread_id, "blocker", input={})
    joined = alice.runs.join(thread_id, run["run_id"])
    assert joined["__error__"]["error"] == "BlockingError"
    assert alice.runs.get(thread_id, run["run_id"])["status"] == "error"


def test_the_server_loads_the_factory_by_its_dotted_path(
    server: tuple[AgentServer, InterruptStore],
) -> None:
    running, _ = server
    config = (Path(running.log_path).parent / "langgraph.json").read_text(encoding="utf-8")
    assert '"symfonic_store.agent_server.checkpointer"' in config
    assert "Using custom checkpointer: AsyncStoreCheckpointer" in running.logs()
