"""The property test's hypothesis strategies, keyed by event type.

The package declares the event types (:mod:`symfonic_store.event_types`); how the
property test draws operations that append each of them is a test matter and lives
here. ``BY_TYPE`` maps every registered type to a strategy and a weight (how often it
is drawn), and :func:`missing` names the registered types that have none: the property
test refuses to run while a type lacks one. Each strategy draws one operation: a tuple
whose first item names the ``Example.op_*`` method of ``test_property.py`` that applies it.

A type registered at test time gets its strategy with :func:`drawing` (or, type and
strategy together, :func:`throwaway_type`); its operation appends the event through the
store's own append path (:func:`append_event`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from symfonic_store import InterruptStore
from symfonic_store.event_types import EventType, all_types, registered
from symfonic_store.events import (
    ASSIGNED,
    ESCALATED,
    EXPIRED,
    MINTED,
    REMINDED,
    RESUME_REJECTED,
    RESUMED,
    ROUTE_DECIDED,
    VOTED,
)
from symfonic_store.store.append import ThreadWriter, flush, run_write

Op = tuple[Any, ...]

STORE_TTL = 60.0
THREADS = 2
RUN_IDS = (None, "r1", "r2")

thread_index = st.integers(0, THREADS - 1)

MINT = st.tuples(
    st.just("mint"),
    thread_index,
    st.sampled_from(["new", "new", "again", "other_thread"]),
    st.sampled_from(RUN_IDS),
    st.sampled_from(["clock", "clock", "text"]),
)
ROUTE = st.tuples(st.just("route"), thread_index, st.sampled_from(RUN_IDS))
ACTORS = st.sampled_from(["alice", "bob"])
RESPONSES = st.sampled_from([None, {"approved": True}, {"approved": False, "note": "no"}])
# A resume of the pending interrupt is admitted (unless it is stale); of an ended or an
# unknown one, refused and recorded as a rejection.
RESUME = st.tuples(
    st.just("resume"), thread_index, st.sampled_from(["pending", "pending", "last"]), ACTORS, RESPONSES
)
REFUSED_RESUME = st.tuples(
    st.just("resume"), thread_index, st.sampled_from(["last", "unknown"]), ACTORS, RESPONSES
)
EXPIRE = st.tuples(
    st.just("expire"),
    thread_index,
    st.sampled_from(["pending", "pending", "last", "unknown"]),
    st.sampled_from(["cancelled", "ttl"]),
)
SWEEP = st.tuples(st.just("sweep"), st.sampled_from([None, 10.0, STORE_TTL]), st.booleans())
# A sweep with a policy (SPEC §14): it expires what is stale, then reminds of and escalates
# what stays open past the thresholds (the clock's ticks hit them exactly, and just past).
CHASE = st.tuples(
    st.just("chase"),
    st.sampled_from([None, 1.0, 10.0, 30.0]),
    st.sampled_from([None, 10.0, 30.0, 61.0]),
    st.booleans(),
)

# Assignment and votes (SPEC §15): of the pending interrupt, an ended one or an unknown one;
# a principal's second vote is refused, nothing written.
ASSIGN = st.tuples(
    st.just("assign"), thread_index, st.sampled_from(["pending", "pending", "last", "unknown"]),
    st.sampled_from(["bob", "role:finance"]),
)
VOTE = st.tuples(
    st.just("vote"), thread_index, st.sampled_from(["pending", "pending", "last", "unknown"]),
    ACTORS, st.sampled_from(["approve", "reject"]),
)

BY_TYPE: dict[str, tuple[SearchStrategy[Op], int]] = {
    # Mints and resumes come up more often than the rest: they make the interesting states.
    MINTED: (MINT, 2),
    ROUTE_DECIDED: (ROUTE, 1),
    RESUMED: (RESUME, 2),
    RESUME_REJECTED: (REFUSED_RESUME, 1),
    EXPIRED: (EXPIRE, 1),
    REMINDED: (CHASE, 1),
    ESCALATED: (CHASE, 1),
    ASSIGNED: (ASSIGN, 1),
    VOTED: (VOTE, 1),
}
"""Event type -> (the strategy of an operation that appends it, its weight)."""
OTHERS: dict[str, tuple[SearchStrategy[Op], int]] = {"sweep": (SWEEP, 1)}
"""Operations that are not one type's (a sweep appends expiries, or nothing)."""

# Each step first moves the clock (often not at all), then acts: the TTL boundaries
# (exactly 10 or 60 seconds, and a millisecond past) come up often.
TICKS = st.sampled_from([0.0, 0.0, 0.0, 0.001, 1.0, 9.999, 10.0, 30.0, 60.0, 61.0, 3600.0])


def missing() -> list[str]:
    """The registered event types the table has no strategy for."""
    return [t.name for t in all_types() if t.name not in BY_TYPE]


def actions() -> SearchStrategy[Op]:
    """One operation, drawn from the table as it is now (types registered included)."""
    table = {**BY_TYPE, **OTHERS}
    keys = [key for key, (_, weight) in table.items() for _ in range(weight)]
    return st.sampled_from(keys).flatmap(lambda key: table[key][0])


def steps() -> SearchStrategy[list[tuple[float, Op]]]:
    """A sequence of ``(clock tick, operation)``; it starts with a mint, so answers have
    something to answer."""
    return st.builds(
        lambda first, rest: [(0.0, first), *rest],
        MINT,
        st.lists(st.tuples(TICKS, actions()), min_size=7, max_size=15),
    )


def appended(name: str) -> SearchStrategy[Op]:
    """An event of type ``name`` on a thread, about its pending interrupt, its last one
    or none, with or without a run id (``Example.op_append``)."""
    return st.tuples(
        st.just("append"),
        st.just(name),
        thread_index,
        st.sampled_from(["pending", "last", "none"]),
        st.sampled_from(RUN_IDS),
    )


@contextmanager
def drawing(name: str, strategy: SearchStrategy[Op] | None = None, weight: int = 1) -> Iterator[None]:
    """The table draws ``name`` (by default with :func:`appended`) inside the block."""
    if name in BY_TYPE:
        raise ValueError(f"{name!r} has a strategy already")
    BY_TYPE[name] = (strategy if strategy is not None else appended(name), weight)
    try:
        yield
    finally:
        del BY_TYPE[name]


@contextmanager
def throwaway_type(spec: EventType, weight: int = 1) -> Iterator[EventType]:
    """``spec`` registered in the package and drawn by the table, inside the block."""
    with registered(spec), drawing(spec.name, weight=weight):
        yield spec


def append_event(
    store: InterruptStore,
    thread_id: str,
    type: str,
    *,
    data: dict[str, Any],
    interrupt_id: str | None = None,
    run_id: str | None = None,
    actor: str | None = None,
) -> None:
    """Append one event the way the store's own writes do: a write transaction of
    ``run_write`` (retried on a lost race), a ``ThreadWriter`` and ``flush``."""

    def work(conn: Any) -> None:
        writer = ThreadWriter(conn, thread_id)
        writer.append(type, data=data, interrupt_id=interrupt_id, run_id=run_id, actor=actor)
        flush(conn, [writer])

    with store.engine.connect() as conn:
        run_write(conn, work)
