"""Benchmark 8 -- PostgreSQL: 8 processes appending to distinct threads at once.

Each process opens its own store and runs mint-then-resume cycles on threads of its
own. Figure: total events/s over the wall time of the whole run, and as a peer 8
processes committing one small JSON row per transaction with plain psycopg. Afterwards the log is
checked: exactly the expected events, versions 1..n per thread with no gap or
duplicate, positions unique, one mint and one resume per interrupt, hash chains intact.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import sqlalchemy as sa

from bench.append import RESPONSE, marker
from bench.harness import parser, postgres_schema, report, say
from symfonic_store import InterruptStore
from symfonic_store.db.schema import events

PROCESSES = 8


def writer(url: str, worker: int, cycles: int, start: Any, done: Any) -> None:
    store = InterruptStore(url)
    store.pending(f"w{worker}-warmup")  # connect and check the schema before the start
    start.wait()
    for i in range(cycles):
        thread_id = f"w{worker}-t{i % 50:03d}"
        m = marker(f"run-{i}")
        store.mint(thread_id, m)
        store.resume(thread_id, m["interrupt_id"], RESPONSE, actor=f"approver-{worker}")
    store.close()
    done.put(worker)


def raw_writer(url: str, worker: int, cycles: int, start: Any, done: Any) -> None:
    """The peer: psycopg committing one small JSON row per transaction, nothing else."""
    import json

    import psycopg

    dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as conn:
        start.wait()
        for i in range(cycles * 2):
            conn.execute(
                "INSERT INTO bench_raw (thread_id, data) VALUES (%s, %s)",
                (f"w{worker}-t{i % 50:03d}", json.dumps({"i": i, "payload": "refund"})),
            )
            conn.commit()
    done.put(worker)


def run(url: str, target: Any, cycles: int) -> float:
    """Wall seconds for PROCESSES processes running ``target`` from a common start."""
    ctx = mp.get_context("spawn")
    start, done = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(url, w, cycles, start, done)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    time.sleep(3)  # let every process import, connect and wait at the start line
    began = time.perf_counter()
    start.set()
    finished = [done.get(timeout=900) for _ in procs]
    seconds = time.perf_counter() - began
    for p in procs:
        p.join()
    assert sorted(finished) == list(range(PROCESSES))
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


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    cycles = 25 if args.quick else 200
    expected = PROCESSES * cycles * 2
    say(f"[8] PostgreSQL: {PROCESSES} processes x {cycles} mint+resume cycles "
        f"({expected:,} events, one transaction each)")
    with postgres_schema() as url:
        if url is None:
            report("8 PostgreSQL writers", "total events/s", "skipped: no PostgreSQL URL",
                   ratio=None, goal="reported", met=None)
            return
        InterruptStore(url).setup()
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE bench_raw (position BIGSERIAL PRIMARY KEY, thread_id TEXT, data JSON)"
            )
        engine.dispose()
        raw_seconds = run(url, raw_writer, cycles)
        seconds = run(url, writer, cycles)
        problems = check(url, expected)
    per_s = expected / seconds
    raw_per_s = expected / raw_seconds
    say(f"  peer: raw psycopg, one row per transaction: {raw_per_s:,.0f} rows/s")
    say(f"  {expected:,} events in {seconds:.2f} s: {per_s:,.0f} events/s; "
        f"check: {'no event lost or duplicated' if not problems else problems}")
    report("8 PostgreSQL writers", f"{PROCESSES} processes, total events/s",
           f"{per_s:,.0f} events/s vs raw psycopg {raw_per_s:,.0f} rows/s, "
           f"{'0 lost, 0 duplicated' if not problems else '; '.join(problems)}",
           ratio=per_s / raw_per_s, goal="reported; nothing lost or duplicated", met=not problems)


if __name__ == "__main__":
    main()
