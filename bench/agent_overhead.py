"""Benchmark 2 -- agent overhead: the refund agent with and without the store.

The same scripted LangGraph agent (:func:`symfonic_store.demo.build_agent_graph`,
``SqliteSaver`` checkpointer, SQLite store at its durable defaults) runs ``threads``
conversations: a refund request that pauses on an approval, then the approval. Without
the store the router is the plain seed condition and the answer goes straight to the
graph; with it every route decision, the mint and the resume are recorded, and the
answer goes through ``store.resume`` (the front door). Target: ratio <= 1.10.
Runs alternate in batches so both see the same background load; the best batch of
each is compared.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from bench.harness import parser, report, say, scratch_dir
from symfonic_store import InterruptStore
from symfonic_store.demo import build_agent_graph

REQUEST = "Please refund $420 to order 1181, the parcel never arrived."
ANSWER = {"approved": True}


def pending_id(result: dict[str, Any]) -> str:
    return str(result["__interrupt__"][0].value["interrupt_id"])


class Contender:
    def __init__(self, folder: Path, with_store: bool) -> None:
        name = "with" if with_store else "without"
        self.conn = sqlite3.connect(folder / f"checkpoints-{name}.db", check_same_thread=False)
        saver = SqliteSaver(self.conn)
        saver.setup()
        self.store = None
        if with_store:
            self.store = InterruptStore(f"sqlite:///{folder / 'store.db'}")
            self.store.setup()
        self.graph = build_agent_graph(self.store, checkpointer=saver)
        self.name = name
        self.count = 0

    def conversation(self) -> None:
        self.count += 1
        thread_id = f"{self.name}-{self.count}"
        config = {"configurable": {"thread_id": thread_id, "actor": "alice"}}
        paused = self.graph.invoke({"messages": [HumanMessage(REQUEST)]}, config)
        interrupt_id = pending_id(paused)
        if self.store is not None:
            command = self.store.resume(thread_id, interrupt_id, ANSWER, actor="alice")
        else:
            command = Command(resume=ANSWER)
        done = self.graph.invoke(command, config)
        assert "refunded" in done["messages"][-1].content, done["messages"][-1].content

    def close(self) -> None:
        self.conn.close()
        if self.store is not None:
            self.store.close()


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    threads = 60 if args.quick else 500
    batch = 10 if args.quick else 25
    say(f"[2] agent overhead: {threads} conversations each, with and without the store, "
        f"alternating batches of {batch}")
    with scratch_dir() as tmp:
        plain, recorded = Contender(tmp, False), Contender(tmp, True)
        plain.conversation(), recorded.conversation()  # warm up imports and caches
        samples: dict[str, list[float]] = {"without": [], "with": []}
        for b in range(threads // batch):
            order = (plain, recorded) if b % 2 == 0 else (recorded, plain)
            for c in order:
                start = time.perf_counter()
                for _ in range(batch):
                    c.conversation()
                samples[c.name].append((time.perf_counter() - start) / batch)
        events = len(recorded.store.events(after=0)) if recorded.store else 0
        plain.close(), recorded.close()
    without = min(samples["without"])
    with_ = min(samples["with"])
    ratio = with_ / without
    say(f"  per conversation (best batch): without {without * 1e3:.1f} ms, "
        f"with {with_ * 1e3:.1f} ms; total without {sum(samples['without']) * batch:.1f} s, "
        f"with {sum(samples['with']) * batch:.1f} s; {events:,} events recorded")
    report("2 agent overhead", f"{threads} threads, SqliteSaver", f"{with_ * 1e3:.1f} ms vs "
           f"{without * 1e3:.1f} ms per conversation", ratio=ratio, goal="<= 1.10", met=ratio <= 1.10)


if __name__ == "__main__":
    main()
