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
The three run in short batches, every order in turn, so neighbouring batches share the
background load; each round gives one ratio (with / without, own / without) and the
median of those paired ratios decides (:func:`bench.harness.paired`).

On PostgreSQL (when a server is named) it counts round trips on the wire
(:mod:`bench.roundtrips`): per ``put`` and per ``put_writes`` of ``store.checkpointer()``
against ``PostgresSaver``'s (target: one per put, SPEC §16), and per conversation of the
agent with each of them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from bench.harness import paired, parser, postgres_schema, report, say, scratch_dir
from bench.roundtrips import RoundTrips
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
        self.store: InterruptStore | None = None
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
        conversation(self.graph, self.store, f"{self.name}-{self.count}")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        if self.store is not None:
            self.store.close()


def conversation(graph: Any, store: InterruptStore | None, thread_id: str) -> None:
    """One conversation on ``graph``: the request, the pause, the answer (through the store if any)."""
    config = {"configurable": {"thread_id": thread_id, "actor": "alice"}}
    paused = graph.invoke({"messages": [HumanMessage(REQUEST)]}, config)
    interrupt_id = pending_id(paused)
    command = store.resume(thread_id, interrupt_id, ANSWER, actor="alice") if store else Command(resume=ANSWER)
    done = graph.invoke(command, config)
    assert "refunded" in done["messages"][-1].content, done["messages"][-1].content


def put_trips(saver: Any, wire: RoundTrips, thread_id: str, steps: int) -> tuple[list[int], list[int]]:
    """Round trips of each ``put`` after the first (each replaces a checkpoint, so the
    store checks what the thread waited on there) and of each ``put_writes``."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    puts, writes = [], []
    for n in range(steps + 1):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=n))
        version = f"{n + 1:032}.0"
        checkpoint["channel_values"] = {"messages": [REQUEST] * (1 + n % 6), "step": n}
        checkpoint["channel_versions"] = {"messages": version, "step": version}
        before = wire.trips
        config = saver.put(config, checkpoint, {"source": "loop", "step": n, "parents": {}},
                           {"messages": version, "step": version})
        middle = wire.trips
        saver.put_writes(config, [("messages", [REQUEST]), ("branch:to:agent", None)], f"task-{n}")
        if n:
            puts.append(middle - before)
            writes.append(wire.trips - middle)
    return puts, writes


def postgres_round_trips(url: str, steps: int, conversations: int) -> None:
    """Round trips on the wire, store.checkpointer() against PostgresSaver alone."""
    import psycopg
    import sqlalchemy as sa
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with RoundTrips(url) as wire:
        conninfo = sa.make_url(wire.url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(conninfo, autocommit=True, row_factory=dict_row) as conn:
            theirs = PostgresSaver(conn)  # type: ignore[arg-type]
            theirs.setup()
            their_puts, their_writes = put_trips(theirs, wire, "theirs", steps)
            plain = build_agent_graph(None, checkpointer=theirs)
            conversation(plain, None, "theirs-warm")
            before = wire.trips
            for i in range(conversations):
                conversation(plain, None, f"theirs-{i}")
            their_conversation = (wire.trips - before) / conversations
        store = InterruptStore(wire.url)
        try:
            store.setup()
            ours = store.checkpointer()
            ours.setup()
            our_puts, our_writes = put_trips(ours, wire, "ours", steps)
            graph = build_agent_graph(store, checkpointer=ours)
            conversation(graph, store, "ours-warm")
            before = wire.trips
            for i in range(conversations):
                conversation(graph, store, f"ours-{i}")
            our_conversation = (wire.trips - before) / conversations
        finally:
            store.close()

    def shown(trips: list[int]) -> str:
        return f"{min(trips)}-{max(trips)}" if min(trips) != max(trips) else str(trips[0])

    say(f"  PostgreSQL round trips, {steps} steps: put {shown(our_puts)} (PostgresSaver {shown(their_puts)}), "
        f"put_writes {shown(our_writes)} (PostgresSaver {shown(their_writes)}); per conversation of the "
        f"agent {our_conversation:.1f} with the store and store.checkpointer() "
        f"(PostgresSaver alone, no store: {their_conversation:.1f})")
    report("2 agent overhead", "PostgreSQL: round trips per store.checkpointer() put",
           f"{max(our_puts)} per put, PostgresSaver {max(their_puts)}; put_writes {max(our_writes)} vs "
           f"{max(their_writes)}", goal="one round trip per put (SPEC §16)", met=max(our_puts) <= 1)
    report("2 agent overhead", "PostgreSQL: round trips per conversation, store.checkpointer() and the store "
           "vs PostgresSaver alone", f"{our_conversation:.1f} vs {their_conversation:.1f}",
           ratio=our_conversation / their_conversation, goal="reported")


def sqlite_overhead(threads: int, batch: int) -> None:
    """The three contenders on SQLite, paired (see the module docstring)."""
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
    cpu_with, cpu_own = runs.ratios("with", "without", clock="cpu"), runs.ratios("own", "without", clock="cpu")
    say(f"  process CPU per conversation: without {runs.median('without', clock='cpu') / batch * 1e3:.1f} ms, "
        f"beside {runs.median('with', clock='cpu') / batch * 1e3:.1f} ms ({cpu_with.median:.2f}; "
        f"{cpu_with.spread()}), store.checkpointer() {runs.median('own', clock='cpu') / batch * 1e3:.1f} ms "
        f"({cpu_own.median:.2f}; {cpu_own.spread()})")
    report("2 agent overhead", f"{rounds * batch} threads, SqliteSaver beside the store",
           f"{with_ * 1e3:.1f} ms vs {without * 1e3:.1f} ms per conversation",
           ratio=runs.ratios("with", "without"), goal="<= 1.10", at_most=1.10)
    report("2 agent overhead", f"{rounds * batch} threads, store.checkpointer() vs SqliteSaver alone",
           f"{own_ * 1e3:.1f} ms vs {without * 1e3:.1f} ms per conversation",
           ratio=runs.ratios("own", "without"), goal="<= 1.05", at_most=1.05)


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--threads", type=int, default=None, help="conversations per contender")
    cli.add_argument("--batch", type=int, default=None, help="conversations per batch")
    cli.add_argument("--postgres-only", action="store_true", help="only count PostgreSQL's round trips")
    args = cli.parse_args(argv)
    if not args.postgres_only:
        sqlite_overhead(args.threads or (60 if args.quick else 500), args.batch or (5 if args.quick else 10))
    with postgres_schema() as url:
        if url is not None:
            postgres_round_trips(url, steps=20, conversations=5)

if __name__ == "__main__":
    main()
