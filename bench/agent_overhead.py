"""Benchmark 2 -- agent overhead: the refund agent with and without the store.

The same scripted LangGraph agent (:func:`symfonic_store.demo.build_agent_graph`,
``SqliteSaver`` checkpointer, SQLite store at its durable defaults) runs ``threads``
conversations: a refund request that pauses on an approval, then the approval. Without
the store the router is the plain seed condition and the answer goes straight to the
graph; with it every route decision, the mint and the resume are recorded, and the
answer goes through ``store.resume`` (the front door). Two ways with the store: its
database beside the checkpoints (its own file, same folder; target: ratio <= 1.10), and
``store.checkpointer()``, the checkpoints in the store's file and each step's events in
the step's transaction (target: ratio <= 1.05 against SqliteSaver alone).
The two alternate in short batches (ABBA) so neighbouring batches share the background
load; each round gives one ratio (with / without) and the median of those paired ratios
decides (:func:`bench.harness.paired`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from bench.harness import paired, parser, report, say, scratch_dir
from symfonic_store import InterruptStore
from symfonic_store.demo import build_agent_graph

REQUEST = "Please refund $420 to order 1181, the parcel never arrived."
ANSWER = {"approved": True}


def pending_id(result: dict[str, Any]) -> str:
    return str(result["__interrupt__"][0].value["interrupt_id"])


class Contender:
    """``without``: SqliteSaver alone; ``with``: SqliteSaver beside the store (its own
    file); ``own``: the store and ``store.checkpointer()`` in one file, one transaction
    per step."""

    def __init__(self, folder: Path, name: str) -> None:
        self.conn: sqlite3.Connection | None = None
        self.store = None
        saver: Any
        if name == "own":
            self.store = InterruptStore(f"sqlite:///{folder / 'own.db'}")
            self.store.setup()
            saver = self.store.checkpointer()
            saver.setup()
        else:
            self.conn = sqlite3.connect(folder / f"checkpoints-{name}.db", check_same_thread=False)
            saver = SqliteSaver(self.conn)
            saver.setup()
            if name == "with":
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
        if self.conn is not None:
            self.conn.close()
        if self.store is not None:
            self.store.close()


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--threads", type=int, default=None, help="conversations per contender")
    cli.add_argument("--batch", type=int, default=None, help="conversations per batch")
    args = cli.parse_args(argv)
    batch = args.batch or (5 if args.quick else 10)
    threads = args.threads or (60 if args.quick else 500)
    rounds = max(1, threads // batch)
    say(f"[2] agent overhead: {rounds * batch} conversations each, without the store, with it "
        f"beside SqliteSaver, and with store.checkpointer(), in {rounds} interleaved rounds of "
        f"{batch}; median of the paired per-round ratios")
    with scratch_dir() as tmp:
        plain, recorded, own = Contender(tmp, "without"), Contender(tmp, "with"), Contender(tmp, "own")

        def run(c: Contender) -> None:
            for _ in range(batch):
                c.conversation()

        runs = paired(
            {"without": lambda i: run(plain), "with": lambda i: run(recorded), "own": lambda i: run(own)},
            rounds=rounds,
        )
        events = len(recorded.store.events(after=0)) if recorded.store else 0
        own_events = len(own.store.events(after=0)) if own.store else 0
        plain.close(), recorded.close(), own.close()
    without = runs.median("without") / batch
    with_ = runs.median("with") / batch
    own_ = runs.median("own") / batch
    say(f"  per conversation (median batch): without {without * 1e3:.1f} ms, "
        f"beside {with_ * 1e3:.1f} ms, store.checkpointer() {own_ * 1e3:.1f} ms; total without "
        f"{runs.total('without'):.1f} s, beside {runs.total('with'):.1f} s, own "
        f"{runs.total('own'):.1f} s; {events:,} and {own_events:,} events recorded")
    report("2 agent overhead", f"{rounds * batch} threads, SqliteSaver beside the store",
           f"{with_ * 1e3:.1f} ms vs {without * 1e3:.1f} ms per conversation",
           ratio=runs.ratios("with", "without"), goal="<= 1.10", at_most=1.10)
    report("2 agent overhead", f"{rounds * batch} threads, store.checkpointer() vs SqliteSaver alone",
           f"{own_ * 1e3:.1f} ms vs {without * 1e3:.1f} ms per conversation",
           ratio=runs.ratios("own", "without"), goal="<= 1.05", at_most=1.05)


if __name__ == "__main__":
    main()
