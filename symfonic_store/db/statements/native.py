"""LangGraph's own interrupts and their claims (SPEC §8): the open-interrupts rows, the
claims on them, and the sweep's stale ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import MINTED
from ..executor import executor_for
from ..schema import (
    claims,
    events,
    open_interrupts,
)
from .tenants import Scope, in_scope, scoped_page

OPEN_COLUMNS = tuple(open_interrupts.c)
_INSERT_OPEN = open_interrupts.insert()
_DELETE_OPEN = open_interrupts.delete().where(
    open_interrupts.c.thread_id == sa.bindparam("b_thread_id"),
    open_interrupts.c.interrupt_id == sa.bindparam("b_interrupt_id"),
)
_ASSIGN_OPEN = (
    open_interrupts.update()
    .where(
        open_interrupts.c.thread_id == sa.bindparam("b_thread_id"),
        open_interrupts.c.interrupt_id == sa.bindparam("b_interrupt_id"),
    )
    .values(assigned_to=sa.bindparam("b_assigned_to"))
)
_LOAD_OPEN = (
    sa.select(*OPEN_COLUMNS)
    .where(open_interrupts.c.thread_id == sa.bindparam("t"))
    .order_by(open_interrupts.c.minted_at, open_interrupts.c.interrupt_id)
)
_LOAD_ONE_OPEN = sa.select(*OPEN_COLUMNS).where(
    open_interrupts.c.thread_id == sa.bindparam("t"),
    open_interrupts.c.interrupt_id == sa.bindparam("i"),
)
_WAITS = sa.or_(
    sa.exists().where(
        open_interrupts.c.thread_id == sa.bindparam("t"),
        open_interrupts.c.checkpoint_id == sa.bindparam("c"),
    ),
    sa.exists().where(
        events.c.thread_id == sa.bindparam("t"),
        events.c.interrupt_id == sa.bindparam("i"),
        events.c.type == MINTED,
    ),
)
_WAITS_AT = sa.select(_WAITS)
WAITED_SQLSTATE = "22012"
"""The code :func:`fail_if_waited` fails with (division_by_zero: no other statement of a
step divides), read by code, never from the message."""
_FAIL_IF_WAITED = sa.select(sa.literal_column("1") / sa.case((_WAITS, 0), else_=1))
_LOAD_CLAIMS = sa.select(
    claims.c.interrupt_id,
    claims.c.actor,
    claims.c.response,
    claims.c.claimed_at,
    claims.c.authenticated_by,
    claims.c.decided,
).where(claims.c.thread_id == sa.bindparam("t"))
_LOAD_ONE_CLAIM = _LOAD_CLAIMS.where(claims.c.interrupt_id == sa.bindparam("i"))
_INSERT_CLAIM = claims.insert()
_DELETE_CLAIM = claims.delete().where(
    claims.c.thread_id == sa.bindparam("b_thread_id"),
    claims.c.interrupt_id == sa.bindparam("b_interrupt_id"),
)


def waits_at(conn: Connection, thread_id: str, checkpoint_id: str, breakpoint_id: str) -> bool:
    """Is an open LangGraph interrupt of the thread from that checkpoint, or was its
    breakpoint (``breakpoint_id``) minted? One round trip: asked on every checkpoint."""
    params = {"t": thread_id, "c": checkpoint_id, "i": breakpoint_id}
    return bool(executor_for(conn).fetch(conn, _WAITS_AT, params)[0][0])


def fail_if_waited(conn: Connection, thread_id: str, checkpoint_id: str, breakpoint_id: str) -> None:
    """:func:`waits_at` as a statement whose result nobody reads: on PostgreSQL it fails
    (SQLSTATE :data:`WAITED_SQLSTATE`, a division by zero), and its transaction with it,
    when the answer is yes. Sent in a pipeline with the COMMIT, it spares the round trip
    of asking first. (SQLite divides by zero into NULL: there, ask :func:`waits_at`.)"""
    params = {"t": thread_id, "c": checkpoint_id, "i": breakpoint_id}
    executor_for(conn).write(conn, _FAIL_IF_WAITED, [params])


def insert_open_interrupts(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    executor_for(conn).write(conn, _INSERT_OPEN, rows, [c.key for c in OPEN_COLUMNS])


def delete_open_interrupts(conn: Connection, keys: Sequence[tuple[str, str]]) -> None:
    rows = [{"b_thread_id": t, "b_interrupt_id": i} for t, i in keys]
    executor_for(conn).write(conn, _DELETE_OPEN, rows)


def assign_open_interrupts(conn: Connection, assigned: Sequence[tuple[str, str, str]]) -> None:
    """Set ``assigned_to`` of open LangGraph interrupts: ``(thread_id, interrupt_id,
    assignee as the API shows it)`` each (an interrupt no longer open: nothing)."""
    rows = [{"b_thread_id": t, "b_interrupt_id": i, "b_assigned_to": a} for t, i, a in assigned]
    executor_for(conn).write(conn, _ASSIGN_OPEN, rows)


def open_rows(conn: Connection, thread_id: str) -> list[dict[str, Any]]:
    """The thread's open LangGraph interrupts, oldest first, as dicts of their columns."""
    names = [c.key for c in OPEN_COLUMNS]
    return [dict(zip(names, r, strict=True)) for r in executor_for(conn).fetch(conn, _LOAD_OPEN, {"t": thread_id})]


def open_row(conn: Connection, thread_id: str, interrupt_id: str) -> dict[str, Any] | None:
    """One open LangGraph interrupt (by its primary key) as a dict of its columns, or None."""
    names = [c.key for c in OPEN_COLUMNS]
    rows = executor_for(conn).fetch(conn, _LOAD_ONE_OPEN, {"t": thread_id, "i": interrupt_id})
    return dict(zip(names, rows[0], strict=True)) if rows else None


def claim_row(conn: Connection, thread_id: str, interrupt_id: str) -> dict[str, Any] | None:
    """The claim in flight on one interrupt (by its primary key), as :func:`claim_rows`
    gives it, or None."""
    rows = executor_for(conn).fetch(conn, _LOAD_ONE_CLAIM, {"t": thread_id, "i": interrupt_id})
    return _claims(rows).get(interrupt_id)


def claim_rows(conn: Connection, thread_id: str) -> dict[str, dict[str, Any]]:
    """The thread's claims in flight, by interrupt id."""
    return _claims(executor_for(conn).fetch(conn, _LOAD_CLAIMS, {"t": thread_id}))


def _claims(rows: Sequence[Any]) -> dict[str, dict[str, Any]]:
    return {
        r[0]: {
            "actor": r[1],
            "response": r[2],
            "claimed_at": r[3],
            "authenticated_by": r[4],
            "decided": r[5],
        }
        for r in rows
    }


def insert_claim(conn: Connection, row: dict[str, Any]) -> None:
    executor_for(conn).write(
        conn,
        _INSERT_CLAIM,
        [row],
        [
            "thread_id", "interrupt_id", "actor", "response", "claimed_at",
            "authenticated_by", "decided",
        ],
    )


def delete_claim(conn: Connection, thread_id: str, interrupt_id: str) -> None:
    executor_for(conn).write(conn, _DELETE_CLAIM, [{"b_thread_id": thread_id, "b_interrupt_id": interrupt_id}])


def open_interrupts_query(
    *,
    since_before: float | None = None,
    limit: int | None = None,
    scope: Scope = None,
    after: tuple[float, str, str] | None = None,
    thread: str | None = None,
    name: str | None = None,
    assigned_to: str | None = None,
) -> sa.Select[Any]:
    """Open LangGraph interrupts across all threads, oldest first (of ``scope``'s tenants);
    ``after``: only those after this ``(minted_at, thread_id, interrupt_id)`` (keyset
    paging on the index of ``minted_at``, with ``name`` on
    ``ix_symfonic_open_interrupts_name``, with ``assigned_to`` on
    ``ix_symfonic_open_interrupts_assignee``); ``thread``: only that thread's (its primary
    key's prefix). A scope alone pages one branch per tenant on
    ``ix_symfonic_open_interrupts_tenant`` (:func:`scoped_page`); beside another filter it
    is a condition on the row's ``tenant``."""
    c = open_interrupts.c
    query = sa.select(*OPEN_COLUMNS).order_by(c.minted_at, c.thread_id, c.interrupt_id)
    if since_before is not None:
        query = query.where(c.minted_at < since_before)
    if thread is not None:
        query = query.where(c.thread_id == thread)
    if name is not None:
        query = query.where(c.name == name)
    if assigned_to is not None:  # in the index's order (see :func:`scoped_page`)
        query = query.where(c.assigned_to == assigned_to).order_by(None).order_by(
            c.assigned_to, c.minted_at, c.thread_id, c.interrupt_id
        )
    if after is not None:
        query = query.where(sa.tuple_(c.minted_at, c.thread_id, c.interrupt_id) > sa.tuple_(*after))
    if limit is not None:
        query = query.limit(limit)
    if thread is None and name is None and assigned_to is None:
        return scoped_page(query, c.tenant, scope, keys=_OPEN_KEYS, limit=limit)
    kept = in_scope(c.tenant, scope)
    return query if kept is None else query.where(kept)


_OPEN_KEYS = ("minted_at", "thread_id", "interrupt_id")


def delete_all_open_interrupts(conn: Connection) -> None:
    conn.execute(open_interrupts.delete())


def read_open_interrupts(
    conn: Connection, *, since_before: float | None = None, limit: int | None = None,
    scope: Scope = None, after: tuple[float, str, str] | None = None,
    thread: str | None = None, name: str | None = None, assigned_to: str | None = None,
) -> list[dict[str, Any]]:
    names = [c.key for c in OPEN_COLUMNS]
    query = open_interrupts_query(
        since_before=since_before, limit=limit, scope=scope, after=after, thread=thread,
        name=name, assigned_to=assigned_to,
    )
    return [dict(zip(names, r, strict=True)) for r in conn.execute(query)]


OpenKey = tuple[float, str, str]
"""A position among the open LangGraph interrupts in minting order: ``(minted_at,
thread_id, interrupt_id)``."""


def stale_open_interrupts(
    conn: Connection,
    *,
    cutoff: float,
    after: OpenKey | None,
    limit: int,
    thread_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Open LangGraph interrupts minted before ``cutoff`` with no answer in flight, oldest
    first, after the keyset ``after`` (None: from the oldest).

    Read from ``ix_symfonic_open_interrupts_minted_at`` from its start up to the cutoff:
    a page costs what it returns, and the interrupts not yet stale are never read. Not
    locked: the sweep takes each thread's lock and reads what is still open under it.
    """
    names = [c.key for c in OPEN_COLUMNS]
    query = (
        sa.select(*OPEN_COLUMNS)
        .where(open_interrupts.c.minted_at < cutoff)
        .where(
            ~sa.exists().where(
                claims.c.thread_id == open_interrupts.c.thread_id,
                claims.c.interrupt_id == open_interrupts.c.interrupt_id,
            )
        )
        .order_by(open_interrupts.c.minted_at, open_interrupts.c.thread_id, open_interrupts.c.interrupt_id)
        .limit(limit)
    )
    if after is not None:
        minted_at, thread_id, interrupt_id = after
        query = query.where(open_interrupts.c.minted_at >= minted_at).where(
            sa.or_(
                open_interrupts.c.minted_at > minted_at,
                sa.tuple_(open_interrupts.c.thread_id, open_interrupts.c.interrupt_id)
                > sa.tuple_(sa.literal(thread_id), sa.literal(interrupt_id)),
            )
        )
    if thread_ids is not None:
        query = query.where(open_interrupts.c.thread_id.in_(thread_ids))
    return [dict(zip(names, r, strict=True)) for r in conn.execute(query)]


def stale_claims(
    conn: Connection, *, claimed_before: float, thread_ids: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """Claims older than ``claimed_before``: answers whose process may be gone."""
    query = (
        sa.select(claims.c.thread_id, claims.c.interrupt_id)
        .where(claims.c.claimed_at < claimed_before)
        .order_by(claims.c.claimed_at)
    )
    if thread_ids is not None:
        query = query.where(claims.c.thread_id.in_(thread_ids))
    return [(r[0], r[1]) for r in conn.execute(query)]
