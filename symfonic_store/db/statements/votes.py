"""Quorum queries (SPEC §15): the approvers recorded on the answers that completed a quorum."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import MINTED, RESUMED, VOTED
from ..schema import events


def quorum_approvers(conn: Connection, thread_id: str | None = None) -> dict[tuple[str, str], tuple[str, ...]]:
    """``(thread_id, interrupt_id) -> approvers`` of each answer that recorded
    ``data["approvers"]``. Driven by the votes (their partial unique index), so a log
    without votes costs one empty index read."""
    voted = sa.select(events.c.thread_id, events.c.interrupt_id).where(events.c.type == VOTED)
    if thread_id is not None:
        voted = voted.where(events.c.thread_id == thread_id)
    v = voted.distinct().subquery()
    r = events.alias("r")
    query = sa.select(r.c.thread_id, r.c.interrupt_id, r.c.data).join(
        v, sa.and_(r.c.thread_id == v.c.thread_id, r.c.interrupt_id == v.c.interrupt_id)
    ).where(r.c.type == RESUMED)
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for t, i, data in conn.execute(query):
        names: Any = data.get("approvers") if isinstance(data, dict) else None
        if isinstance(names, list) and names:
            found[(str(t), str(i))] = tuple(str(n) for n in names)
    return found


def _approvers_between(by_thread: bool) -> sa.Select[Any]:
    """The answers that recorded approvers, to the mints whose key is in ``lo``..``hi``
    (the log position; with ``t``, the version in that thread): driven by those mints."""
    mint, r = events.alias("mint"), events.alias("r")
    key = mint.c.version if by_thread else mint.c.position
    query = (
        sa.select(r.c.thread_id, r.c.interrupt_id, r.c.data)
        .select_from(
            mint.join(
                r,
                sa.and_(
                    r.c.thread_id == mint.c.thread_id,
                    r.c.interrupt_id == mint.c.interrupt_id,
                    r.c.type == RESUMED,
                ),
            )
        )
        .where(mint.c.type == MINTED, key.between(sa.bindparam("lo"), sa.bindparam("hi")))
        .where(
            sa.exists().where(
                events.c.thread_id == r.c.thread_id,
                events.c.interrupt_id == r.c.interrupt_id,
                events.c.type == VOTED,
            )
        )
    )
    return query.where(mint.c.thread_id == sa.bindparam("t")) if by_thread else query


_APPROVERS_BETWEEN = {by_thread: _approvers_between(by_thread) for by_thread in (False, True)}


def quorum_approvers_between(
    conn: Connection, *, thread_id: str | None, lo: int, hi: int
) -> dict[tuple[str, str], tuple[str, ...]]:
    """:func:`quorum_approvers` of the interrupts of one page of the audit: those minted
    in ``lo``..``hi`` (log positions; with ``thread_id``, its versions)."""
    params = {"t": thread_id, "lo": lo, "hi": hi}
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for t, i, data in conn.execute(_APPROVERS_BETWEEN[thread_id is not None], params):
        names: Any = data.get("approvers") if isinstance(data, dict) else None
        if isinstance(names, list) and names:
            found[(str(t), str(i))] = tuple(str(n) for n in names)
    return found


def _approvers_at() -> sa.Select[Any]:
    """The answers that recorded approvers, to the mints at the positions ``p`` (one page
    of the audit: expanding), driven by those mints."""
    mint, r = events.alias("mint"), events.alias("r")
    return (
        sa.select(r.c.thread_id, r.c.interrupt_id, r.c.data)
        .select_from(
            mint.join(
                r,
                sa.and_(
                    r.c.thread_id == mint.c.thread_id,
                    r.c.interrupt_id == mint.c.interrupt_id,
                    r.c.type == RESUMED,
                ),
            )
        )
        .where(mint.c.position.in_(sa.bindparam("p", expanding=True)))
        .where(
            sa.exists().where(
                events.c.thread_id == r.c.thread_id,
                events.c.interrupt_id == r.c.interrupt_id,
                events.c.type == VOTED,
            )
        )
    )


_APPROVERS_AT = _approvers_at()


def quorum_approvers_at(conn: Connection, positions: list[int]) -> dict[tuple[str, str], tuple[str, ...]]:
    """:func:`quorum_approvers` of the interrupts minted at ``positions`` (a page of the audit)."""
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    if not positions:
        return found
    for t, i, data in conn.execute(_APPROVERS_AT, {"p": sorted(set(positions))}):
        names: Any = data.get("approvers") if isinstance(data, dict) else None
        if isinstance(names, list) and names:
            found[(str(t), str(i))] = tuple(str(n) for n in names)
    return found
