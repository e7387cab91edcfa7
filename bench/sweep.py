"""Benchmark 4 -- sweep: 100,000 pending interrupts, half of them stale.

Figures: expiries per second on SQLite (target >= 20,000/s) and on PostgreSQL
(reported). Then the shape of the cost: a sweep of a tenth as many stale interrupts,
alone and behind a long resolved history; the cost should follow the number expired
(about 10x less) and not the history (about 1x).
"""

from __future__ import annotations

from bench.bulk_load import ThreadSpec, load
from bench.harness import (
    parser,
    postgres_schema,
    rate,
    report,
    say,
    scratch_dir,
    timed,
)
from symfonic_store import InterruptStore


def open_threads(pending: int, prefix: str = "p") -> ThreadSpec:
    """``pending`` threads with one open interrupt each, every second one stale."""
    return ThreadSpec(prefix, pending, 3, ending="pending", stale_every=2)


def sweep_once(url: str, specs: list[ThreadSpec], expect: int) -> float:
    store = InterruptStore(url)
    store.setup()
    load(store, specs)
    seconds, result = timed(lambda: store.sweep(ttl_seconds=3600))
    assert result.count == expect, (result.count, expect)
    assert store.sweep(ttl_seconds=3600).count == 0
    assert store.verify().ok
    store.close()
    return seconds


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    pending = 10_000 if args.quick else 100_000
    history = 50_000 if args.quick else 500_000
    stale = pending // 2
    say(f"[4] sweep: {pending:,} pending interrupts, {stale:,} stale (TTL 3600 s)")
    with scratch_dir() as tmp:
        seconds = sweep_once(f"sqlite:///{tmp / 'sweep.db'}", [open_threads(pending)], stale)
        per_s = stale / seconds
        say(f"  SQLite: {stale:,} expired in {seconds:.2f} s ({rate(stale, seconds)})")
        report("4 sweep", "expiries/s, SQLite", f"{per_s:,.0f} expiries/s", ratio=None,
               goal=">= 20,000/s", met=per_s >= 20_000)

        small = sweep_once(f"sqlite:///{tmp / 'small.db'}", [open_threads(pending // 10)], stale // 10)
        behind = sweep_once(
            f"sqlite:///{tmp / 'history.db'}",
            [ThreadSpec("h", history // 100, 100), open_threads(pending // 10)],
            stale // 10,
        )
        say(f"  SQLite: {stale // 10:,} stale alone {small:.3f} s; behind {history:,} "
            f"resolved events {behind:.3f} s; {stale:,} stale {seconds:.3f} s")
        report("4 sweep", "cost vs number expired (x10 stale, SQLite)",
               f"{seconds:.2f} s vs {small:.2f} s", ratio=seconds / small,
               goal="~10 (linear in expired)", met=None)
        report("4 sweep", f"cost vs history (+{history:,} events, SQLite)",
               f"{behind:.2f} s vs {small:.2f} s", ratio=behind / small,
               goal="~1 (flat in history)", met=None)
    with postgres_schema() as url:
        if url is not None:
            seconds = sweep_once(url, [open_threads(pending)], stale)
            say(f"  PostgreSQL: {stale:,} expired in {seconds:.2f} s ({rate(stale, seconds)})")
            report("4 sweep", "expiries/s, PostgreSQL", f"{stale / seconds:,.0f} expiries/s",
                   ratio=None, goal="reported", met=None)


if __name__ == "__main__":
    main()
