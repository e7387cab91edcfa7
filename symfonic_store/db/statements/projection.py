"""The projection checked and rebuilt from the log, set-based: what the fold of each
thread's events leaves behind, the open LangGraph interrupts it implies, and the heads
the events do not reach.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...event_types import run_id_types
from ...events import ASSIGNED, ENDINGS, MINTED
from ...native import NATIVE_SOURCE
from ..rows import (
    EVENT_COLUMNS,
)
from ..schema import (
    archived_threads,
    events,
    threads,
)


def _is_marker_mint() -> sa.ColumnElement[bool]:
    """A seed marker's mint (a LangGraph interrupt's mint records ``source``)."""
    return sa.and_(
        events.c.type == MINTED,
        sa.func.coalesce(events.c.data["source"].as_string(), "") != NATIVE_SOURCE,
    )


def latest_assignee(thread_id: Any, interrupt_id: Any) -> sa.ScalarSelect[Any]:
    """The interrupt's latest ``interrupt.assigned`` as the API shows it (a principal, or
    ``role:<name>``; NULL: never assigned): the SQL twin of the type's fold
    (:func:`~symfonic_store.event_types.assign`), read through the interrupt's index."""
    a = events.alias("assigned_event")
    to = a.c.data["to"].as_string()
    return (
        sa.select(sa.case((a.c.data["kind"].as_string() == "role", sa.literal("role:") + to), else_=to))
        .where(a.c.thread_id == thread_id, a.c.interrupt_id == interrupt_id, a.c.type == ASSIGNED)
        .order_by(a.c.version.desc())
        .limit(1)
        .scalar_subquery()
    )


def open_native_mints_query() -> sa.Select[Any]:
    """The mints of LangGraph interrupts without an ending: the open-interrupts fold.

    Columns: the event's (:data:`EVENT_COLUMNS`), then its ``tenant`` and its latest
    assignee (:func:`latest_assignee`)."""
    ending = events.alias("ending_event")
    return (
        sa.select(
            *EVENT_COLUMNS, events.c.tenant,
            latest_assignee(events.c.thread_id, events.c.interrupt_id),
        )
        .where(events.c.type == MINTED)
        .where(events.c.data["source"].as_string() == NATIVE_SOURCE)
        .where(
            ~sa.exists().where(
                ending.c.thread_id == events.c.thread_id,
                ending.c.interrupt_id == events.c.interrupt_id,
                ending.c.type.in_(ENDINGS),
            )
        )
        .order_by(events.c.thread_id, events.c.version)
    )


def projection_rows_query() -> sa.Select[Any]:
    """Per thread, in one set-based pass: what the fold of its events leaves behind.

    Columns: ``thread_id``, ``version``, ``events`` (how many), ``last_hash``, ``run_id`` (of the latest ``interrupt.minted`` or
    ``route.decided`` event carrying one) and, when the latest mint of the thread has
    no ending after it, that mint's ``data`` and ``occurred_at`` (else NULL): an ending
    clears the pending marker of the same interrupt id, as in the fold. Only the
    data of pending mints is read, so a rebuild does not decode every event's JSON.
    Then that mint's ``tenant`` and its latest assignee (:func:`latest_assignee`), NULL
    without a pending mint.
    """
    per_thread = (
        sa.select(
            events.c.thread_id.label("thread_id"),
            sa.func.max(events.c.version).label("version"),
            sa.func.count().label("events"),
            sa.func.max(
                sa.case((_is_marker_mint(), events.c.version), else_=None)
            ).label("mint_version"),
            sa.func.max(
                sa.case(
                    (
                        sa.and_(
                            events.c.type.in_(run_id_types()),
                            events.c.run_id.is_not(None),
                        ),
                        events.c.version,
                    ),
                    else_=None,
                )
            ).label("run_version"),
        )
        .group_by(events.c.thread_id)
        .subquery("per_thread")
    )
    last = events.alias("last_event")
    run = events.alias("run_event")
    mint = events.alias("mint_event")
    ending = events.alias("ending_event")
    still_open = ~sa.exists().where(
        ending.c.thread_id == mint.c.thread_id,
        ending.c.interrupt_id == mint.c.interrupt_id,
        ending.c.type.in_(ENDINGS),
        ending.c.version > mint.c.version,
    )
    return (
        sa.select(
            per_thread.c.thread_id,
            per_thread.c.version,
            per_thread.c.events,
            last.c.hash,
            run.c.run_id,
            mint.c.data,
            mint.c.occurred_at,
            mint.c.tenant,
            latest_assignee(mint.c.thread_id, mint.c.interrupt_id),
        )
        # A join alike the audit queries' in shape only (other tables and keys).
        .select_from(
            per_thread.join(
                last,
                sa.and_(
                    last.c.thread_id == per_thread.c.thread_id,
                    last.c.version == per_thread.c.version,
                ),
            )
            .outerjoin(
                run,
                sa.and_(
                    run.c.thread_id == per_thread.c.thread_id,
                    run.c.version == per_thread.c.run_version,
                ),
            )
            .outerjoin(
                mint,
                sa.and_(
                    mint.c.thread_id == per_thread.c.thread_id,
                    mint.c.version == per_thread.c.mint_version,
                    still_open,
                ),
            )
        )
        .order_by(per_thread.c.thread_id)
    )


def projection_heads_query(thread_id: str | None = None) -> sa.CompoundSelect[Any]:
    """Each thread's projection head beside its last event, in ONE statement.

    Columns: ``thread_id``, the projection's ``version`` and ``last_hash`` (NULL without
    a row), the last event's ``version``, ``hash`` and ``position`` (NULL without
    events), the row's ``archived_version`` and the hash its archive record holds. One statement reads one snapshot, so an append committing meanwhile (it
    writes its event and the projection row together) can never look like a mismatch.
    """
    last_versions = sa.select(
        events.c.thread_id.label("thread_id"), sa.func.max(events.c.version).label("version")
    ).group_by(events.c.thread_id)
    if thread_id is not None:
        last_versions = last_versions.where(events.c.thread_id == thread_id)
    lv = last_versions.cte("last_versions")
    last = events.alias("last_event")
    on_last = sa.and_(last.c.thread_id == lv.c.thread_id, last.c.version == lv.c.version)
    arch = archived_threads.alias("archived_head")
    with_row = sa.select(
        threads.c.thread_id,
        threads.c.version,
        threads.c.last_hash,
        last.c.version,
        last.c.hash,
        last.c.position,
        threads.c.archived_version,
        arch.c.last_hash,
    ).select_from(
        threads.outerjoin(lv, lv.c.thread_id == threads.c.thread_id)
        .outerjoin(last, on_last)
        .outerjoin(
            arch,
            sa.and_(arch.c.thread_id == threads.c.thread_id, arch.c.version == threads.c.archived_version),
        )
    )
    if thread_id is not None:
        with_row = with_row.where(threads.c.thread_id == thread_id)
    without_row = (
        sa.select(
            lv.c.thread_id,
            sa.cast(sa.null(), sa.Integer()),
            sa.cast(sa.null(), sa.String(64)),
            last.c.version,
            last.c.hash,
            last.c.position,
            sa.cast(sa.null(), sa.Integer()),
            sa.cast(sa.null(), sa.String(64)),
        )
        .select_from(lv.join(last, on_last))
        .where(~sa.exists().where(threads.c.thread_id == lv.c.thread_id))
    )
    return sa.union_all(with_row, without_row)


def unreachable_heads(conn: Connection) -> list[tuple[str, int]]:
    """``(thread_id, version)`` of every projection head the events do not reach: no
    event at the head's version, or one whose hash is not the head's last hash (an
    archived head is reached by its archive record)."""
    head = events.alias("head_event")
    query = (
        sa.select(threads.c.thread_id, threads.c.version)
        .select_from(
            threads.outerjoin(
                head,
                sa.and_(head.c.thread_id == threads.c.thread_id, head.c.version == threads.c.version),
            )
        )
        .where(sa.or_(head.c.position.is_(None), head.c.hash != threads.c.last_hash))
        .where(
            # An archived head with no events after it is reached by its archive record.
            ~sa.and_(
                sa.func.coalesce(threads.c.archived_version, -1) == threads.c.version,
                sa.exists().where(
                    archived_threads.c.thread_id == threads.c.thread_id,
                    archived_threads.c.version == threads.c.version,
                    archived_threads.c.last_hash == threads.c.last_hash,
                ),
            )
        )
        .order_by(threads.c.thread_id)
    )
    return [(str(t), int(v)) for t, v in conn.execute(query)]
