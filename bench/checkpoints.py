"""Benchmark 9 -- checkpoint put/get throughput: store.checkpointer() against LangGraph's savers.

``store.checkpointer()`` runs LangGraph's own savers' SQL on the store's connections,
inside the store's transactions. This measures what that costs per operation, one
caller at a time, against the saver used alone on its own connection, in the same run:
``SqliteSaver`` on SQLite (both at ``synchronous=FULL``), ``PostgresSaver`` on
PostgreSQL (each in a fresh schema). A batch saves ``steps`` checkpoints of one thread
(``put``, each with a task's ``put_writes``), then reads the latest one back
(``get_tuple``) ``steps`` times. The contenders alternate batch by batch (ABBA); the
figure is the median of the paired per-batch ratios (ours / theirs: above 1 is slower).
No target: reported.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver

from bench.harness import paired, parser, postgres_schema, report, say, scratch_dir
from symfonic_store import InterruptStore

MESSAGES = [f"message {n}: please refund $420 to order 1181" for n in range(6)]


class Workload:
    """``steps`` puts (each with its writes) on a new thread per batch, then the reads."""

    def __init__(self, saver: Any, name: str, steps: int) -> None:
        self.saver, self.name, self.steps = saver, name, steps
        self.threads = 0
        self.last: dict[str, Any] | None = None

    def writes(self, batch: int) -> None:
        self.threads += 1
        thread_id = f"{self.name}-{self.threads}"
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        for step in range(self.steps):
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=step))
            version = f"{step + 1:032}.0"
            checkpoint["channel_values"] = {"messages": MESSAGES[: 1 + step % 6], "step": step}
            checkpoint["channel_versions"] = {"messages": version, "step": version}
            metadata = {"source": "loop", "step": step, "parents": {}}
            config = self.saver.put(config, checkpoint, metadata, {"messages": version, "step": version})
            self.saver.put_writes(config, [("messages", MESSAGES[:1]), ("branch:to:agent", None)], f"task-{step}")
        self.last = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}

    def reads(self, batch: int) -> None:
        assert self.last is not None
        for _ in range(self.steps):
            found = self.saver.get_tuple(self.last)
            assert found is not None and found.pending_writes


@contextmanager
def sqlite_savers(folder: Path) -> Iterator[tuple[Any, Any]]:
    conn = sqlite3.connect(folder / "saver.db", check_same_thread=False)
    theirs = SqliteSaver(conn)
    theirs.setup()
    store = InterruptStore(f"sqlite:///{folder / 'store.db'}")
    store.setup()
    ours = store.checkpointer()
    ours.setup()
    try:
        yield theirs, ours
    finally:
        conn.close()
        store.close()


@contextmanager
def postgres_savers(url: str) -> Iterator[tuple[Any, Any]]:
    import psycopg
    import sqlalchemy as sa
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True, row_factory=dict_row) as conn:
        theirs = PostgresSaver(conn)  # type: ignore[arg-type]
        theirs.setup()
        store = InterruptStore(url)
        store.setup()
        ours = store.checkpointer()
        ours.setup()
        try:
            yield theirs, ours
        finally:
            store.close()


def compare(label: str, peer: str, savers: tuple[Any, Any], steps: int, rounds: int) -> None:
    theirs, ours = Workload(savers[0], "theirs", steps), Workload(savers[1], "ours", steps)
    for kind in ("writes", "reads"):  # the reads read the thread each one wrote last
        batches = paired({"theirs": getattr(theirs, kind), "ours": getattr(ours, kind)}, rounds=rounds)
        per_op = {n: batches.median(n) / steps for n in ("theirs", "ours")}
        what = "put + put_writes" if kind == "writes" else "get_tuple"
        say(f"  {label} {what}: {peer} {per_op['theirs'] * 1e6:.0f} us, store.checkpointer() "
            f"{per_op['ours'] * 1e6:.0f} us per step ({1 / per_op['theirs']:,.0f}/s vs "
            f"{1 / per_op['ours']:,.0f}/s)")
        report("9 checkpoints", f"{label}: {what}, store.checkpointer() / {peer}",
               f"{1 / per_op['ours']:,.0f}/s vs {1 / per_op['theirs']:,.0f}/s",
               ratio=batches.ratios("ours", "theirs"), goal="reported")


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--steps", type=int, default=None, help="checkpoints per batch")
    cli.add_argument("--rounds", type=int, default=None, help="paired rounds")
    args = cli.parse_args(argv)
    steps = args.steps or (20 if args.quick else 50)
    rounds = args.rounds or (6 if args.quick else 20)
    say(f"[9] checkpoints: {rounds} paired rounds of {steps} put + put_writes, then {steps} "
        "get_tuple, per contender and database")
    with scratch_dir() as tmp, sqlite_savers(tmp) as savers:
        compare("SQLite", "SqliteSaver", savers, steps, rounds)
    with postgres_schema() as url:
        if url is not None:
            with postgres_savers(url) as savers:
                compare("PostgreSQL", "PostgresSaver", savers, steps, rounds)


if __name__ == "__main__":
    main()
