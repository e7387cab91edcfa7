"""A lost race, or a projection behind the log: telling the two apart.

A write chains its events onto the head its thread's projection row names (version 0
without a row), and the unique ``(thread_id, version)`` key turns a write onto a stale
head into a unique violation. Usually a concurrent writer took that version first: a
race, retried. But when the row was deleted (or set back) behind the store's back, the
writer collides with events the log already has, on every try: retrying cannot help,
and "a concurrent writer changed the same thread first; retry" would be untrue.

So after a lost race, :func:`refuse_projection_behind` reads each thread the
transaction opened again: its projection row and the log's last event, in one statement
(one snapshot; an append writes both in one transaction, I6). A real race leaves them
agreeing -- the log moved and the row with it; a log head beyond the row is a gap in
the projection, refused with :class:`~symfonic_store.ProjectionMismatchError` (nothing
was written: the transaction was rolled back).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .db.executor import executor_for
from .db.schema import events, threads
from .db.translate import translate_errors
from .errors import ProjectionMismatchError

REBUILD_HINT = "run `symfonic-store projection rebuild` (store.rebuild_projection())"

_OPENED: ContextVar[list[str] | None] = ContextVar("symfonic_store_opened_threads", default=None)


# The context-variable idiom of store/steps.py deferring(), deliberately: a helper would be longer
# than the two.
@contextmanager
def watching(opened: list[str]) -> Iterator[None]:
    """Collect into ``opened`` the id of every thread a writer opens inside."""
    token = _OPENED.set(opened)
    try:
        yield
    finally:
        _OPENED.reset(token)


def note_opened(thread_id: str) -> None:
    """Called by each :class:`~symfonic_store.store.append.ThreadWriter` as it reads its head."""
    opened = _OPENED.get()
    if opened is not None:
        opened.append(thread_id)


_HEADS = sa.select(
    sa.select(threads.c.version).where(threads.c.thread_id == sa.bindparam("t")).scalar_subquery(),
    sa.select(sa.func.max(events.c.version)).where(events.c.thread_id == sa.bindparam("t")).scalar_subquery(),
)
"""The projection row's version (NULL without a row) and the log's last version (NULL
without events) of thread ``t``, in one statement: one snapshot."""


def _gap(conn: Connection, thread_id: str) -> tuple[int | None, int] | None:
    """``(projection version or None, log version)`` when the log is ahead of the row."""
    ((projected, logged),) = executor_for(conn).fetch(conn, _HEADS, {"t": thread_id})
    if logged is not None and (projected is None or int(logged) > int(projected)):
        return (None if projected is None else int(projected)), int(logged)
    return None


def _mismatch(gaps: dict[str, tuple[int | None, int]]) -> ProjectionMismatchError:
    thread_id, (projected, logged) = next(iter(gaps.items()))
    row = "has no projection row" if projected is None else f"has its projection row at version {projected}"
    more = f" (and {len(gaps) - 1} more thread(s))" if len(gaps) > 1 else ""
    return ProjectionMismatchError(
        f"thread {thread_id!r} has events up to version {logged} in the event log but "
        f"{row}{more}: the projection disagrees with the log (it was changed behind the "
        "store's back), so this is not a race and retrying cannot help. Nothing was "
        f"written: {REBUILD_HINT}, then try again",
        thread_ids=tuple(gaps),
    )


def missing_row(conn: Connection, thread_id: str) -> ProjectionMismatchError | None:
    """For a writer that found no projection row: the error to raise when the log has
    events of the thread all the same (else it is a new, or mistyped, thread)."""
    gap = _gap(conn, thread_id)
    return None if gap is None else _mismatch({thread_id: gap})


def refuse_projection_behind(conn: Connection, thread_ids: Sequence[str]) -> None:
    """Raise :class:`ProjectionMismatchError` when the log of one of ``thread_ids`` is
    ahead of its projection row (run after the lost race's transaction was rolled back)."""
    if not thread_ids:
        return
    executor = executor_for(conn)
    with translate_errors():
        tx = executor.begin(conn, write=False)
        try:
            gaps = {t: g for t in dict.fromkeys(thread_ids) if (g := _gap(conn, t)) is not None}
        finally:
            executor.rollback(conn, tx)
    if gaps:
        raise _mismatch(gaps)


__all__ = ["REBUILD_HINT", "missing_row", "note_opened", "refuse_projection_behind", "watching"]
