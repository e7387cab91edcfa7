"""Benchmark 6 -- audit: "who approved what" across 10,000 threads.

The store answers with one ``audit()`` call. The peer is LangGraph alone: the approver
is kept in the graph state (it travels in the answer, so it lands in the approval's
``ToolMessage``) and is found by walking each thread's checkpoint history with
``get_state_history``. Both answers must agree. Target: the store >= 100x faster.

The threads are real: the refund agent (:mod:`symfonic_store.agent`, SqliteSaver, the
store) runs ``seeds`` conversations, approved or rejected by different people; then
their checkpoints and events are copied to 10,000 thread ids (checkpoints row by row,
events re-sealed into each new thread's hash chain), as loading 10,000 conversations
through the agent would take far longer than the measurement.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from bench.harness import parser, report, say, scratch_dir, timed
from symfonic_store import InterruptStore
from symfonic_store.db.schema import events
from symfonic_store.demo import APPROVAL, build_agent_graph
from symfonic_store.events import GENESIS_HASH, event_hash

REQUEST = "Please refund $420 to order 1181, the parcel never arrived."
PEOPLE = ("alice", "bob", "carol", "dave")


def run_seeds(graph: Any, store: InterruptStore, seeds: int) -> None:
    for i in range(seeds):
        thread_id = f"seed{i:04d}"
        approver = PEOPLE[i % len(PEOPLE)]
        config = {"configurable": {"thread_id": thread_id, "actor": approver}}
        paused = graph.invoke({"messages": [HumanMessage(REQUEST)]}, config)
        interrupt_id = paused["__interrupt__"][0].value["interrupt_id"]
        answer = {"approved": i % 3 != 0, "approver": approver}
        graph.invoke(store.resume(thread_id, interrupt_id, answer, actor=approver), config)


def copy_threads(checkpoints: sqlite3.Connection, store: InterruptStore, seeds: int, total: int) -> list[str]:
    """Copy each seed thread to new ids until there are ``total`` threads; returns them all."""
    copies = total // seeds - 1
    originals = [f"seed{i:04d}" for i in range(seeds)]
    histories = {t: store.history(t) for t in originals}
    threads = list(originals)
    with store.engine.begin() as conn:
        for c in range(1, copies + 1):
            rows = []
            for t in originals:
                new_id = f"{t}-c{c:04d}"
                threads.append(new_id)
                prev = GENESIS_HASH
                for e in histories[t]:
                    content = {
                        "thread_id": new_id, "version": e.version, "type": e.type,
                        "interrupt_id": e.interrupt_id, "run_id": e.run_id, "actor": e.actor,
                        "data": e.data, "occurred_at": e.occurred_at,
                    }
                    prev = event_hash(prev, **content)
                    rows.append({**content, "hash": prev})
            conn.execute(events.insert(), rows)
    store.rebuild_projection()
    for table in ("checkpoints", "writes"):
        columns = [r[1] for r in checkpoints.execute(f"PRAGMA table_info({table})")]
        others = ", ".join(c for c in columns if c != "thread_id")
        for c in range(1, copies + 1):
            checkpoints.execute(
                f"INSERT INTO {table} (thread_id, {others}) "  # noqa: S608 - constant names
                f"SELECT thread_id || '-c{c:04d}', {others} FROM {table} WHERE thread_id LIKE 'seed____'"
            )
    checkpoints.commit()
    return threads


def from_store(store: InterruptStore) -> set[tuple[str, str | None, bool]]:
    return {
        (r.thread_id, r.actor, bool((r.response or {}).get("approved")))
        for r in store.audit()
        if r.outcome == "resumed"
    }


def from_checkpoints(graph: Any, threads: list[str]) -> set[tuple[str, str | None, bool]]:
    """Walk every thread's checkpoint history for the approval's ToolMessage."""
    found = set()
    for thread_id in threads:
        answer = None
        for snapshot in graph.get_state_history({"configurable": {"thread_id": thread_id}}):
            for message in snapshot.values.get("messages", []):
                if isinstance(message, ToolMessage) and message.name == f"interrupt:{APPROVAL}":
                    answer = json.loads(message.content)
        if answer is not None:
            found.add((thread_id, answer.get("approver"), bool(answer.get("approved"))))
    return found


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=2, help="interleaved timing rounds")
    args = cli.parse_args(argv)
    total = 1_000 if args.quick else 10_000
    seeds = 50 if args.quick else 100
    say(f"[6] audit: who approved what across {total:,} threads (SQLite store, SqliteSaver)")
    with scratch_dir() as tmp:
        checkpoints = sqlite3.connect(tmp / "checkpoints.db", check_same_thread=False)
        saver = SqliteSaver(checkpoints)
        saver.setup()
        store = InterruptStore(f"sqlite:///{tmp / 'store.db'}")
        store.setup()
        graph = build_agent_graph(store, checkpointer=saver)
        run_seeds(graph, store, seeds)
        threads = copy_threads(checkpoints, store, seeds, total)
        # Interleaved rounds, the best of each (the machine is shared).
        store_times, graph_times = [], []
        for _ in range(args.rounds):
            seconds, ours = timed(lambda: from_store(store))
            store_times.append(seconds)
            seconds, theirs = timed(lambda: from_checkpoints(graph, threads))
            graph_times.append(seconds)
        store_s, graph_s = min(store_times), min(graph_times)
        assert store.verify().ok
        store.close()
        checkpoints.close()
    assert len(ours) == len(threads), (len(ours), len(threads))
    assert ours == theirs, "the store and the checkpoints disagree on who approved what"
    ratio = graph_s / store_s
    say(f"  {len(ours):,} approvals; store.audit() {store_s:.2f} s; "
        f"get_state_history over {len(threads):,} threads {graph_s:.2f} s; answers agree")
    report("6 audit", f"who approved what, {len(threads):,} threads",
           f"{store_s:.2f} s vs {graph_s:.1f} s", ratio=ratio, goal=">= 100x faster",
           met=ratio >= 100)


if __name__ == "__main__":
    main()
