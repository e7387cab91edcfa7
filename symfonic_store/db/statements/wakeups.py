"""Owed wake-ups as the sweep delivers them: insert, claim, settle, renew and release.
(The operator's view of them, and dropping them, is :mod:`symfonic_store.db.wakeups`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..executor import executor_for
from ..schema import (
    wakeups,
)

_INSERT_WAKEUP = wakeups.insert()
WAKEUP_ROW_KEYS = (
    "thread_id", "interrupt_id", "reason", "expired_version", "expired_at", "attempts",
    "claimed_by", "claimed_until", "graph",
)
"""The columns the owed wake-up INSERT binds (``last_error`` and the drop start NULL)."""


def insert_wakeups(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    executor_for(conn).write(conn, _INSERT_WAKEUP, rows, WAKEUP_ROW_KEYS)


def _in_threads(query: Any, thread_ids: Sequence[str] | None) -> Any:
    return query if thread_ids is None else query.where(wakeups.c.thread_id.in_(thread_ids))


# A signature alike claim_owed's (services/sweep.py) in shape only: that one claims, this one reads.
def claimable_wakeups(
    conn: Connection,
    *,
    now: float,
    after: tuple[str, str],
    limit: int,
    thread_ids: Sequence[str] | None,
    graph: str | None = None,
) -> list[tuple[str, str, str]]:
    """``(thread_id, interrupt_id, reason)`` of owed wake-ups nobody holds, keyset-paged:
    with ``graph``, only those owed to it or to no named graph.

    The rows are locked ``FOR UPDATE SKIP LOCKED`` (nothing on SQLite, whose writers
    hold the database lock): a concurrent sweep claiming at the same moment skips them,
    and one that committed its claim first has set ``claimed_until``, which the
    condition re-checked under the lock then refuses.
    """
    after_thread, after_interrupt = after
    query = (
        sa.select(wakeups.c.thread_id, wakeups.c.interrupt_id, wakeups.c.reason)
        .where(sa.or_(wakeups.c.claimed_until.is_(None), wakeups.c.claimed_until < now))
        .where(wakeups.c.dropped_at.is_(None))
        .where(
            sa.or_(
                wakeups.c.thread_id > after_thread,
                sa.and_(
                    wakeups.c.thread_id == after_thread, wakeups.c.interrupt_id > after_interrupt
                ),
            )
        )
        .order_by(wakeups.c.thread_id, wakeups.c.interrupt_id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if graph is not None:
        query = query.where(sa.or_(wakeups.c.graph.is_(None), wakeups.c.graph == graph))
    rows = conn.execute(_in_threads(query, thread_ids))
    return [(str(t), str(i), str(r)) for t, i, r in rows]


_ONE_WAKEUP = sa.and_(
    wakeups.c.thread_id == sa.bindparam("t"), wakeups.c.interrupt_id == sa.bindparam("i")
)
_CLAIM_WAKEUP = (
    wakeups.update()
    .where(_ONE_WAKEUP)
    .values(claimed_by=sa.bindparam("claim"), claimed_until=sa.bindparam("until"))
)
# A row an operator dropped while its delivery was under way stays: the record of the drop.
_DELETE_WAKEUP = wakeups.delete().where(_ONE_WAKEUP, wakeups.c.dropped_at.is_(None))
_FAILED_WAKEUP = (
    wakeups.update()
    .where(_ONE_WAKEUP)
    .values(
        attempts=wakeups.c.attempts + 1,
        last_error=sa.bindparam("error"),
        claimed_by=None,
        claimed_until=None,
    )
)


def claim_wakeups(
    conn: Connection, keys: Sequence[tuple[str, str]], *, claim: str, until: float
) -> None:
    rows = [{"t": t, "i": i, "claim": claim, "until": until} for t, i in keys]
    if rows:
        conn.execute(_CLAIM_WAKEUP, rows)


def delete_wakeup(conn: Connection, thread_id: str, interrupt_id: str) -> None:
    conn.execute(_DELETE_WAKEUP, {"t": thread_id, "i": interrupt_id})


def record_failed_wakeup(conn: Connection, thread_id: str, interrupt_id: str, error: str) -> None:
    """One more failed attempt; the claim is let go, so the wake-up is owed again."""
    conn.execute(_FAILED_WAKEUP, {"t": thread_id, "i": interrupt_id, "error": error})


def renew_claims(conn: Connection, *, claim: str, until: float) -> None:
    conn.execute(
        wakeups.update().where(wakeups.c.claimed_by == claim).values(claimed_until=until)
    )


def release_claims(conn: Connection, *, claim: str) -> None:
    conn.execute(
        wakeups.update()
        .where(wakeups.c.claimed_by == claim)
        .values(claimed_by=None, claimed_until=None)
    )
