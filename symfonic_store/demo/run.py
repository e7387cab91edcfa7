"""``symfonic-store demo``: the refund agent on a real store, start to finish, offline.

Three customers ask the scripted agent (:mod:`symfonic_store.agent`) for a refund; each
request pauses its thread on an approval interrupt. ``alice`` approves one through
``store.resume`` and the refund is issued; ``bob`` rejects one; nobody answers the third,
and a sweep expires it and wakes its graph, so the agent tells the customer the request
timed out. Every step lands in the event log; the command line then prints the audit
and a replay.

The store is the embedded SQLite file given (``symfonic_demo.db`` by default) and the
graphs' checkpoints live in the same file (``SqliteSaver``). Each run uses new thread
ids, so running the demo again adds to the same store, and it never writes to a thread
it did not create (its sweep is limited to its own threads).
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from ..db.urls import parse_url, safe_url
from ..events import StoredEvent
from ..langgraph import make_graph_waker
from ..services.audit import AuditRecord
from ..store import InterruptStore
from .agent import build_agent_graph

Say = Callable[[str], None]


@dataclass
class DemoRun:
    """What a demo run did: its threads, the audit of the store, one thread's replay."""

    run: str
    threads: dict[str, str] = field(default_factory=dict)
    """``role -> thread_id``: ``approved``, ``rejected``, ``expired``."""
    audit: list[AuditRecord] = field(default_factory=list)
    replay_thread: str = ""
    replay: list[tuple[StoredEvent, dict[str, Any]]] = field(default_factory=list)


@contextlib.contextmanager
def _checkpointer(url: str) -> Iterator[Any]:
    """A SqliteSaver on the store's own SQLite file; in memory for any other database."""
    from ..db.backends import backend_for_url

    parsed = parse_url(url)
    backend = backend_for_url(parsed)
    file = None if backend is None or backend.checkpoint_saver != "sqlite" else backend.database_file(parsed)
    if file is None:
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    file = file.expanduser()
    file.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(file), check_same_thread=False, timeout=10)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _last_words(result: dict[str, Any]) -> str:
    for message in reversed(result.get("messages") or []):
        if isinstance(message, AIMessage) and message.content:
            return str(message.content)
    return "(no reply)"


def run_demo(url: str, *, say: Say) -> DemoRun:
    """Run the demo against the store at ``url`` (migrated first); narrate with ``say``."""
    run = f"demo-{uuid.uuid4().hex[:8]}"
    outcome = DemoRun(run=run)
    with InterruptStore(url) as store, _checkpointer(url) as checkpointer:
        store.setup()
        graph = build_agent_graph(store, checkpointer=checkpointer)
        say(f"symfonic-store demo on {safe_url(url)} (threads {run}-*)")

        def ask(role: str, request: str) -> tuple[str, str]:
            thread_id = f"{run}-{role}"
            outcome.threads[role] = thread_id
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            say(f"\n[{thread_id}] customer: {request}")
            graph.invoke({"messages": [HumanMessage(request)]}, config)
            marker = store.pending(thread_id)
            if marker is None:
                raise RuntimeError(f"the agent did not ask for approval on {thread_id}")
            payload = marker.get("payload") or {}
            say(
                f"[{thread_id}] agent pauses on interrupt {marker['interrupt_id']} "
                f"({marker['name']}): {payload.get('question', payload)}"
            )
            return thread_id, str(marker["interrupt_id"])

        def answer(thread_id: str, interrupt_id: str, actor: str, response: dict[str, Any]) -> None:
            command = store.resume(thread_id, interrupt_id, response, actor=actor)
            say(f"[{thread_id}] {actor} answers {response}")
            config: RunnableConfig = {"configurable": {"thread_id": thread_id, "actor": actor}}
            say(f"[{thread_id}] agent: {_last_words(graph.invoke(command, config))}")

        approved = ask("approved", "Please refund $420 to order 1181, the parcel never arrived.")
        rejected = ask("rejected", "Refund $75 to order 2040 please.")
        abandoned = ask("expired", "I want a refund of $1300 for order 3090.")

        answer(*approved, "alice", {"approved": True})
        answer(*rejected, "bob", {"approved": False, "note": "outside the 30-day window"})

        # Nobody answers the third request. A TTL of zero makes it stale at once (no
        # waiting); the sweep expires it and wakes its graph. The sweep is limited to the
        # demo's own threads: with --db the store may hold other people's threads, and an
        # expiry in an append-only log cannot be taken back.
        say(f"\n[{abandoned[0]}] nobody answers; the cron sweep runs")
        report = store.sweep(
            ttl_seconds=0,
            on_expired=make_graph_waker(graph),
            thread_ids=list(outcome.threads.values()),
        )
        say(str(report))
        state = graph.get_state({"configurable": {"thread_id": abandoned[0]}})
        say(f"[{abandoned[0]}] agent: {_last_words(dict(state.values))}")

        outcome.audit = store.audit()
        outcome.replay_thread = approved[0]
        outcome.replay = list(store.replay(approved[0]))
    return outcome


__all__ = ["DemoRun", "run_demo"]
