"""The audit's pages (SPEC §17) through its rows (``symfonic_audit_rows``, one per
interrupt, kept by the triggers of ``0025_audit_rows``): each filter an index walked in
the audit's order, ``(minted_at, position)`` from a cursor's place to the page's end.

A page is one statement: the keys of at most ``n`` rows per walk (one walk per value of
the filter that drives it: the thread, the actor, the decision word and ``*``, each tenant
of a scope, else every row), joined to their mints and endings for the audit columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import ENDINGS, MINTED, RESUME_REJECTED
from ..executor import executor_for
from ..schema import UTCDateTime, audit_rows, events
from .audit import utc

MIXED = "*"
"""The decision of a row whose records report different words, or whose word the audit
derives when it reads the answer: a ``decision=`` page reads these rows too, and keeps
the records that match."""

_MINTED: sa.ColumnElement[Any] = sa.literal_column(f"'{MINTED}'")


@dataclass(frozen=True, slots=True)
class PageShape:
    """What a page is filtered by (the values are binds): ``named`` tenants of a scope
    (``n0``..) and ``untenanted`` (None in it), or ``named`` None: unscoped."""

    thread: bool
    actor: bool
    decision: bool
    named: int | None
    untenanted: bool
    since: bool
    until: bool
    keyed: bool
    inclusive: bool = False


def _text(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    return sa.cast(column, sa.Text())


def _stored(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    return sa.type_coerce(column, sa.String())


def _tenant_clause(column: Any, shape: PageShape) -> sa.ColumnElement[bool]:
    assert shape.named is not None
    # One IN of plain binds (no expanding IN: fixed SQL), not an OR per tenant, whose
    # expression tree SQLite refuses past a thousand levels.
    terms = [column.in_([sa.bindparam(f"n{i}", type_=sa.String()) for i in range(shape.named)])] if shape.named else []
    if shape.untenanted:
        terms.append(column.is_(None))
    return sa.or_(*terms) if terms else sa.false()


def _sees_superseder(shape: PageShape) -> sa.ColumnElement[bool]:
    """The scope may see the interrupt that superseded a row's marker (or none did):
    else the expiry's actor, that interrupt's requester, is hidden (SPEC §15)."""
    superseder = events.alias("superseder")
    return sa.or_(
        audit_rows.c.superseded_by.is_(None),
        sa.exists().where(
            superseder.c.thread_id == audit_rows.c.thread_id,
            superseder.c.interrupt_id == audit_rows.c.superseded_by,
            superseder.c.type == _MINTED,
            _tenant_clause(superseder.c.tenant, shape),
        ),
    )


MAX_WALKS = 32
"""Tenants of a scope walked each on its own index; a larger scope is one walk, its
tenants checked on the rows it meets (SQLite takes at most 500 terms of a compound SELECT)."""


def _walks_tenants(shape: PageShape) -> bool:
    """Is the scope walked one tenant at a time (a walk per tenant, at most MAX_WALKS)?"""
    return shape.named is not None and shape.named + shape.untenanted <= MAX_WALKS


def _walks(shape: PageShape) -> list[sa.ColumnElement[bool]]:
    """One condition per index walk: the filter that drives the page, by precedence (the
    thread; the actor, per tenant of a scope; the decision; the tenants; else none)."""
    rows = audit_rows.c
    if shape.thread:
        return [rows.thread_id == sa.bindparam("t")]
    if shape.actor and shape.named is not None and _walks_tenants(shape):  # a walk per tenant
        actor = rows.actor == sa.bindparam("a")
        walks = [sa.and_(rows.tenant == sa.bindparam(f"n{i}", type_=sa.String()), actor)
                 for i in range(shape.named)]
        return walks + [sa.and_(rows.tenant.is_(None), actor)] if shape.untenanted else walks
    if shape.actor:
        return [rows.actor == sa.bindparam("a")]
    if shape.decision:
        return [rows.decision == sa.bindparam("d"), rows.decision == sa.literal_column(f"'{MIXED}'")]
    if shape.named is not None and _walks_tenants(shape):
        walks = [rows.tenant == sa.bindparam(f"n{i}", type_=sa.String()) for i in range(shape.named)]
        return walks + [rows.tenant.is_(None)] if shape.untenanted else walks
    return [sa.true()]


def _filters(shape: PageShape) -> list[sa.ColumnElement[bool]]:
    """The filters checked on the rows a walk meets (the driving one is the walk)."""
    rows = audit_rows.c
    found: list[sa.ColumnElement[bool]] = []
    if shape.actor:
        if shape.thread:
            found.append(rows.actor == sa.bindparam("a"))
        if shape.named is not None:  # a name the scope may not see matches nothing
            found.append(_sees_superseder(shape))
    if shape.decision and (shape.thread or shape.actor):
        found.append(rows.decision.in_([sa.bindparam("d"), sa.literal_column(f"'{MIXED}'")]))
    tenant_walks = not shape.thread and (shape.actor or not shape.decision) and _walks_tenants(shape)
    if shape.named is not None and not tenant_walks:
        found.append(_tenant_clause(rows.tenant, shape))
    if shape.since:
        found.append(rows.minted_at >= sa.bindparam("since", type_=UTCDateTime()))
    if shape.until:
        found.append(rows.minted_at <= sa.bindparam("until", type_=UTCDateTime()))
    if shape.keyed:  # after the key (from it on: the rest of a batch cut mid-way)
        key = sa.tuple_(rows.minted_at, rows.position)
        bound = sa.tuple_(sa.bindparam("from_at", type_=UTCDateTime()), sa.bindparam("from", type_=sa.BigInteger()))
        found.append(key >= bound if shape.inclusive else key > bound)
    return found


@lru_cache(maxsize=128)
def page_query(shape: PageShape) -> sa.Select[Any] | None:
    """The page's statement (None: the scope sees nothing): the columns of the audit's
    records -- ``thread_id``, ``interrupt_id``, the mint's name, payload, the row's
    ``minted_at`` (as stored: the page key with the position), the mint's native flag, the
    ending's type, actor, reason, response, decisions and time, the requester, how the
    actor was established, the tenant, the mint's position and version -- in the audit's order.
    Binds ``n`` (the page's size) and those of the shape."""
    walks = _walks(shape)
    if not walks:
        return None
    rows = audit_rows.c
    filters = _filters(shape)
    # The superseding interrupt only for a scope: else the walk reads its index alone.
    columns = (rows.position, rows.minted_at, *((rows.superseded_by,) if shape.named is not None else ()))
    members = [
        sa.select(*columns)
        .where(walk, *filters)
        .order_by(rows.minted_at, rows.position)
        .limit(sa.bindparam("n", type_=sa.Integer()))
        .subquery()
        for walk in walks
    ]
    keys = (
        members[0] if len(members) == 1
        else sa.union_all(*(sa.select(m) for m in members)).subquery()
    ).alias("keys")
    mint, ending = events.alias("mint"), events.alias("ending")
    actor: sa.ColumnElement[Any] = ending.c.actor
    if shape.named is not None:
        superseder = events.alias("superseder")
        sees = sa.or_(
            keys.c.superseded_by.is_(None),
            sa.exists().where(
                superseder.c.thread_id == mint.c.thread_id,
                superseder.c.interrupt_id == keys.c.superseded_by,
                superseder.c.type == _MINTED,
                _tenant_clause(superseder.c.tenant, shape),
            ),
        )
        actor = sa.case((sees, ending.c.actor), else_=sa.null())
    return (
        sa.select(
            mint.c.thread_id, mint.c.interrupt_id, mint.c.audit_name, _text(mint.c.audit_payload),
            _stored(keys.c.minted_at), _stored(mint.c.audit_native), ending.c.type, actor,
            ending.c.audit_reason, _text(ending.c.audit_response), _text(ending.c.audit_decisions),
            _stored(ending.c.occurred_at), mint.c.actor, ending.c.audit_authenticated_by, mint.c.tenant,
            mint.c.position, mint.c.version,
        )
        .select_from(
            keys.join(mint, mint.c.position == keys.c.position).outerjoin(
                ending,
                sa.and_(
                    ending.c.thread_id == mint.c.thread_id,
                    ending.c.interrupt_id == mint.c.interrupt_id,
                    # Literals, as the partial unique index of endings says them.
                    ending.c.type.in_([sa.literal_column(f"'{t}'") for t in ENDINGS]),
                ),
            )
        )
        .order_by(keys.c.minted_at, keys.c.position)
        .limit(sa.bindparam("n", type_=sa.Integer()))
    )


def page_rows(
    conn: Connection,
    *,
    thread_id: str | None,
    actor: str | None,
    decision: str | None,
    scope: frozenset[str | None] | None,
    since: datetime | None,
    until: datetime | None,
    start: tuple[Any, int] | None,
    inclusive: bool = False,
    limit: int,
) -> Sequence[Sequence[Any]]:
    """Up to ``limit`` rows (columns as :func:`page_query` lists them) after the row whose
    key (``minted_at``, position) is ``start`` (``inclusive``: from it on), that
    the filters keep (``decision``: the rows of that word and the rows of :data:`MIXED`)."""
    params: dict[str, Any] = {"t": thread_id, "a": actor, "d": decision, "n": limit}
    named = None
    if scope is not None:
        names = sorted(t for t in scope if t is not None)
        params.update({f"n{i}": t for i, t in enumerate(names)})
        named = len(names)
    if since is not None:
        params["since"] = since
    if until is not None:
        params["until"] = until
    if start is not None:
        params["from_at"], params["from"] = start
    shape = PageShape(
        thread_id is not None, actor is not None, decision is not None, named,
        scope is not None and None in scope, since is not None, until is not None, start is not None,
        start is not None and inclusive,
    )
    query = page_query(shape)
    return [] if query is None else executor_for(conn).fetch(conn, query, params)


_ROW_KEY = sa.select(_stored(audit_rows.c.minted_at)).where(audit_rows.c.position == sa.bindparam("p"))


def row_key(conn: Connection, position: int) -> tuple[Any, int] | None:
    """The page key of the row of the mint at ``position``: (its ``minted_at``, it)."""
    rows = executor_for(conn).fetch(conn, _ROW_KEY, {"p": position})
    return (utc(rows[0][0]), position) if rows else None


def _attempts_query() -> sa.Select[Any]:
    rejected, mint = events.alias("rejected"), events.alias("mint")
    return (
        sa.select(
            rejected.c.thread_id, rejected.c.interrupt_id, rejected.c.actor, rejected.c.audit_reason,
            rejected.c.audit_error, _stored(rejected.c.occurred_at),
            _text(sa.case((rejected.c.audit_reason == "not_allowed", rejected.c.data["response"]))),
        )
        .select_from(
            mint.join(
                rejected,
                sa.and_(
                    rejected.c.thread_id == mint.c.thread_id,
                    rejected.c.interrupt_id == mint.c.interrupt_id,
                    # A literal, as the index of refusals (0018_audit_refusals) says it.
                    rejected.c.type == sa.literal_column(f"'{RESUME_REJECTED}'"),
                ),
            )
        )
        .where(mint.c.position.in_(sa.bindparam("p", expanding=True)))
        .order_by(rejected.c.thread_id, rejected.c.version)
    )


PAGE_ATTEMPTS = _attempts_query()
"""The refused answers to the mints at the positions ``p`` (expanding): driven by those
mints (their primary key), each one's refusals read through an index of its events."""


def page_attempts(conn: Connection, positions: Iterable[int]) -> Sequence[Sequence[Any]]:
    """The refused answers (``interrupt.resume_rejected``) to the mints at ``positions``
    (a page's), per thread in version order: ``thread_id``, ``interrupt_id``, ``actor``,
    the ``why``, the error, the time (as stored), and the response as JSON text where the
    ``why`` is ``not_allowed`` (else NULL)."""
    wanted = sorted(set(positions))
    return conn.execute(PAGE_ATTEMPTS, {"p": wanted}).all() if wanted else []


def delete_all(conn: Connection) -> None:
    conn.execute(sa.delete(audit_rows))


def insert(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(sa.insert(audit_rows), rows)
