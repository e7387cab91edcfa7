"""``--langgraph-url``'s settings (SPEC §13) -- the API key's sources, the URL -- and what an
answer leaves behind when the Agent Server fails (a stub client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from symfonic_store import InterruptStore
from symfonic_store.agent_server_client import AgentServerError, ServedGraphs, read_api_key
from symfonic_store.errors import InvalidInputError
from symfonic_store.events import RESUME_REJECTED


def test_the_key_file_wins_over_the_environment(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("  from-the-file\n")
    assert read_api_key(key, {"LANGGRAPH_API_KEY": "from-env"}) == "from-the-file"
    assert read_api_key(None, {"LANGGRAPH_API_KEY": " from-env "}) == "from-env"
    assert read_api_key(None, {}) is None


def test_an_unreadable_or_empty_key_file_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(InvalidInputError, match="is empty"):
        read_api_key(empty, {})
    with pytest.raises(InvalidInputError, match="cannot be read"):
        read_api_key(tmp_path / "missing", {})


def test_the_url_must_be_http(store: InterruptStore) -> None:
    with pytest.raises(InvalidInputError, match="--langgraph-url"):
        ServedGraphs(store, "127.0.0.1:2024", client=object())
    assert ServedGraphs(store, "http://127.0.0.1:2024/", client=object()).url == "http://127.0.0.1:2024"


# --- what a failing server leaves behind (a stub client: the real server's cases are in
# test_served_answers.py) ----------------------------------------------------------------

class _State(TypedDict, total=False):
    answer: Any


def _ask(state: _State) -> _State:
    return {"answer": interrupt({"name": "refund"})}


def _served_mint(store: InterruptStore, thread_id: str) -> str:
    """A mint as the Agent Server's checkpointer records it (graph_id, assistant_id)."""
    builder = StateGraph(_State)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=store.checkpointer())
    config = {"configurable": {"thread_id": thread_id, "graph_id": "pay", "assistant_id": "a-1"}}
    (pending,) = graph.invoke({}, config)["__interrupt__"]
    return str(pending.id)


class _Stub:
    """A langgraph-sdk client whose thread waits on ``waiting`` and whose runs fail with ``error``."""

    def __init__(self, waiting: str, error: Exception) -> None:
        self.threads = self
        self.runs = self
        self.assistants = self
        self._waiting = waiting
        self._error = error
        self.sent: list[dict[str, Any]] = []

    def get_state(self, thread_id: str) -> dict[str, Any]:
        return {"interrupts": [{"id": self._waiting}], "tasks": []}

    def search(self, **kwargs: Any) -> list[Any]:
        return []

    def wait(self, thread_id: str, assistant: str, **kwargs: Any) -> Any:
        self.sent.append({"assistant": assistant, **kwargs})
        raise self._error


REQUEST = httpx.Request("POST", "http://127.0.0.1:9/threads/t/runs/wait")


def test_a_timeout_after_the_run_was_sent_keeps_the_claim(store: InterruptStore) -> None:
    interrupt_id = _served_mint(store, "t-timeout")
    stub = _Stub(interrupt_id, httpx.ReadTimeout("timed out", request=REQUEST))
    served = ServedGraphs(store, "http://127.0.0.1:9", client=stub)
    with pytest.raises(AgentServerError) as caught:
        served.answer("t-timeout", interrupt_id, {"approved": True}, actor="dana")
    assert (caught.value.status, caught.value.outcome_unknown) == (503, True)
    assert stub.sent[0]["assistant"] == "a-1"
    assert stub.sent[0]["command"] == {"resume": {interrupt_id: {"approved": True}}}
    (opened,) = store.open_interrupts("t-timeout")
    assert opened["claimed_by"] == "dana"  # kept: the sweep settles it from the thread
    assert not [e for e in store.history("t-timeout") if e.type == RESUME_REJECTED]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (httpx.ConnectError("refused", request=REQUEST), 503),
        (httpx.HTTPStatusError("boom", request=REQUEST, response=httpx.Response(500, request=REQUEST)), 502),
    ],
)
def test_a_run_that_never_happened_releases_the_claim(
    store: InterruptStore, error: Exception, status: int
) -> None:
    interrupt_id = _served_mint(store, "t-failed")
    served = ServedGraphs(store, "http://127.0.0.1:9", client=_Stub(interrupt_id, error))
    with pytest.raises(AgentServerError) as caught:
        served.answer("t-failed", interrupt_id, {"approved": True}, actor="dana")
    assert (caught.value.status, caught.value.outcome_unknown) == (status, False)
    (opened,) = store.open_interrupts("t-failed")
    assert opened.get("claimed_by") is None  # open for the next answer
    (released,) = [e for e in store.history("t-failed") if e.type == RESUME_REJECTED]
    assert (released.actor, released.data["why"]) == ("dana", "not_taken")
