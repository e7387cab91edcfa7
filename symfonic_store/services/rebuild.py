"""Rebuild the projection table from the event log (invariant I6: projection = fold)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Connection

from ..projection import ThreadState, apply
from ..statements import all_events_by_thread_query, delete_all_threads, insert_threads, stream

_BATCH = 2000

Progress = Callable[[int], None]
"""Called with the number of events folded so far."""


def rebuild(conn: Connection, *, progress: Progress | None = None) -> int:
    """Replace every projection row by the fold of the thread's events; returns events folded.

    Streams the events in (thread, version) order, so memory holds one thread's state
    and one batch of rows at a time.
    """
    delete_all_threads(conn)
    folded = 0
    pending_rows: list[ThreadState] = []
    current: ThreadState | None = None
    for event in stream(conn, all_events_by_thread_query(), batch=_BATCH):
        if current is None or event.thread_id != current.thread_id:
            if current is not None:
                pending_rows.append(current)
                if len(pending_rows) >= _BATCH:
                    insert_threads(conn, pending_rows)
                    pending_rows = []
            current = ThreadState(event.thread_id)
        apply(current, event)
        folded += 1
        if progress is not None and folded % _BATCH == 0:
            progress(folded)
    if current is not None:
        pending_rows.append(current)
    insert_threads(conn, pending_rows)
    if progress is not None:
        progress(folded)
    return folded
