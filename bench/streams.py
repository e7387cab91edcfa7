"""Benchmark 7 -- replay and events stream in bounded memory.

Replays a 100,000-event thread and reads 1,000,000 events by position
(``iter_events``, page by page) on SQLite. Target: peak RSS growth under 50 MB for each.
"""

from __future__ import annotations

from bench.harness import PeakRSS, parser, rate, report, say, sqlite_dataset, timed
from bench.rebuild import million
from symfonic_store import InterruptStore


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    specs = million(10 if args.quick else 1)
    total = sum(s.count * s.events for s in specs)
    long_events = specs[0].events
    say(f"[7] streams: replay of a {long_events:,}-event thread; {total:,} events by position")
    with sqlite_dataset(specs) as path:
        store = InterruptStore(f"sqlite:///{path}")
        store.pending("long-0000000")  # connect and check the schema outside the measurement

        def replay() -> int:
            n = 0
            for _event, _state in store.replay("long-0000000"):
                n += 1
            return n

        def read_all() -> int:
            n = 0
            last = 0
            for event in store.iter_events(after=0, page_size=1000):
                assert event.position > last
                last = event.position
                n += 1
            return n

        with PeakRSS() as replay_mem:
            replay_s, replayed = timed(replay)
        with PeakRSS() as read_mem:
            read_s, read = timed(read_all)
        store.close()
    assert replayed == long_events and read == total, (replayed, read)
    say(f"  replay: {replayed:,} events in {replay_s:.2f} s ({rate(replayed, replay_s)}), "
        f"RSS {replay_mem.before:.0f} -> peak {replay_mem.peak:.0f} MB")
    say(f"  events: {read:,} events in {read_s:.2f} s ({rate(read, read_s)}), "
        f"RSS {read_mem.before:.0f} -> peak {read_mem.peak:.0f} MB")
    report("7 streams", f"replay {replayed:,} events, RSS growth",
           f"{replay_mem.growth:.1f} MB ({rate(replayed, replay_s)})", ratio=None,
           goal="< 50 MB", met=replay_mem.growth < 50)
    report("7 streams", f"read {read:,} events by position, RSS growth",
           f"{read_mem.growth:.1f} MB ({rate(read, read_s)})", ratio=None,
           goal="< 50 MB", met=read_mem.growth < 50)


if __name__ == "__main__":
    main()
