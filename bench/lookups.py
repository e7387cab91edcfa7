"""Benchmark 3 -- flat lookups: ``pending``, ``state``, ``is_current`` do not grow with history.

A thread with 100,000 events against one with 10, in the same store (SQLite, then
PostgreSQL when available): the ratio of the time per call, the median of paired
per-round ratios of interleaved batches (:func:`bench.harness.paired`). Target: <= 1.3.
"""

from __future__ import annotations

from typing import Any

from bench.bulk_load import ThreadSpec
from bench.harness import paired, parser, postgres_schema, report, say, sqlite_dataset
from symfonic_store import InterruptStore


def measure(store: InterruptStore, batches: int, per_batch: int, label: str) -> None:
    big, small = "long-0000000", "short-0000000"
    assert store.state(big) == store.state(big)
    assert store.verify(big).ok and store.verify(small).ok
    ops = {
        "pending": lambda t: store.pending(t),
        "state": lambda t: store.state(t),
        "is_current": lambda t: store.is_current(t, 3600),
    }
    for name, op in ops.items():

        def batch(thread_id: str, op: Any = op) -> None:
            for _ in range(per_batch):
                op(thread_id)

        runs = paired(
            {big: lambda i: batch(big), small: lambda i: batch(small)},
            rounds=batches,
        )
        ratios = runs.ratios(big, small)
        us_big = runs.median(big) / per_batch * 1e6
        us_small = runs.median(small) / per_batch * 1e6
        say(f"  {label} {name:10} long thread: {us_big:6.1f} us/call   10 events: {us_small:6.1f} us/call")
        report("3 lookups", f"{name} ({label})", f"{us_big:.0f} us vs {us_small:.0f} us per call",
               ratio=ratios, goal="<= 1.3", at_most=1.3)


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    big = 10_000 if args.quick else 100_000
    batches = 20 if args.quick else 60
    per_batch = 20 if args.quick else 50
    specs = [ThreadSpec("long", 1, big, ending="pending"), ThreadSpec("short", 1, 10, ending="pending")]
    say(f"[3] flat lookups: a thread of {big:,} events against one of 10; median of "
        f"{batches} paired ratios of interleaved batches of {per_batch} calls")
    with sqlite_dataset(specs) as path:
        store = InterruptStore(f"sqlite:///{path}")
        measure(store, batches, per_batch, "SQLite")
        store.close()
    with postgres_schema() as url:
        if url is not None:
            from bench.bulk_load import load

            store = InterruptStore(url)
            store.setup()
            load(store, specs)
            measure(store, batches, per_batch, "PostgreSQL")
            store.close()


if __name__ == "__main__":
    main()
