"""The SQLite writer skips the replaced-checkpoint check read where nothing can have waited.

A put asks whether the thread waited at the checkpoint it replaces. On SQLite the
writer's connection knows the checkpoints it made itself, as long as no other connection
committed (``PRAGMA data_version``) and none of its own steps wrote a record: there the
read is skipped. Every other case still reads (the waits are recorded as before).
"""

from __future__ import annotations

from typing import Any

import pytest
from native_graphs import Wires, breakpoint_graph

from symfonic_store import InterruptGateway, InterruptStore
from symfonic_store.db.statements import native as native_sql
from symfonic_store.events import RESUME_REJECTED, RESUMED
from symfonic_store.store import admission


@pytest.fixture
def sqlite_store(migrated_sqlite_url: str) -> Any:
    """SQLite only: PostgreSQL sends the check with the COMMIT instead (one round trip)."""
    store = InterruptStore(migrated_sqlite_url)
    yield store
    store.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (thread, checkpoint) of every check read the puts make."""
    seen: list[tuple[str, str]] = []

    def counted(conn: Any, thread_id: str, checkpoint_id: str, breakpoint_id: str) -> bool:
        seen.append((thread_id, checkpoint_id))
        return native_sql.waits_at(conn, thread_id, checkpoint_id, breakpoint_id)

    monkeypatch.setattr(admission, "waits_at", counted)
    return seen


def _config(thread_id: str, **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, **configurable}}


def test_a_run_of_the_writers_own_checkpoints_reads_nothing(sqlite_store: InterruptStore, reads: list[Any]) -> None:
    wires = Wires()
    graph = breakpoint_graph(sqlite_store.checkpointer(), wires)
    graph.invoke({}, _config("t-own"))  # input, plan: each put replaces the writer's own
    assert reads == []
    history = list(graph.get_state_history(_config("t-own")))
    assert len(history) >= 2


def test_a_breakpoint_minted_on_another_connection_is_read_and_recorded(
    sqlite_store: InterruptStore, reads: list[Any]
) -> None:
    """The gateway mints on the store's pooled connection: the writer's connection sees
    another commit, so the put past the breakpoint reads, and the bypass is recorded."""
    wires = Wires()
    graph = breakpoint_graph(sqlite_store.checkpointer(), wires)
    gate = InterruptGateway(graph, sqlite_store)
    gate.invoke({}, _config("t-bp"))
    (opened,) = sqlite_store.open_interrupts("t-bp")
    before = len(reads)
    graph.invoke(None, _config("t-bp", actor="mallory"))
    assert wires.sent == [999]
    paused_at = opened["interrupt_id"].removeprefix("bp-")
    assert ("t-bp", paused_at) in reads[before:]
    (bypass,) = [e for e in sqlite_store.history("t-bp") if e.type == RESUMED]
    assert bypass.actor == "mallory" and bypass.data["bypass"] is True


def test_a_refused_breakpoint_run_past_is_recorded_after_a_run_of_own_checkpoints(
    sqlite_store: InterruptStore, reads: list[Any]
) -> None:
    wires = Wires()
    graph = breakpoint_graph(sqlite_store.checkpointer(), wires)
    gate = InterruptGateway(graph, sqlite_store)
    gate.invoke({}, _config("t-ref"))
    (opened,) = sqlite_store.open_interrupts("t-ref")
    gate.answer("t-ref", opened["interrupt_id"], {"approved": False}, actor="bob")
    graph.invoke(None, _config("t-ref", actor="mallory"))
    rejected = [e for e in sqlite_store.history("t-ref") if e.type == RESUME_REJECTED and e.data.get("via") == "direct"]
    assert [e.actor for e in rejected] == ["mallory"]


def test_a_langgraph_interrupt_recorded_by_the_writer_itself_is_read_and_superseded(
    sqlite_store: InterruptStore, reads: list[Any]
) -> None:
    """The writer's own step records a LangGraph interrupt at a checkpoint (no other
    connection commits): new input past it still reads, and supersedes it."""
    from test_agent_server_actor import interrupt_graph

    from symfonic_store.events import EXPIRED

    graph = interrupt_graph(sqlite_store.checkpointer())
    graph.invoke({"amount": 3}, _config("t-native"))
    (pending,) = sqlite_store.open_interrupts("t-native")
    graph.invoke({"amount": 4}, _config("t-native"))
    (expired,) = [e for e in sqlite_store.history("t-native") if e.type == EXPIRED]
    assert expired.interrupt_id == pending["interrupt_id"]
    assert expired.data["reason"] == "superseded"
    assert ("t-native", pending["checkpoint_id"]) in reads
