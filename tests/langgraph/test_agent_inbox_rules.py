"""The rules behind Agent Inbox's thread-level ignore and a served run's ids, in process
(SPEC §13): on the store's own checkpointer, which the Agent Server uses, on each backend.
The real server's cases are in ``test_agent_inbox.py``."""

from __future__ import annotations

import json
import sys
import types
from typing import Any, TypedDict

import pytest
from cli_helpers import run_cli
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from symfonic_store import InterruptStore
from symfonic_store.events import EXPIRED, MINTED
from symfonic_store.langgraph.served_records import request_user, served_ids, update_closing


class State(TypedDict, total=False):
    to: str
    response: Any


def _review(state: State) -> State:
    request = {"action_request": {"action": "send_email", "args": {}}, "config": {}}
    return {"response": interrupt([request])[0]}


def _graph(store: InterruptStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("review", _review)
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=store.checkpointer())


SERVED = {"graph_id": "inbox", "assistant_id": "a-1"}


def _paused(store: InterruptStore, thread_id: str) -> tuple[Any, dict[str, Any], str]:
    graph = _graph(store)
    config = {"configurable": {"thread_id": thread_id, **SERVED}}
    (pending,) = graph.invoke({"to": "bob"}, config)["__interrupt__"]
    return graph, config, str(pending.id)


def test_a_served_runs_mint_records_its_graph_and_assistant(store: InterruptStore) -> None:
    _paused(store, "t-ids")
    (mint,) = [e for e in store.history("t-ids") if e.type == MINTED]
    assert (mint.data["graph_id"], mint.data["assistant_id"], mint.data["graph"]) == ("inbox", "a-1", "inbox")


def test_an_update_as_end_without_values_is_the_thread_level_ignore(store: InterruptStore) -> None:
    graph, config, interrupt_id = _paused(store, "t-end")
    graph.update_state(config, None, as_node=END)
    (closed,) = [e for e in store.history("t-end") if e.type == EXPIRED]
    assert (closed.interrupt_id, closed.data["reason"], closed.data["decision"]) == (
        interrupt_id, "superseded", "ignore")
    # Outside an Agent Server no request names a user.
    assert closed.actor is None and "authenticated_by" not in closed.data
    (record,) = store.audit(thread_id="t-end")
    assert (record.decision, record.decision_source, record.authenticated_by) == ("ignore", "recorded", None)


def _served_user(monkeypatch: pytest.MonkeyPatch, user: Any) -> None:
    """The Agent Server's per-request auth context, as langgraph-api holds it, naming ``user``."""
    fake = types.ModuleType("langgraph_api.utils")
    fake.get_auth_ctx = lambda: None if user is None else types.SimpleNamespace(user=user)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langgraph_api.utils", fake)


def test_the_thread_level_ignore_is_audited_with_its_decision_and_who_decided(
    store: InterruptStore, migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §13 (§18 amendment): the audit shows the ignore's recorded decision and
    ``authenticated_by``; the expiry says the checkpointer detected it, not a gateway."""
    graph, config, interrupt_id = _paused(store, "t-audit")
    _paused(store, "t-other")  # still pending: no decision
    _served_user(monkeypatch, _User("bob", True))
    graph.update_state(config, None, as_node=END)
    (closed,) = [e for e in store.history("t-audit") if e.type == EXPIRED]
    assert (closed.actor, closed.data["detected_by"], closed.data["authenticated_by"]) == (
        "bob", "checkpointer", "agent-server")
    (record,) = store.audit(thread_id="t-audit")
    assert (record.outcome, record.reason, record.actor) == ("expired", "superseded", "bob")
    assert (record.decision, record.decision_source, record.authenticated_by) == (
        "ignore", "recorded", "agent-server")
    assert [(r.thread_id, r.interrupt_id) for r in store.audit(decision="ignore")] == [("t-audit", interrupt_id)]
    listed = json.loads(run_cli("audit", "--decision", "ignore", "--format", "json", db=migrated_url).stdout)
    assert [(r["thread_id"], r["decision"], r["decision_source"], r["authenticated_by"]) for r in listed] == [
        ("t-audit", "ignore", "recorded", "agent-server")]
    assert store.verify().ok


def test_an_update_with_values_is_a_plain_superseded(store: InterruptStore) -> None:
    graph, config, interrupt_id = _paused(store, "t-values")
    graph.update_state(config, {"response": {"type": "accept"}}, as_node="review")
    (closed,) = [e for e in store.history("t-values") if e.type == EXPIRED]
    assert (closed.interrupt_id, closed.data["reason"]) == (interrupt_id, "superseded")
    assert "decision" not in closed.data


def test_served_ids_need_both_keys() -> None:
    assert served_ids(SERVED) == SERVED
    assert served_ids({"graph_id": "inbox"}) == {}
    assert served_ids({"graph_id": "", "assistant_id": "a"}) == {}


class _User:
    def __init__(self, identity: str, authenticated: bool) -> None:
        self.identity = identity
        self.is_authenticated = authenticated


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        (_User("bob", True), "bob"),
        (_User("langgraph-studio-user", True), None),  # Studio's built-in user
        (_User("", False), None),  # no auth configured: an empty identity
        (_User("mallory", False), None),
        (None, None),
    ],
)
def test_the_request_user_is_the_servers_authenticated_one(
    monkeypatch: pytest.MonkeyPatch, user: Any, expected: str | None
) -> None:
    _served_user(monkeypatch, user)
    assert request_user() == expected
    closing = update_closing({"source": "update"}, {"channel_values": {}}, {"branch:to:x": 2})
    assert closing == {
        "decision": "ignore",
        "decided_by": expected,
        "authenticated_by": None if expected is None else "agent-server",
    }


def test_no_server_no_request_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "langgraph_api.utils", raising=False)
    assert request_user() is None
    assert update_closing({"source": "loop"}, {"channel_values": {}}, {}) == {}
