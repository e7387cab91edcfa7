"""The thread projection: one row per thread (its head, its pending marker), read and
written by the append path, and the sweep's candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import MINTED
from ...projection import ThreadState
from ..executor import executor_for
from ..executors.base import Executor, JsonText
from ..marker_name import MarkerName
from ..rows import (
    THREAD_COLUMNS,
    THREAD_ROW_KEYS,
    thread_row,
    to_thread,
)
from ..schema import (
    RUN_MOVED_ON,
    events,
    threads,
)
from .tenants import Scope, in_scope, scoped_page

# The statements of the append path are built once, with bound parameters, so each
# call reuses SQLAlchemy's compiled form instead of building and hashing a new query.
_LOAD_THREAD = sa.select(*THREAD_COLUMNS).where(threads.c.thread_id == sa.bindparam("t"))
# FOR UPDATE compiles to nothing on SQLite, whose writers hold the database lock.
_LOAD_THREAD_FOR_UPDATE = _LOAD_THREAD.with_for_update()


def load_thread(conn: Connection, thread_id: str, *, for_update: bool) -> ThreadState | None:
    query = _LOAD_THREAD_FOR_UPDATE if for_update else _LOAD_THREAD
    rows = executor_for(conn).fetch(conn, query, {"t": thread_id})
    return to_thread(rows[0]) if rows else None


_MINTED_ON_THREAD = (
    sa.select(events.c.position)
    .where(events.c.thread_id == sa.bindparam("t"))
    .where(events.c.interrupt_id == sa.bindparam("i"))
    .where(events.c.type == MINTED)
    .exists()
)
_LOAD_THREAD_PROBING_MINT = (
    sa.select(*THREAD_COLUMNS, _MINTED_ON_THREAD)
    .where(threads.c.thread_id == sa.bindparam("t"))
    .with_for_update(of=threads)
)


def load_thread_probing_mint(
    conn: Connection, thread_id: str, interrupt_id: str
) -> tuple[ThreadState | None, bool]:
    """The thread's row locked for update, and whether ``interrupt_id`` was minted on it.

    One statement. On PostgreSQL the probe reads the statement's snapshot, which may be
    older than the row lock it waited for: a mint committed meanwhile is then missed,
    and the mint appended again loses on ``uq_symfonic_events_one_mint`` and is retried,
    so the answer the caller acts on is always right.
    """
    rows = executor_for(conn).fetch(
        conn, _LOAD_THREAD_PROBING_MINT, {"t": thread_id, "i": interrupt_id}
    )
    if not rows:
        return None, False
    return to_thread(rows[0][:-1]), bool(rows[0][-1])


_INSERT_THREAD = threads.insert()
_UPDATE_THREAD = (
    threads.update()
    .where(threads.c.thread_id == sa.bindparam("b_thread_id"))
    .values(
        version=sa.bindparam("version"),
        last_hash=sa.bindparam("last_hash"),
        run_id=sa.bindparam("run_id"),
        pending=sa.bindparam("pending"),
        pending_interrupt_id=sa.bindparam("pending_interrupt_id"),
        pending_run_id=sa.bindparam("pending_run_id"),
        pending_minted_at=sa.bindparam("pending_minted_at"),
        pending_since=sa.bindparam("pending_since"),
        tenant=sa.bindparam("tenant"),
        assigned_to=sa.bindparam("assigned_to"),
    )
)


def _thread_rows(
    executor: Executor, states: Sequence[ThreadState], pending_json: Sequence[str | None] | None
) -> list[dict[str, Any]]:
    if pending_json is None or not executor.takes_json_text:
        return [thread_row(s) for s in states]
    return [thread_row(s, j) for s, j in zip(states, pending_json, strict=True)]


def _thread_values(state: ThreadState, pending_json: str | None) -> list[Any]:
    """:func:`~..rows.thread_row` as values in ``THREAD_ROW_KEYS`` order, for executors
    that take encoded JSON (no dict per row)."""
    pending: Any = state.pending
    if pending is not None and pending_json is not None:
        pending = JsonText(pending_json)
    return [
        state.thread_id, state.version, state.last_hash, state.run_id, pending,
        state.pending_interrupt_id, state.pending_run_id, state.pending_minted_at,
        state.pending_since, state.tenant, state.assigned_to,
    ]


# Signature alike update_threads' deliberately: the two write the same rows, one inserting, one
# updating.
def insert_threads(
    conn: Connection,
    states: Sequence[ThreadState],
    pending_json: Sequence[str | None] | None = None,
) -> None:
    """Insert projection rows (``pending_json``: each pending marker's JSON, when known)."""
    executor = executor_for(conn)
    if pending_json is not None and executor.takes_json_text:
        rows = [_thread_values(s, j) for s, j in zip(states, pending_json, strict=True)]
        executor.write_values(conn, _INSERT_THREAD, THREAD_ROW_KEYS, rows)
        return
    executor.write(conn, _INSERT_THREAD, _thread_rows(executor, states, pending_json), THREAD_ROW_KEYS)


# Signature alike insert_threads' deliberately (see there).
def update_threads(
    conn: Connection,
    states: Sequence[ThreadState],
    pending_json: Sequence[str | None] | None = None,
) -> None:
    """Update projection rows (``pending_json`` as for :func:`insert_threads`)."""
    executor = executor_for(conn)
    rows = _thread_rows(executor, states, pending_json)
    for row in rows:
        row["b_thread_id"] = row.pop("thread_id")
    executor.write(conn, _UPDATE_THREAD, rows)


_UPDATE_THREAD_AT_HEAD = _UPDATE_THREAD.where(
    threads.c.version == sa.bindparam("b_version")
).where(threads.c.last_hash == sa.bindparam("b_hash"))


def update_thread_at_head(
    conn: Connection, state: ThreadState, pending_json: str | None, head: tuple[int, str]
) -> bool:
    """Update a projection row only if it still holds ``head`` (its version and hash): a
    compare-and-swap. False: someone else appended to the thread since (nothing written)."""
    executor = executor_for(conn)
    if executor.takes_json_text:
        values = _thread_values(state, pending_json)
        values += head
        return executor.write_values(conn, _UPDATE_THREAD_AT_HEAD, _AT_HEAD_KEYS, [values]) == 1
    row = _thread_rows(executor, [state], [pending_json])[0]
    row["b_thread_id"] = row.pop("thread_id")
    row["b_version"], row["b_hash"] = head
    return executor.write_counted(conn, _UPDATE_THREAD_AT_HEAD, row) == 1


_AT_HEAD_KEYS = ("b_thread_id", *THREAD_ROW_KEYS[1:], "b_version", "b_hash")
"""The binds of the compare-and-swap, in the order of :func:`_thread_values` and the head."""


def delete_all_threads(conn: Connection) -> None:
    conn.execute(threads.delete())


def pending_threads_query(
    *,
    since_before: float | None,
    limit: int | None,
    scope: Scope = None,
    after: tuple[float, str] | None = None,
    thread: str | None = None,
    name: str | None = None,
    assigned_to: str | None = None,
) -> sa.Select[Any]:
    """The threads with a pending marker, oldest first (of ``scope``'s tenants); ``after``:
    only those after this ``(pending_since, thread_id)`` (keyset paging on the index of
    pending threads). ``thread``: only that thread's (its primary key); ``name``: only
    markers of that name (``ix_symfonic_threads_pending_name``); ``assigned_to``: only
    those assigned so (``ix_symfonic_threads_pending_assignee``). A scope alone pages one
    branch per tenant on ``ix_symfonic_threads_pending_tenant`` (:func:`scoped_page`);
    beside another filter it is a condition on the row's ``tenant``."""
    query = (
        sa.select(*THREAD_COLUMNS)
        .where(threads.c.pending_interrupt_id.is_not(None))
        .order_by(threads.c.pending_since, threads.c.thread_id)
    )
    if since_before is not None:
        query = query.where(threads.c.pending_since < since_before)
    if thread is not None:
        query = query.where(threads.c.thread_id == thread)
    if name is not None:
        query = query.where(MarkerName(threads.c.pending) == name)
    if assigned_to is not None:  # in the index's order (see :func:`scoped_page`)
        query = query.where(threads.c.assigned_to == assigned_to).order_by(None).order_by(
            threads.c.assigned_to, threads.c.pending_since, threads.c.thread_id
        )
    if after is not None:
        query = query.where(
            sa.tuple_(threads.c.pending_since, threads.c.thread_id) > sa.tuple_(*after)
        )
    if limit is not None:
        query = query.limit(limit)
    if thread is None and name is None and assigned_to is None:
        return scoped_page(query, threads.c.tenant, scope, keys=_PENDING_KEYS, limit=limit)
    kept = in_scope(threads.c.tenant, scope)
    return query if kept is None else query.where(kept)


_PENDING_KEYS = ("pending_since", "thread_id")


def pending_threads(
    conn: Connection,
    *,
    since_before: float | None,
    limit: int | None,
    scope: Scope = None,
    after: tuple[float, str] | None = None,
    thread: str | None = None,
    name: str | None = None,
    assigned_to: str | None = None,
) -> list[ThreadState]:
    """The rows of :func:`pending_threads_query`."""
    query = pending_threads_query(
        since_before=since_before, limit=limit, scope=scope, after=after, thread=thread,
        name=name, assigned_to=assigned_to,
    )
    return [to_thread(r) for r in conn.execute(query)]


def run_moved_on_threads(
    conn: Connection,
    *,
    after_thread: str,
    limit: int,
    lock: bool,
    thread_ids: Sequence[str] | None = None,
) -> list[ThreadState]:
    """Pending threads whose marker names another run than the thread's (rule P3), after
    ``after_thread`` in thread order: read from ``ix_symfonic_threads_run_moved_on``, which
    holds those threads only, so a page costs what it returns.

    With ``lock`` on PostgreSQL the rows are locked ``FOR UPDATE SKIP LOCKED``, so
    concurrent sweeps split the work instead of waiting on each other. ``thread_ids``
    limits the candidates to those threads (an expanding bound parameter: one bind per id).
    """
    query = (
        sa.select(*THREAD_COLUMNS)
        # The index's own predicate, spelled the same: SQLite and PostgreSQL then read it.
        .where(sa.text(RUN_MOVED_ON))
        .where(threads.c.thread_id > after_thread)
        .order_by(threads.c.thread_id)
        .limit(limit)
    )
    return _candidates(conn, query, lock=lock, thread_ids=thread_ids)


TtlKey = tuple[float, str]
"""A position among the pending threads in TTL order: ``(pending_since, thread_id)``."""


def ttl_threads(
    conn: Connection,
    *,
    cutoff: float,
    after: TtlKey | None,
    limit: int,
    lock: bool,
    thread_ids: Sequence[str] | None = None,
) -> list[ThreadState]:
    """Pending threads whose marker's ``minted_at`` is before ``cutoff``, oldest first,
    after the keyset ``after`` (None: from the oldest): read from
    ``ix_symfonic_threads_pending_since`` from its start up to the cutoff, so a page costs
    what it returns and the threads not yet stale are never read.

    A marker's ``pending_since`` is its numeric ``minted_at`` (:class:`ThreadState`), the
    TTL's clock; a marker without one has no TTL (``pending_minted_at`` is NULL) and is
    passed over. ``cutoff`` is a little later than ``now - ttl`` so that floating-point
    rounding can only add candidates, never lose one. ``lock`` and ``thread_ids`` as for
    :func:`run_moved_on_threads`.
    """
    query = (
        sa.select(*THREAD_COLUMNS)
        .where(threads.c.pending_interrupt_id.is_not(None))
        .where(threads.c.pending_since < cutoff)
        .where(threads.c.pending_minted_at < cutoff)
        .order_by(threads.c.pending_since, threads.c.thread_id)
        .limit(limit)
    )
    if after is not None:
        since, thread_id = after
        query = query.where(threads.c.pending_since >= since).where(
            sa.or_(
                threads.c.pending_since > since,
                threads.c.thread_id > thread_id,
            )
        )
    return _candidates(conn, query, lock=lock, thread_ids=thread_ids)


def _candidates(
    conn: Connection, query: sa.Select[Any], *, lock: bool, thread_ids: Sequence[str] | None
) -> list[ThreadState]:
    if thread_ids is not None:
        query = query.where(threads.c.thread_id.in_(thread_ids))
    if lock:  # compiles to nothing on SQLite, whose writers hold the database lock
        query = query.with_for_update(skip_locked=True)
    return [to_thread(r) for r in conn.execute(query)]
