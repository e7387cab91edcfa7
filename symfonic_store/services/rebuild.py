"""Rebuild the projection table from the event log (invariant I6: projection = fold)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Connection

from ..db.rows import to_event
from ..db.statements.counts import pause_deltas, recount_open
from ..db.statements.evidence import restore_archived_rows
from ..db.statements.native import delete_all_open_interrupts, insert_open_interrupts
from ..db.statements.projection import (
    open_native_mints_query,
    projection_rows_query,
    unreachable_heads,
)
from ..db.statements.threads import delete_all_threads, insert_threads
from ..errors import ProjectionMismatchError
from ..projection import ThreadState, marker_from_data, open_from_event
from .audit import rebuild_rows

_BATCH = 2000

Progress = Callable[[int], None]
"""Called with the number of events folded so far."""


_NAMED = 3


def refuse_unreachable_heads(conn: Connection) -> None:
    """Raise :class:`ProjectionMismatchError` when a projection head is not in the events.

    Such a head is the last trace of events removed from the end of a thread (or of a
    rewritten last event); a rebuild would replace it by the fold of what is left.
    """
    unreachable = unreachable_heads(conn)
    if not unreachable:
        return
    named = ", ".join(f"{t!r} at version {v}" for t, v in unreachable[:_NAMED])
    more = f" and {len(unreachable) - _NAMED} more" if len(unreachable) > _NAMED else ""
    raise ProjectionMismatchError(
        f"refusing to rebuild: the projection holds the head of {len(unreachable)} thread(s) "
        f"that the events no longer reach ({named}{more}): events were removed or rewritten "
        "behind the store's back, and a rebuild would erase the last trace of it. Run "
        "`symfonic-store verify` to see what is wrong and restore the events from a backup; "
        "to rebuild from the events as they are, run `symfonic-store projection rebuild "
        "--force` (rebuild_projection(force=True))",
        thread_ids=tuple(t for t, _ in unreachable),
    )


def rebuild(conn: Connection, *, progress: Progress | None = None, force: bool = False) -> int:
    """Replace every projection row by the fold of the thread's events; returns events folded.

    Unless ``force``, first refuses (:func:`refuse_unreachable_heads`) when a projection
    head is one the events no longer reach.

    An archived thread's head comes back from its archive record, with the events after
    it folded on top (the projection's ``run_id`` is the archived one until a later event
    names another).

    The audit's rows (``symfonic_audit_rows``) are rebuilt from the log too.

    The fold is done set-wise by the database (:func:`projection_rows_query`: the last
    hash, the latest run id and the still-open mint of each thread), which gives the
    same rows as :func:`~symfonic_store.projection.fold` five times faster than
    streaming every event through Python; only the pending markers are decoded. Rows
    are streamed, so memory holds one batch of them at a time.
    """
    if not force:
        refuse_unreachable_heads(conn)
    pause_deltas(conn)  # the open counts are recounted at the end
    delete_all_threads(conn)
    _rebuild_open_interrupts(conn)
    folded = 0
    batch: list[ThreadState] = []
    result = conn.execute(projection_rows_query(), execution_options={"yield_per": _BATCH})
    try:
        for (
            thread_id, version, count, last_hash, run_id, data, minted_occurred_at, tenant,
            assigned_to,
        ) in result:
            state = ThreadState(thread_id, version, last_hash, run_id)
            if minted_occurred_at is not None:
                state.pending = marker_from_data(data)
                state.tenant = tenant
                state.assigned_to = assigned_to
                minted_at = state.pending_minted_at
                state.pending_since = (
                    minted_at if minted_at is not None else minted_occurred_at.timestamp()
                )
            batch.append(state)
            folded += count
            if len(batch) >= _BATCH:
                insert_threads(conn, batch)
                batch = []
                if progress is not None:
                    progress(folded)
    finally:
        result.close()
    insert_threads(conn, batch)
    # Archived threads (SPEC §10): their heads are not in the events, but in the archive
    # records; a thread's later events were folded on top of its archived head.
    restore_archived_rows(conn)
    # The open counts /metrics reads: what the new projection holds (the deltas of other
    # writers are dropped with the old totals).
    recount_open(conn)
    # The audit's rows (0025_audit_rows): kept by triggers, rebuilt from the log as well.
    rebuild_rows(conn)
    if progress is not None:
        progress(folded)
    return folded


def _rebuild_open_interrupts(conn: Connection) -> None:
    """The open LangGraph interrupts: each native mint without an ending (SPEC §8)."""
    delete_all_open_interrupts(conn)
    batch = []
    result = conn.execute(open_native_mints_query(), execution_options={"yield_per": _BATCH})
    try:
        for row in result:
            *event, tenant, assigned_to = tuple(row)
            batch.append(
                {**open_from_event(to_event(event)), "tenant": tenant, "assigned_to": assigned_to}
            )
            if len(batch) >= _BATCH:
                insert_open_interrupts(conn, batch)
                batch = []
    finally:
        result.close()
    if batch:
        insert_open_interrupts(conn, batch)
