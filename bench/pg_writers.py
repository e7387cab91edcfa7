"""Benchmark 8 -- PostgreSQL: 1 and 8 processes appending to distinct threads at once.

Each process opens its own store and runs mint-then-resume cycles on threads of its
own; the peer is the same number of processes committing one small JSON row per
transaction with plain psycopg (as many rows as the store writes events).

How it is timed: every worker process does all its imports, connects (a store and a
psycopg connection), checks the schema and writes one warm-up cycle of each first, then
waits at a start barrier (``multiprocessing.Barrier``) shared by all workers. Each
batch starts when the barrier releases them all and ends when the last worker is done
(each worker stamps its start and end with the system-wide monotonic clock; the batch is
the earliest start to the latest end). Batches of the store and of psycopg alternate in
interleaved rounds (ABBA) in the same worker processes, and each round gives one ratio;
the median of those paired ratios decides (targets: >= 0.5x plain psycopg with 1 writer
and with 8). Afterwards the log is checked: exactly the expected events, versions 1..n
per thread with no gap or duplicate, positions unique, one mint and one resume per
interrupt, hash chains intact.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from collections import defaultdict
from typing import Any

import sqlalchemy as sa

from bench.append import RESPONSE, marker
from bench.harness import Ratios, orders, parser, postgres_schema, report, say
from symfonic_store import InterruptStore
from symfonic_store.db.schema import events

CONTENDERS = ["store", "psycopg"]
GOAL = 0.5


def worker(url: str, worker_id: int, cycles: int, rounds: int, barrier: Any, out: Any) -> None:
    """Set up, then run the schedule of batches, each from a common start at the barrier."""
    import json

    import psycopg

    store = InterruptStore(url)
    dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = psycopg.connect(dsn)
    counter = {"store": 0, "psycopg": 0}

    def store_batch(n: int) -> None:
        for _ in range(n):
            i = counter["store"]
            counter["store"] += 1
            thread_id = f"w{worker_id}-t{i % 50:03d}"
            m = marker(f"run-{i}")
            store.mint(thread_id, m)
            store.resume(thread_id, m["interrupt_id"], RESPONSE, actor=f"approver-{worker_id}")

    def psycopg_batch(n: int) -> None:
        for _ in range(2 * n):  # as many one-row commits as the store writes events
            i = counter["psycopg"]
            counter["psycopg"] += 1
            conn.execute(
                "INSERT INTO bench_raw (thread_id, data) VALUES (%s, %s)",
                (f"w{worker_id}-t{i % 50:03d}", json.dumps({"i": i, "payload": "refund"})),
            )
            conn.commit()

    batches = {"store": store_batch, "psycopg": psycopg_batch}
    for name in CONTENDERS:  # warm-up: every code path taken once before any timing
        batches[name](1)
    for r, order in enumerate(orders(CONTENDERS, rounds)):
        for name in order:
            barrier.wait()
            began = time.clock_gettime(time.CLOCK_MONOTONIC)
            batches[name](cycles)
            ended = time.clock_gettime(time.CLOCK_MONOTONIC)
            out.put((r, name, worker_id, began, ended))
    conn.close()
    store.close()


def run(url: str, processes: int, cycles: int, rounds: int) -> dict[str, list[float]]:
    """Seconds of each batch, per contender, round by round (``processes`` workers)."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes, timeout=600), ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(url, w, cycles, rounds, barrier, out))
        for w in range(processes)
    ]
    for p in procs:
        p.start()
    stamps: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for _ in range(processes * rounds * len(CONTENDERS)):
        r, name, _w, began, ended = out.get(timeout=900)
        stamps[(r, name)].append((began, ended))
    for p in procs:
        p.join()
        assert p.exitcode == 0, p.exitcode
    seconds: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for r in range(rounds):
        for name in CONTENDERS:
            batch = stamps[(r, name)]
            seconds[name].append(max(e for _, e in batch) - min(b for b, _ in batch))
    return seconds


def check(url: str, expected: int) -> list[str]:
    """What is wrong with the log after the run (empty when nothing is)."""
    problems = []
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(events)).scalar_one()
        if count != expected:
            problems.append(f"{count} events, expected {expected}")
        dup_positions = conn.execute(
            sa.select(events.c.position).group_by(events.c.position).having(sa.func.count() > 1)
        ).all()
        if dup_positions:
            problems.append(f"{len(dup_positions)} duplicated positions")
        gaps = conn.execute(
            sa.select(events.c.thread_id)
            .group_by(events.c.thread_id)
            .having(
                sa.or_(
                    sa.func.max(events.c.version) != sa.func.count(),
                    sa.func.count(sa.distinct(events.c.version)) != sa.func.count(),
                )
            )
        ).all()
        if gaps:
            problems.append(f"{len(gaps)} threads with a version gap or duplicate")
        per_interrupt = conn.execute(
            sa.select(events.c.thread_id, events.c.interrupt_id, events.c.type, sa.func.count())
            .group_by(events.c.thread_id, events.c.interrupt_id, events.c.type)
            .having(sa.func.count() != 1)
        ).all()
        if per_interrupt:
            problems.append(f"{len(per_interrupt)} interrupts minted or resumed more than once")
    engine.dispose()
    report_ = InterruptStore(url).verify()
    if not report_.ok:
        problems.append(str(report_))
    return problems


def measure(processes: int, cycles: int, rounds: int) -> None:
    per_batch = processes * cycles * 2
    expected = processes * (cycles * rounds + 1) * 2  # the warm-up cycle included
    say(f"  {processes} writer{'s' if processes > 1 else ''}: {rounds} interleaved rounds; per "
        f"batch {processes} x {cycles} mint+resume cycles ({per_batch:,} events) against "
        f"{per_batch:,} one-row psycopg commits")
    with postgres_schema() as url:
        if url is None:
            report("8 PostgreSQL writers", f"{processes} processes vs plain psycopg",
                   "skipped: no PostgreSQL URL", goal=f">= {GOAL}x", met=None)
            return
        InterruptStore(url).setup()
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE bench_raw (position BIGSERIAL PRIMARY KEY, thread_id TEXT, data JSON)"
            )
        engine.dispose()
        seconds = run(url, processes, cycles, rounds)
        problems = check(url, expected)
    ratios = Ratios(tuple(p / s for p, s in zip(seconds["psycopg"], seconds["store"], strict=True)))
    ours = per_batch / statistics.median(seconds["store"])
    theirs = per_batch / statistics.median(seconds["psycopg"])
    say(f"    median batch: store {ours:,.0f} events/s, plain psycopg {theirs:,.0f} rows/s; "
        f"check: {'no event lost or duplicated' if not problems else problems}")
    report("8 PostgreSQL writers", f"{processes} process{'es' if processes > 1 else ''} "
           f"vs plain psycopg one-row commits",
           f"{ours:,.0f} events/s vs {theirs:,.0f} rows/s",
           ratio=ratios, goal=f">= {GOAL}x", at_least=GOAL)
    report("8 PostgreSQL writers", f"{processes} process{'es' if processes > 1 else ''}: "
           f"the log afterwards ({expected:,} events)",
           "0 lost, 0 duplicated, chains intact" if not problems else "; ".join(problems),
           goal="nothing lost or duplicated", met=not problems)


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=None, help="interleaved rounds per setting")
    args = cli.parse_args(argv)
    rounds = args.rounds or (4 if args.quick else 16)
    say("[8] PostgreSQL writers: the store against plain psycopg one-row commits, "
        "same processes, interleaved rounds from a start barrier; median of paired ratios")
    for processes, cycles in ((1, 10 if args.quick else 100), (8, 5 if args.quick else 25)):
        measure(processes, cycles, rounds)


if __name__ == "__main__":
    main()
