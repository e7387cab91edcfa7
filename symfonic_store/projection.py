"""The projection: a thread's current state as a pure fold of its events.

``fold(events)`` is the reference: the persisted projection table, a
``rebuild_projection()`` and this function must always agree (invariant I6).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .event_types import spec_of
from .events import GENESIS_HASH
from .native import NATIVE_SOURCE
from .protocol import MARKER_KEYS, PENDING_KEY


class EventLike(Protocol):
    @property
    def thread_id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def interrupt_id(self) -> str | None: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def actor(self) -> str | None: ...
    @property
    def data(self) -> dict[str, Any]: ...
    @property
    def occurred_at(self) -> datetime: ...
    @property
    def hash(self) -> str: ...


@dataclass(slots=True)
class ThreadState:
    """What the projection keeps per thread."""

    thread_id: str
    version: int = 0
    last_hash: str = GENESIS_HASH
    run_id: str | None = None
    pending: dict[str, Any] | None = None
    pending_since: float | None = None
    """Epoch seconds the pending interrupt counts its age from: the marker's numeric
    ``minted_at``, else the time its mint was recorded."""
    tenant: str | None = None
    """The tenant of the pending marker's mint (SPEC §15; None: without one, or no marker)."""
    assigned_to: str | None = None
    """The pending marker's latest assignment as the API shows it (:func:`assignee_of`),
    None while unassigned or without a marker."""
    open: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The open LangGraph interrupts (SPEC §8) by id, as :func:`open_from_event` makes
    them. A state loaded from the thread row leaves this empty: the append path keeps
    their rows from the events it writes, not from this field."""

    @property
    def pending_interrupt_id(self) -> str | None:
        return None if self.pending is None else self.pending.get("interrupt_id")

    @property
    def pending_run_id(self) -> str | None:
        return None if self.pending is None else self.pending.get("run_id")

    @property
    def pending_minted_at(self) -> float | None:
        """The marker's ``minted_at`` when it is a number (the TTL applies), else None."""
        if self.pending is None:
            return None
        minted_at = self.pending.get("minted_at")
        # Same test as the predicate (P4), bools included, so the sweep and the router
        # agree on which markers a TTL applies to.
        if not isinstance(minted_at, int | float):
            return None
        return float(minted_at)

    def as_state(self) -> dict[str, Any]:
        """The state shape of ``store.state()``: ``{"_interrupt_pending", "run_id"}``."""
        return {PENDING_KEY: copy.deepcopy(self.pending), "run_id": self.run_id}


def marker_from_data(data: dict[str, Any]) -> dict[str, Any]:
    """The seed-shaped marker recorded in an ``interrupt.minted`` event's data.

    A new dict, sharing the values of ``data`` (the payload): nothing modifies a marker
    or an event's data in place, and :meth:`ThreadState.as_state` hands callers a deep
    copy, so no caller's change can reach a stored event or a projected state.
    """
    return {key: data.get(key) for key in MARKER_KEYS}


def tenant_of(event: EventLike) -> str | None:
    """The tenant of a mint: a column beside the event (a new one carries it; one read
    back as a :class:`~symfonic_store.events.StoredEvent` does not, and folds to None)."""
    tenant: str | None = getattr(event, "tenant", None)
    return tenant


def is_native_mint(data: dict[str, Any]) -> bool:
    """Does a mint's data record a LangGraph interrupt rather than a seed marker?"""
    return data.get("source") == NATIVE_SOURCE


def open_from_event(event: EventLike) -> dict[str, Any]:
    """The open-interrupt row a native mint leaves (the columns of its table)."""
    data = event.data
    minted_at = data.get("minted_at")
    if isinstance(minted_at, bool) or not isinstance(minted_at, int | float):
        minted_at = event.occurred_at.timestamp()
    return {
        "thread_id": event.thread_id,
        "interrupt_id": event.interrupt_id,
        "name": data.get("name"),
        "payload": copy.deepcopy(data.get("payload")),
        "minted_at": float(minted_at),
        "actor": event.actor,
        "graph": data.get("graph"),
        "checkpoint_id": data.get("checkpoint_id"),
        "checkpoint_ns": data.get("checkpoint_ns"),
        "task_id": data.get("task_id"),
        "breakpoint": bool(data.get("breakpoint", False)),
        "version": event.version,
        "tenant": tenant_of(event),
        "assigned_to": None,
    }


def apply(state: ThreadState, event: EventLike) -> ThreadState:
    """Apply one event to a thread's state, in place; returns the state.

    What a type does is declared with it (:mod:`symfonic_store.event_types`); a type
    that is not registered only moves the thread's version and hash.
    """
    state.version = event.version
    state.last_hash = event.hash
    spec = spec_of(event.type)
    if spec is None:
        return state
    if spec.opens and is_native_mint(event.data):
        # A LangGraph interrupt's mint opens it and does nothing else (SPEC §8).
        state.open[str(event.interrupt_id)] = open_from_event(event)
        return state
    if spec.opens:
        state.pending = marker_from_data(event.data)
        state.tenant = tenant_of(event)
        state.assigned_to = None
        minted_at = state.pending_minted_at
        state.pending_since = (
            minted_at if minted_at is not None else event.occurred_at.timestamp()
        )
    if spec.run_id and event.run_id is not None:
        state.run_id = event.run_id
    if spec.ending:
        if state.pending is not None and state.pending_interrupt_id == event.interrupt_id:
            state.pending = None
            state.pending_since = None
            state.tenant = None
            state.assigned_to = None
        else:
            state.open.pop(str(event.interrupt_id), None)
    if spec.fold is not None:
        spec.fold(state, event)
    return state


def fold(events: Iterable[EventLike]) -> dict[str, ThreadState]:
    """Fold events (in per-thread order) into the state of every thread they touch."""
    threads: dict[str, ThreadState] = {}
    for event in events:
        state = threads.get(event.thread_id)
        if state is None:
            state = threads[event.thread_id] = ThreadState(event.thread_id)
        apply(state, event)
    return threads
