"""Benchmark 9 -- checkpoints: take and verify signed checkpoints at 1,000,000 events.

The dataset is benchmark 5's (one 100,000-event thread, 90,000 threads of ten events).
Figures, on SQLite, and on PostgreSQL when a server is named:

- the first checkpoint (every thread's head from the log) against ``verify()``, the
  hash-chain pass over the same events: both read every event once;
- a checkpoint after 1,000 and after 10,000 threads changed, against the first: the
  cost should follow the threads changed (goal: 1,000 changed <= 5% of the first;
  10x the threads, about 10x the cost), and one with nothing changed (the bucket list);
- ``verify_checkpoint`` against ``verify()`` (goal: one pass, <= 2.5x), and with
  ``thread_id`` on the long thread and on a short one (the thread's events only).

    python -m bench.checkpoint [--quick]
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.engine import Connection

from bench.bulk_load import load
from bench.harness import (
    parser,
    postgres_schema,
    report,
    say,
    scratch_dir,
    sqlite_dataset,
    timed,
)
from bench.rebuild import million
from symfonic_store import InterruptStore
from symfonic_store.events import ROUTE_DECIDED
from symfonic_store.services.evidence import generate_key
from symfonic_store.store.append import ThreadWriter, flush, run_write

APPEND_CHUNK = 500


def append_to(store: InterruptStore, thread_ids: Sequence[str]) -> None:
    """One ``route.decided`` on each thread, through the store's own append path (chunked
    transactions, so the changes cost seconds rather than minutes)."""

    def work(chunk: Sequence[str]) -> None:
        def write(conn: Connection) -> None:
            writers = [ThreadWriter(conn, t) for t in chunk]
            for w in writers:
                w.append(ROUTE_DECIDED, data={"route": "finish", "interrupt_id": None, "reason": None}, run_id="bench")
            flush(conn, writers)

        with store.engine.connect() as conn:
            run_write(conn, write)

    for i in range(0, len(thread_ids), APPEND_CHUNK):
        work(thread_ids[i : i + APPEND_CHUNK])


def measure(label: str, url: str, key: Path, pub: Path, total: int, scale: int) -> None:
    store = InterruptStore(url)
    few = [f"done-{i:07d}" for i in range(0, 60_000 // scale, 60)]  # 1,000 spread out
    many = [f"open-{i:07d}" for i in range(10_000 // scale)]

    verify_s, plain = timed(store.verify)
    assert plain.ok, str(plain)
    first_s, first = timed(lambda: store.checkpoint(key))
    say(f"  {label}: verify() {verify_s:.2f} s; first checkpoint ({first.document['threads']:,} threads) "
        f"{first_s:.2f} s")
    report("9 checkpoint", f"first checkpoint vs verify(), {label}",
           f"{first_s:.2f} s vs {verify_s:.2f} s over {total:,} events", ratio=first_s / verify_s,
           goal="~1 (one pass over the events, like verify)", met=None)

    append_to(store, few)
    small_s, small = timed(lambda: store.checkpoint(key))
    assert len(small.document["heads"]) == len(few)
    append_to(store, many)
    large_s, large = timed(lambda: store.checkpoint(key))
    assert len(large.document["heads"]) == len(many)
    idle_s, _ = timed(lambda: store.checkpoint(key))
    say(f"  {label}: next checkpoint after {len(few):,} threads changed {small_s * 1000:.0f} ms, "
        f"after {len(many):,} {large_s * 1000:.0f} ms, nothing changed {idle_s * 1000:.0f} ms")
    report("9 checkpoint", f"{len(few):,} threads changed vs first, {label}",
           f"{small_s * 1000:.0f} ms vs {first_s:.2f} s", ratio=small_s / first_s,
           goal="<= 0.05 (cost follows the threads changed)", at_most=0.05)
    report("9 checkpoint", f"{len(many):,} vs {len(few):,} threads changed, {label}",
           f"{large_s * 1000:.0f} ms vs {small_s * 1000:.0f} ms", ratio=large_s / small_s,
           goal="~10 (linear in threads changed)", met=None)
    report("9 checkpoint", f"nothing changed, {label}", f"{idle_s * 1000:.0f} ms", ratio=None,
           goal="reported (reads the 4,096 bucket hashes)", met=None)

    check_s, checked = timed(lambda: store.verify_checkpoint(large, public_keys=[pub]))
    assert checked.ok, str(checked)
    verify2_s, _ = timed(store.verify)
    say(f"  {label}: verify_checkpoint {check_s:.2f} s ({checked.events_checked:,} events), "
        f"verify() {verify2_s:.2f} s")
    report("9 checkpoint", f"verify_checkpoint vs verify(), {label}",
           f"{check_s:.2f} s vs {verify2_s:.2f} s", ratio=check_s / verify2_s,
           goal="<= 2.5 (one pass over the events it covers)", at_most=2.5)
    long_s, long_report = timed(lambda: store.verify_checkpoint(large, public_keys=[pub], thread_id="long-0000000"))
    short_s, short_report = timed(lambda: store.verify_checkpoint(large, public_keys=[pub], thread_id="done-0000001"))
    assert long_report.ok and short_report.ok
    say(f"  {label}: --thread long ({long_report.events_checked:,} events) {long_s:.2f} s, "
        f"short ({short_report.events_checked} events) {short_s * 1000:.0f} ms")
    report("9 checkpoint", f"verify_checkpoint --thread, {label}",
           f"{long_report.events_checked:,} events {long_s:.2f} s; "
           f"{short_report.events_checked} events {short_s * 1000:.0f} ms",
           ratio=None, goal="reported (the thread's events only)", met=None)
    store.close()


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    scale = 10 if args.quick else 1
    specs = million(scale)
    total = sum(s.count * s.events for s in specs)
    say(f"[9] checkpoint: take and verify signed checkpoints over {total:,} events")
    with scratch_dir() as tmp:
        key, pub = generate_key(tmp / "bench-key")
        with sqlite_dataset(specs) as dataset:
            copy = tmp / "checkpoint.db"
            shutil.copyfile(dataset, copy)  # the dataset may be shared: checkpoints write
        measure("SQLite", f"sqlite:///{copy}", key, pub, total, scale)
        with postgres_schema() as url:
            if url is not None:
                store = InterruptStore(url)
                store.setup()
                say("  loading the dataset into PostgreSQL ...")
                load(store, specs)
                store.close()
                measure("PostgreSQL", url, key, pub, total, scale)


if __name__ == "__main__":
    main()
