"""Valid event logs of any size, written straight into the event table.

Appending a million events through the public API would take most of an hour, and the
benchmarks that need them (sweep, rebuild, replay, streams, lookups) measure reading,
not loading. So rows are generated here exactly as the store would write them: versions
1..n per thread, the SHA-256 hash chain of :func:`symfonic_store.events.event_hash`,
and data shaped like real events (mint, route decision, resume or expiry). The store's
own table definition does the type conversion, so the rows are byte-for-byte what an
append would store; callers check ``verify()`` on a sample.

As a program it loads a dataset into a fresh database (used to keep the loading out of
the measuring process): ``python -m bench.bulk_load URL --spec spec.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from symfonic_store import InterruptStore
from symfonic_store.audit_columns import derive as derive_audit_columns
from symfonic_store.db.schema import events
from symfonic_store.events import EXPIRED, GENESIS_HASH, MINTED, RESUMED, ROUTE_DECIDED, event_hash

CHUNK = 5000
PAYLOAD = {"action": "refund", "amount": 420, "order": "1181", "currency": "EUR"}


@dataclass(frozen=True)
class ThreadSpec:
    """``count`` threads named ``{prefix}-{i}`` of ``events`` events each.

    ``ending`` says how the last interrupt of each thread ends: ``resumed``, ``expired``
    or ``pending`` (left open); with ``pending``, ``stale_every`` > 0 makes every n-th
    thread's open interrupt two days old (stale under any TTL below that). ``tenant``:
    the tenant every mint of these threads is for (SPEC §15; None: without one).
    """

    prefix: str
    count: int
    events: int
    ending: str = "resumed"
    stale_every: int = 0
    tenant: str | None = None


def _rows_of_thread(
    thread_id: str, n: int, ending: str, stale: bool, clock: list[datetime], tenant: str | None = None
) -> Iterator[dict[str, Any]]:
    prev = GENESIS_HASH
    version = 0
    cycle = 0

    def row(type_: str, iid: str | None, run_id: str | None, actor: str | None, data: dict[str, Any]) -> dict[str, Any]:
        nonlocal prev, version
        version += 1
        clock[0] += timedelta(microseconds=100)
        at = clock[0]
        h = event_hash(
            prev, thread_id=thread_id, version=version, type=type_, interrupt_id=iid,
            run_id=run_id, actor=actor, data=data, occurred_at=at,
        )
        prev = h
        return {
            "thread_id": thread_id, "version": version, "type": type_, "interrupt_id": iid,
            "run_id": run_id, "actor": actor, "data": data, "occurred_at": at, "hash": h,
            # What the store's own INSERT writes beside the event (verify checks them).
            **derive_audit_columns(type_, data, at),
            # A mint's tenant is a column beside the event, outside its hash (SPEC §15).
            "tenant": tenant if type_ == MINTED else None,
        }

    while version < n:
        cycle += 1
        iid = f"i-{cycle:012x}"
        run_id = f"run-{cycle}"
        left = n - version
        if left == 1 and ending != "pending":
            yield row(ROUTE_DECIDED, None, run_id, None,
                      {"route": "finish", "interrupt_id": None, "reason": None})
            return
        last = left <= 3
        minted_at = clock[0].timestamp()
        if last and ending == "pending" and stale:
            minted_at -= 2 * 86400
        marker = {
            "name": "approval_required", "interrupt_id": iid, "payload": PAYLOAD,
            "tool_call_id": f"call_{cycle}", "run_id": run_id, "minted_at": minted_at,
        }
        yield row(MINTED, iid, run_id, None, marker)
        if last and ending == "pending":
            while version < n:  # route decisions that keep it pending
                yield row(ROUTE_DECIDED, iid, run_id, None,
                          {"route": "interrupt", "interrupt_id": iid, "reason": None})
            return
        if left >= 3:
            yield row(ROUTE_DECIDED, iid, run_id, None,
                      {"route": "interrupt", "interrupt_id": iid, "reason": None})
        if last and ending == "expired":
            yield row(EXPIRED, iid, None, None, {"reason": "ttl", "detected_by": "sweep"})
        else:
            yield row(RESUMED, iid, None, "alice" if cycle % 2 else "bob",
                      {"response": {"approved": cycle % 3 != 0, "note": "ok"}})


def rows(specs: list[ThreadSpec], *, start: datetime | None = None) -> Iterator[dict[str, Any]]:
    """Every row of every thread, thread after thread."""
    # Recent enough that an interrupt left open is fresh under a one-hour TTL.
    clock = [start or datetime.now(UTC) - timedelta(minutes=10)]
    for spec in specs:
        for i in range(spec.count):
            stale = spec.stale_every > 0 and i % spec.stale_every == 0
            yield from _rows_of_thread(
                f"{spec.prefix}-{i:07d}", spec.events, spec.ending, stale, clock, spec.tenant
            )


def load(store: InterruptStore, specs: list[ThreadSpec], *, rebuild: bool = True) -> int:
    """Write the dataset into a migrated store; rebuild its projection; returns events written."""
    written = 0
    chunk: list[dict[str, Any]] = []
    insert = events.insert()
    with store.engine.connect() as conn:
        for r in rows(specs):
            chunk.append(r)
            if len(chunk) >= CHUNK:
                with conn.begin():
                    conn.execute(insert, chunk)
                written += len(chunk)
                chunk = []
        if chunk:
            with conn.begin():
                conn.execute(insert, chunk)
            written += len(chunk)
    if rebuild:
        store.rebuild_projection()
    return written


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("--spec", required=True, help="JSON list of ThreadSpec fields")
    p.add_argument("--no-rebuild", action="store_true")
    args = p.parse_args(argv)
    specs = [ThreadSpec(**s) for s in json.loads(args.spec)]
    store = InterruptStore(args.url)
    store.setup()
    start = time.perf_counter()
    n = load(store, specs, rebuild=not args.no_rebuild)
    store.close()
    print(f"  loaded {n:,} events in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
