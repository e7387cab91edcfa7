"""The event and thread rows as the statements select and bind them: their columns, and
the conversions between rows and the store's :class:`~symfonic_store.events.StoredEvent`
and :class:`~symfonic_store.projection.ThreadState`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Row

from ..audit_columns import AUDIT_COLUMNS
from ..events import StoredEvent
from ..projection import ThreadState
from ..protocol import MARKER_KEYS
from .executors.base import JsonText
from .schema import events, threads

EVENT_COLUMNS = (
    events.c.position,
    events.c.thread_id,
    events.c.version,
    events.c.type,
    events.c.interrupt_id,
    events.c.run_id,
    events.c.actor,
    events.c.data,
    events.c.occurred_at,
    events.c.hash,
)

THREAD_COLUMNS = (
    threads.c.thread_id,
    threads.c.version,
    threads.c.last_hash,
    threads.c.run_id,
    threads.c.pending,
    threads.c.pending_since,
    threads.c.tenant,
    threads.c.assigned_to,
)


THREAD_ROW_KEYS = (
    "thread_id", "version", "last_hash", "run_id", "pending", "pending_interrupt_id",
    "pending_run_id", "pending_minted_at", "pending_since", "tenant", "assigned_to",
)
"""The keys of :func:`thread_row`, the columns the projection INSERT binds."""
EVENT_ROW_KEYS = (
    "thread_id", "version", "type", "interrupt_id", "run_id", "actor", "data",
    "occurred_at", "hash", "tenant", *AUDIT_COLUMNS,
)
"""The keys of ``NewEvent.row()`` and its audit columns: the columns the event INSERT binds."""


def to_event(row: Row[Any] | Sequence[Any]) -> StoredEvent:
    return StoredEvent(*row)


def to_thread(row: Row[Any] | Sequence[Any]) -> ThreadState:
    thread_id, version, last_hash, run_id, pending, pending_since, tenant, assigned_to = tuple(row)
    if pending is not None and list(pending) != _MARKER_ORDER:
        # Stored as its mint's canonical JSON (sorted keys): handed out in the seed's order.
        ordered = {key: pending[key] for key in MARKER_KEYS if key in pending}
        pending = {**ordered, **pending}
    return ThreadState(
        thread_id, version, last_hash, run_id, pending, pending_since, tenant, assigned_to
    )


_MARKER_ORDER = list(MARKER_KEYS)


def thread_row(state: ThreadState, pending_json: str | None = None) -> dict[str, Any]:
    """The projection row of a thread (its columns derived from the folded state).

    ``pending_json``: the pending marker already encoded (the JSON of its mint), bound as
    it is where the executor takes encoded JSON.
    """
    pending: Any = state.pending
    if pending is not None and pending_json is not None:
        pending = JsonText(pending_json)
    return {
        "thread_id": state.thread_id,
        "version": state.version,
        "last_hash": state.last_hash,
        "run_id": state.run_id,
        "pending": pending,
        "pending_interrupt_id": state.pending_interrupt_id,
        "pending_run_id": state.pending_run_id,
        "pending_minted_at": state.pending_minted_at,
        "pending_since": state.pending_since,
        "tenant": state.tenant,
        "assigned_to": state.assigned_to,
    }

