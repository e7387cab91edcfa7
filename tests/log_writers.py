"""Writer processes for the gap-safe reader tests: each its own store, from a start barrier.

A separate module (not the test file) so a spawned child imports only this and the store.
"""

from __future__ import annotations

from typing import Any

from symfonic_store import InterruptStore, build_interrupt_marker, new_interrupt_id


def marker(run_id: str | None = None) -> dict[str, Any]:
    return build_interrupt_marker(
        name="approval_required",
        interrupt_id=new_interrupt_id(),
        payload={"amount": 420},
        run_id=run_id,
    )


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
