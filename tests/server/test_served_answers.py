"""``serve --langgraph-url`` and ``sweep --langgraph-url``: a real approval service process and
the sweep answer and wake graphs a real Agent Server serves, through ``langgraph-sdk``
(SPEC §13, §8's two-phase admission).

One Agent Server per backend for the module (:mod:`agent_server_rig`); its auth handler
knows the people (bearer tokens) and the service's own account (``x-api-key``). The graph
counts its side effect in a file, once per answer id. A second approval service on the same
store and server (``voting``) decides the graph's interrupt by a quorum of two (SPEC §15).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_server_rig import TOKENS, AgentServer, free_port, served
from cli_helpers import cli_env
from freezegun import freeze_time
from service_rig import Served, answer_path, digest_of, serve, write_json, write_tokens

from symfonic_store import InterruptStore
from symfonic_store.agent_server_client import ServedGraphs
from symfonic_store.events import EXPIRED, MINTED, RESUME_REJECTED, RESUMED, VOTED
from symfonic_store.services.sweep import CLAIM_LEASE_SECONDS

SERVICE_KEY = "key-of-the-approval-service"

AUTH = f'''
from langgraph_sdk import Auth

auth = Auth()
TOKENS = {TOKENS!r}
KEYS = {{{SERVICE_KEY!r}: "svc"}}


@auth.authenticate
async def authenticate(authorization: str | None, headers: dict) -> str:
    key = (headers or {{}}).get(b"x-api-key")
    if key is not None:
        user = KEYS.get(key.decode())
    else:
        scheme, _, token = (authorization or "").partition(" ")
        user = TOKENS.get(token) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown credentials")
    return user
'''
"""People by bearer token (as the rig's), and the approval service's account by API key."""

PAY_GRAPH = '''
import json
import os
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

EFFECTS = os.environ["SERVED_EFFECTS"]


class State(TypedDict, total=False):
    amount: int
    inbox: bool
    again: bool
    answer: Any
    confirmed: Any


def _request(state: State) -> Any:
    if state.get("inbox"):  # an Agent Inbox HumanInterrupt, named by its action
        return [{"action_request": {"action": "refund", "args": {"amount": state.get("amount")}},
                 "config": {"allow_ignore": True, "allow_respond": True, "allow_edit": False,
                            "allow_accept": True},
                 "description": "Refund?"}]
    return {"name": "refund", "amount": state.get("amount")}


def _approved(answer: Any) -> bool:
    if isinstance(answer, list) and answer and isinstance(answer[0], dict):
        return answer[0].get("type") == "accept"
    return isinstance(answer, dict) and answer.get("approved") is True


def pay(state: State, config: RunnableConfig) -> State:
    answer = interrupt(_request(state))
    if isinstance(answer, dict) and answer.get("explode"):
        raise ValueError("this answer is not one the graph takes")
    if _approved(answer):
        with open(EFFECTS, "a", encoding="utf-8") as f:  # a sync node runs in a worker thread
            f.write(json.dumps(config["configurable"].get("symfonic_answer_id")) + "\\n")
    return {"answer": answer}


def confirm(state: State) -> State:
    return {"confirmed": interrupt({"name": "confirm"})}


builder = StateGraph(State)
builder.add_node("pay", pay)
builder.add_node("confirm", confirm)
builder.add_edge(START, "pay")
builder.add_conditional_edges("pay", lambda s: "confirm" if s.get("again") else END)
builder.add_edge("confirm", END)
graph = builder.compile()
'''
"""Pauses once (``inbox``: with an Agent Inbox request); on an approval or an accept, pays
(appends the answer id to a file); ``again``: then pauses a second time (``confirm``)."""

PEOPLE = {"dana": ("tok-dana", ["approver"]), "erin": ("tok-erin", ["approver"])}
VOTERS = {**PEOPLE, "fay": ("tok-fay", ["approver"])}
"""The principals of the quorum's service (SPEC §15): a third, for a vote after one not taken."""
QUORUM_POLICY = {"refund": {"roles": ["approver"], "quorum": 2}}
"""The served graph's interrupt (named ``refund``) decided by two approvers."""


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
    ids=["sqlite", "postgres"],
)
def setup(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp(f"served-{request.param}")
    effects = folder / "effects.jsonl"
    effects.touch()
    with served(
        str(request.param), folder, graphs={"pay": PAY_GRAPH}, auth=AUTH,
        env={"SERVED_EFFECTS": str(effects)},
    ) as (running, url):
        key_file = folder / "langgraph.key"
        key_file.write_text(SERVICE_KEY + "\n")
        tokens = write_tokens(folder / "tokens.json", PEOPLE)
        store = InterruptStore(url)
        try:
            with serve(url, "--tokens", str(tokens), "--langgraph-url", running.url,
                       "--langgraph-api-key-file", str(key_file)) as service:
                yield {"server": running, "store": store, "url": url, "service": service,
                       "effects": effects, "key_file": key_file, "tokens": tokens}
        finally:
            store.close()


@pytest.fixture(scope="module")
def voting(setup: dict[str, Any]) -> Iterator[Served]:
    """A second approval service on the module's store and Agent Server, whose policy makes
    each answer to the served graph's interrupt a vote of a quorum of two."""
    folder = setup["key_file"].parent
    tokens = write_tokens(folder / "voters.json", VOTERS)
    policy = write_json(folder / "quorum-policy.json", QUORUM_POLICY)
    with serve(setup["url"], "--tokens", str(tokens), "--policy", str(policy),
               "--langgraph-url", setup["server"].url,
               "--langgraph-api-key-file", str(setup["key_file"])) as service:
        yield service


def _waiting(server: AgentServer, amount: int = 42, *, inbox: bool = False) -> tuple[str, str]:
    alice = server.client("tok-alice")
    thread_id = str(alice.threads.create(metadata={"test": uuid.uuid4().hex})["thread_id"])
    (pending,) = alice.runs.wait(thread_id, "pay", input={"amount": amount, "inbox": inbox})["__interrupt__"]
    return thread_id, str(pending["id"])


def _paid(effects: Path, store: InterruptStore, thread_id: str) -> int:
    """How many times the graph paid for the thread's interrupts (by their answer ids)."""
    from symfonic_store.agent_server_client import answer_id

    ours = {answer_id(thread_id, e.interrupt_id) for e in store.history(thread_id) if e.type == MINTED}
    return sum(1 for line in effects.read_text().splitlines() if json.loads(line) in ours)


def _post(setup: dict[str, Any], who: str, thread_id: str, interrupt_id: str, response: Any) -> Any:
    store = setup["store"]
    with setup["service"].client(PEOPLE[who][0]) as http:
        return http.post(answer_path(thread_id, interrupt_id), json={
            "response": response, "digest": digest_of(store, thread_id, interrupt_id)})


def _vote(
    setup: dict[str, Any], voting: Served, who: str, thread_id: str, interrupt_id: str, response: Any
) -> Any:
    with voting.client(VOTERS[who][0]) as http:
        return http.post(answer_path(thread_id, interrupt_id), json={
            "response": response, "digest": digest_of(setup["store"], thread_id, interrupt_id)})


def _runs(server: AgentServer, thread_id: str) -> int:
    """How many runs the Agent Server made on the thread (the first, then one per resume)."""
    return len(server.client("tok-alice").runs.list(thread_id, limit=100))


def test_the_service_answers_through_the_agent_server(setup: dict[str, Any]) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    reply = _post(setup, "dana", thread_id, interrupt_id, {"approved": True})
    assert reply.status_code == 200, reply.text
    assert reply.json()["outcome"] == "resumed"
    assert reply.json()["actor"] == "dana"
    assert reply.json()["decision"] == "approve"
    (resumed,) = [e for e in store.history(thread_id) if e.type == RESUMED]
    assert resumed.actor == "dana"  # the inbox principal, not the service's account
    assert resumed.data["authenticated_by"] == "service:tokens"
    assert resumed.data["server_user"] == "svc"
    assert server.client("tok-alice").threads.get_state(thread_id)["values"]["answer"] == {"approved": True}
    assert _paid(setup["effects"], store, thread_id) == 1
    # Answered: a second answer is refused and pays nothing.
    again = _post(setup, "erin", thread_id, interrupt_id, {"approved": True})
    assert again.status_code == 409, again.text
    assert _paid(setup["effects"], store, thread_id) == 1


def test_two_racing_answers_one_is_resumed_and_the_graph_acts_once(setup: dict[str, Any]) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    barrier = threading.Barrier(2)
    replies: dict[str, Any] = {}

    def answer(who: str) -> None:
        barrier.wait()
        replies[who] = _post(setup, who, thread_id, interrupt_id, {"approved": True})

    racers = [threading.Thread(target=answer, args=(who,)) for who in PEOPLE]
    for t in racers:
        t.start()
    for t in racers:
        t.join(timeout=120)
    statuses = sorted(r.status_code for r in replies.values())
    assert statuses == [200, 409], {k: (r.status_code, r.text) for k, r in replies.items()}
    winner = next(who for who, r in replies.items() if r.status_code == 200)
    loser = next(who for who, r in replies.items() if r.status_code == 409)
    (resumed,) = [e for e in store.history(thread_id) if e.type == RESUMED]
    assert resumed.actor == winner
    refused = [e for e in store.history(thread_id) if e.type == RESUME_REJECTED]
    assert [e.actor for e in refused] == [loser]
    assert _paid(setup["effects"], store, thread_id) == 1


def test_an_answer_the_graph_raises_on_is_not_taken_and_the_next_is_admitted(
    setup: dict[str, Any],
) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    reply = _post(setup, "dana", thread_id, interrupt_id, {"explode": True})
    assert reply.status_code == 422, reply.text
    assert reply.json()["outcome"] == "not_taken"
    (refused,) = [e for e in store.history(thread_id) if e.type == RESUME_REJECTED]
    assert (refused.actor, refused.data["why"]) == ("dana", "not_taken")
    assert [o["interrupt_id"] for o in store.open_interrupts(thread_id)] == [interrupt_id]
    # The next answer is the one the node receives, and the graph pays once.
    assert _post(setup, "erin", thread_id, interrupt_id, {"approved": True}).status_code == 200
    assert server.client("tok-alice").threads.get_state(thread_id)["values"]["answer"] == {"approved": True}
    (resumed,) = [e for e in store.history(thread_id) if e.type == RESUMED]
    assert resumed.actor == "erin"
    assert _paid(setup["effects"], store, thread_id) == 1


def test_what_a_served_run_mints_after_an_answer_keeps_the_answered_ones_tenant(
    setup: dict[str, Any],
) -> None:
    """The answer's run carries the answered interrupt's tenant: the graph's next interrupt
    is that tenant's, not the service account's (which has none)."""
    server, store = setup["server"], setup["store"]
    alice = server.client("tok-alice")
    thread_id = str(alice.threads.create(metadata={"test": uuid.uuid4().hex})["thread_id"])
    (first,) = alice.runs.wait(thread_id, "pay", input={"amount": 7, "again": True},
                               config={"configurable": {"tenant": "acme"}})["__interrupt__"]
    ServedGraphs(store, server.url, api_key=SERVICE_KEY).answer(
        thread_id, str(first["id"]), {"approved": True}, actor="dana")
    (second,) = store.open_interrupts(thread_id)
    assert second["interrupt_id"] != first["id"]
    assert store.interrupt_tenants([(thread_id, str(first["id"])), (thread_id, second["interrupt_id"])]) == {
        (thread_id, str(first["id"])): "acme", (thread_id, second["interrupt_id"]): "acme"}


def test_an_unreachable_agent_server_is_a_503_and_nothing_is_written(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    before = list(store.history(thread_id))
    dead = f"http://127.0.0.1:{free_port()}"
    with serve(setup["url"], "--tokens", str(setup["tokens"]), "--langgraph-url", dead,
               "--langgraph-api-key-file", str(setup["key_file"])) as broken:
        with broken.client(PEOPLE["dana"][0]) as http:
            reply = http.post(answer_path(thread_id, interrupt_id), json={
                "response": {"approved": True}, "digest": digest_of(store, thread_id, interrupt_id)})
        assert SERVICE_KEY not in broken.logs()
    assert reply.status_code == 503, reply.text
    assert "unreachable" in reply.json()["error"] and dead in reply.json()["error"]
    assert SERVICE_KEY not in reply.text
    assert list(store.history(thread_id)) == before
    assert [o["interrupt_id"] for o in store.open_interrupts(thread_id)] == [interrupt_id]
    # The real server still takes the next answer.
    assert _post(setup, "erin", thread_id, interrupt_id, {"approved": True}).status_code == 200


def test_a_refused_api_key_is_a_502_naming_the_key_setting_and_nothing_is_written(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    before = list(store.history(thread_id))
    wrong = tmp_path / "wrong.key"
    wrong.write_text("not-the-key\n")
    with serve(setup["url"], "--tokens", str(setup["tokens"]), "--langgraph-url", server.url,
               "--langgraph-api-key-file", str(wrong)) as refused:
        with refused.client(PEOPLE["dana"][0]) as http:
            reply = http.post(answer_path(thread_id, interrupt_id), json={
                "response": {"approved": True}, "digest": digest_of(store, thread_id, interrupt_id)})
    assert reply.status_code == 502, reply.text
    assert "--langgraph-api-key-file" in reply.json()["error"]
    assert "not-the-key" not in reply.text
    assert list(store.history(thread_id)) == before


def test_an_unreachable_server_leaves_the_wake_up_owed_and_the_next_sweep_wakes_the_graph(
    setup: dict[str, Any],
) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    dead = ServedGraphs(store, f"http://127.0.0.1:{free_port()}", api_key=SERVICE_KEY)
    report = store.sweep(ttl_seconds=0, thread_ids=[thread_id], on_expired=dead.waker())
    assert report.expired == [(thread_id, interrupt_id, "ttl")]
    assert [(t, i) for t, i, _ in report.wake_failures] == [(thread_id, interrupt_id)]
    assert "unreachable" in report.wake_failures[0][2]
    assert [(w["thread_id"], w["interrupt_id"]) for w in store.list_wakeups()
            if w["thread_id"] == thread_id] == [(thread_id, interrupt_id)]
    alive = ServedGraphs(store, server.url, api_key=SERVICE_KEY)
    again = store.sweep(ttl_seconds=0, thread_ids=[thread_id], on_expired=alive.waker())
    assert again.redelivered == [(thread_id, interrupt_id, "ttl")]
    assert not again.wake_failures
    state = server.client("tok-alice").threads.get_state(thread_id)
    assert state["values"]["answer"] == {"expired": True, "reason": "ttl"}
    assert state["interrupts"] == []
    assert [e.type for e in store.history(thread_id)] == [MINTED, EXPIRED]  # no resume recorded
    assert not [w for w in store.list_wakeups() if w["thread_id"] == thread_id]
    assert _paid(setup["effects"], store, thread_id) == 0


def test_a_claim_whose_service_stopped_is_settled_by_the_sweep_from_the_servers_thread(
    setup: dict[str, Any],
) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    # A service claimed, then stopped before its run reached the server.
    store.claim(thread_id, interrupt_id, {"approved": True}, actor="dana", authenticated_by="service:tokens")
    alive = ServedGraphs(store, server.url, api_key=SERVICE_KEY)
    later = datetime.now(UTC) + timedelta(seconds=CLAIM_LEASE_SECONDS + 60)
    # Only this process's clock moves (the sweep's); the server's thread is read as it is.
    with freeze_time(later, tick=True, ignore=["_pytest.timing"]):
        report = store.sweep(thread_ids=[thread_id], on_expired=alive.waker())
    # The server's thread still waits on it: not shown taken, so the outcome is unknown
    # (SPEC §12), never "not taken", and an operator settles it.
    assert report.claims_settled == [(thread_id, interrupt_id, "outcome_unknown")]
    (marked,) = [e for e in store.history(thread_id) if e.type == RESUME_REJECTED]
    assert (marked.actor, marked.data["why"]) == ("dana", "outcome_unknown")
    store.settle(thread_id, interrupt_id, outcome="not_taken", actor="ops")
    assert _post(setup, "erin", thread_id, interrupt_id, {"approved": True}).status_code == 200
    assert _paid(setup["effects"], store, thread_id) == 1


def test_a_quorum_of_two_resumes_the_served_graph_once_with_both_approvers(
    setup: dict[str, Any], voting: Served,
) -> None:
    """The first vote is 200 voted 1 of 2 and the served thread stays interrupted, nothing
    paid; the same principal again is 409 'already voted', nothing written; the second
    principal's vote resumes the served graph once, with both approvers on the resume and
    in the audit."""
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    alice = server.client("tok-alice")
    first = _vote(setup, voting, "dana", thread_id, interrupt_id, {"approved": True})
    assert (first.status_code, first.json()) == (200, {"outcome": "voted", "votes": 1, "needed": 2})
    assert alice.threads.get(thread_id)["status"] == "interrupted"
    assert [i["id"] for i in alice.threads.get_state(thread_id)["interrupts"]] == [interrupt_id]
    assert _runs(server, thread_id) == 1
    assert _paid(setup["effects"], store, thread_id) == 0
    assert [e.type for e in store.history(thread_id)] == [MINTED, VOTED]
    before = list(store.history(thread_id))
    again = _vote(setup, voting, "dana", thread_id, interrupt_id, {"approved": True})
    assert (again.status_code, again.json()) == (409, {"error": "already voted"})
    assert list(store.history(thread_id)) == before
    assert _runs(server, thread_id) == 1
    done = _vote(setup, voting, "erin", thread_id, interrupt_id, {"approved": True})
    assert done.status_code == 200, done.text
    assert (done.json()["outcome"], done.json()["approvers"]) == ("resumed", ["dana", "erin"])
    history = store.history(thread_id)
    assert [(e.type, e.actor) for e in history] == [
        (MINTED, "alice"), (VOTED, "dana"), (VOTED, "erin"), (RESUMED, "erin")]
    resumed = history[-1]
    assert resumed.data["approvers"] == ["dana", "erin"]
    assert (resumed.data["authenticated_by"], resumed.data["server_user"]) == ("service:tokens", "svc")
    assert alice.threads.get(thread_id)["status"] == "idle"
    assert alice.threads.get_state(thread_id)["values"]["answer"] == {"approved": True}
    assert _runs(server, thread_id) == 2
    assert _paid(setup["effects"], store, thread_id) == 1
    (record,) = store.audit(thread_id=thread_id)
    assert list(record.approvers) == ["dana", "erin"]
    # Decided: a late vote is refused, and the graph runs no more.
    late = _vote(setup, voting, "fay", thread_id, interrupt_id, {"approved": True})
    assert late.status_code == 409, late.text
    assert _runs(server, thread_id) == 2 and _paid(setup["effects"], store, thread_id) == 1


def test_a_reject_vote_vetoes_and_resumes_the_served_graph_with_the_rejection(
    setup: dict[str, Any], voting: Served,
) -> None:
    """After one approving vote, a reject ends the interrupt at once: the served graph
    resumes with the rejection (no approvers), and pays nothing."""
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    assert _vote(setup, voting, "dana", thread_id, interrupt_id, {"approved": True}).status_code == 200
    vetoed = _vote(setup, voting, "erin", thread_id, interrupt_id, {"approved": False})
    assert vetoed.status_code == 200, vetoed.text
    assert (vetoed.json()["outcome"], vetoed.json()["decision"]) == ("resumed", "reject")
    assert "approvers" not in vetoed.json()
    (resumed,) = [e for e in store.history(thread_id) if e.type == RESUMED]
    assert resumed.actor == "erin" and resumed.data["response"] == {"approved": False}
    assert "approvers" not in resumed.data
    assert server.client("tok-alice").threads.get_state(thread_id)["values"]["answer"] == {"approved": False}
    assert _runs(server, thread_id) == 2
    assert _paid(setup["effects"], store, thread_id) == 0
    (record,) = store.audit(thread_id=thread_id)
    assert list(record.approvers) == []


def test_a_completing_vote_the_served_graph_does_not_take_leaves_the_votes_standing(
    setup: dict[str, Any], voting: Served,
) -> None:
    """The vote that completes the quorum is one the served graph raises on: 422 not_taken,
    the interrupt stays open, and the next approving vote completes it (the graph pays once)."""
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    assert _vote(setup, voting, "dana", thread_id, interrupt_id, {"approved": True}).status_code == 200
    failed = _vote(setup, voting, "erin", thread_id, interrupt_id, {"approved": True, "explode": True})
    assert failed.status_code == 422, failed.text
    assert failed.json()["outcome"] == "not_taken"
    assert [o["interrupt_id"] for o in store.open_interrupts(thread_id)] == [interrupt_id]
    # The failed run leaves the thread's status "error", still waiting on the interrupt.
    assert [i["id"] for i in server.client("tok-alice").threads.get_state(thread_id)["interrupts"]] == [interrupt_id]
    done = _vote(setup, voting, "fay", thread_id, interrupt_id, {"approved": True})
    assert done.status_code == 200 and done.json()["outcome"] == "resumed", done.text
    history = store.history(thread_id)
    assert [e.actor for e in history if e.type == VOTED] == ["dana", "erin", "fay"]
    (resumed,) = [e for e in history if e.type == RESUMED]
    approvers = resumed.data["approvers"]
    assert resumed.actor == "fay" and approvers[-1] == "fay"
    assert len(set(approvers)) == 2 and set(approvers) <= {"dana", "erin", "fay"}
    assert server.client("tok-alice").threads.get_state(thread_id)["values"]["answer"] == {"approved": True}
    assert _paid(setup["effects"], store, thread_id) == 1


def test_agent_inbox_accepts_are_votes_of_the_quorum(setup: dict[str, Any], voting: Served) -> None:
    """An Agent Inbox request answered as Agent Inbox answers it (``[{"type": "accept"}]``):
    each accept is an approving vote, read by the request's schema (SPEC §8's rules), and
    the second resumes the served graph once with both approvers."""
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server, inbox=True)
    accept = [{"type": "accept", "args": None}]
    first = _vote(setup, voting, "dana", thread_id, interrupt_id, accept)
    assert (first.status_code, first.json()) == (200, {"outcome": "voted", "votes": 1, "needed": 2})
    (voted,) = [e for e in store.history(thread_id) if e.type == VOTED]
    assert voted.data["decision"] == "accept"
    done = _vote(setup, voting, "erin", thread_id, interrupt_id, accept)
    assert done.status_code == 200, done.text
    assert (done.json()["outcome"], done.json()["decision"]) == ("resumed", "accept")
    (resumed,) = [e for e in store.history(thread_id) if e.type == RESUMED]
    assert (resumed.actor, resumed.data["approvers"]) == ("erin", ["dana", "erin"])
    assert server.client("tok-alice").threads.get_state(thread_id)["values"]["answer"] == accept
    assert _paid(setup["effects"], store, thread_id) == 1


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "symfonic_store.cli", "--db", url, *args],
        capture_output=True, text=True, env=cli_env({}), timeout=300,
    )


def test_sweep_with_an_unreachable_langgraph_url_says_so_and_expires_nothing(setup: dict[str, Any]) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    dead = f"http://127.0.0.1:{free_port()}"
    done = _cli(setup["url"], "sweep", "--ttl", "0", "--langgraph-url", dead,
                "--langgraph-api-key-file", str(setup["key_file"]))
    assert done.returncode != 0
    assert "unreachable" in done.stderr and dead in done.stderr, done.stderr
    assert SERVICE_KEY not in done.stderr + done.stdout
    assert [o["interrupt_id"] for o in store.open_interrupts(thread_id)] == [interrupt_id]


def test_sweep_with_a_refused_key_says_so_and_expires_nothing(setup: dict[str, Any], tmp_path: Path) -> None:
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    wrong = tmp_path / "wrong.key"
    wrong.write_text("not-the-key\n")
    done = _cli(setup["url"], "sweep", "--ttl", "0", "--langgraph-url", server.url,
                "--langgraph-api-key-file", str(wrong))
    assert done.returncode != 0
    assert "--langgraph-api-key-file" in done.stderr, done.stderr
    assert "not-the-key" not in done.stderr + done.stdout
    assert [o["interrupt_id"] for o in store.open_interrupts(thread_id)] == [interrupt_id]


def test_sweep_with_langgraph_url_wakes_the_served_graph(setup: dict[str, Any]) -> None:
    # Last in the module: --ttl 0 expires every open interrupt of the module's store.
    server, store = setup["server"], setup["store"]
    thread_id, interrupt_id = _waiting(server)
    done = _cli(setup["url"], "sweep", "--ttl", "0", "--langgraph-url", server.url,
                "--langgraph-api-key-file", str(setup["key_file"]))
    assert done.returncode == 0, done.stderr
    assert "woke" in done.stdout and interrupt_id in done.stdout
    state = server.client("tok-alice").threads.get_state(thread_id)
    assert state["values"]["answer"] == {"expired": True, "reason": "ttl"}
    assert [e.type for e in store.history(thread_id)] == [MINTED, EXPIRED]
