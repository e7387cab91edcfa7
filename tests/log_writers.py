"""Writer processes for the gap-safe reader tests: each its own store, from a start barrier.

A separate module (not the test file) so a spawned child imports only this and the store.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import factories

from symfonic_store import InterruptStore

# The seed-shaped marker (new id, the seed's payload), stamped when built.
marker = partial(factories.marker, payload=factories.SEED_PAYLOAD)


def append_round(store: InterruptStore, n: int, r: int) -> None:
    """Round ``r`` of writer ``n``: a mint (which may supersede: 2 events) or a route
    decision, on one of the writer's three threads."""
    thread_id = f"tail-{n}-{r % 3}"
    if r % 2:
        store.mint(thread_id, marker(run_id=f"run-{n}"))
    else:
        store.record_route(thread_id, "finish", run_id=f"run-{n}-{r}")


def append_rounds(store: InterruptStore, n: int, rounds: int) -> None:
    for r in range(rounds):
        append_round(store, n, r)


def write_in_process(url: str, n: int, rounds: int, barrier: Any) -> None:
    """A writer process: import, connect and warm up, wait for the others, then append."""
    store = InterruptStore(url)
    try:
        store.state(f"tail-{n}-0")  # connect and check the schema before the barrier
        barrier.wait()
        append_rounds(store, n, rounds)
    finally:
        store.close()
