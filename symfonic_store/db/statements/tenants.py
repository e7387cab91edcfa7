"""Tenants (SPEC §15): which interrupts a read may show, by the tenant of their mint.

The tenant is a column of the ``interrupt.minted`` event (``symfonic_events.tenant``,
migration ``0019_tenants``), found from any row naming ``(thread_id, interrupt_id)``
through the mint's unique index, and of the projection's rows of open interrupts (since
``0024_projection_scope``), which the inbox's pages read. A *scope* is the set of tenants
a read may show, ``None`` in it standing for the interrupts minted without a tenant; a
scope of ``None`` shows all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import MINTED
from ..schema import events

Scope = frozenset[str | None] | None
"""The tenants a read may show (``None`` in the set: no tenant); ``None``: every one."""


def scope_of(tenants: Iterable[str | None] | None) -> Scope:
    return None if tenants is None else frozenset(tenants)


def in_scope(tenant: Any, scope: Scope) -> sa.ColumnElement[bool] | None:
    """A condition keeping the rows whose ``tenant`` column is in ``scope`` (None: no
    condition), beside a filter with an index of its own (a thread, a name, an assignee).

    Spelled on ``COALESCE(tenant, '')`` (a tenant is never empty), which no index serves:
    the planner then walks the other filter's index in the page's order and stops at the
    page, instead of intersecting it with every entry of the scope's tenants and sorting."""
    if scope is None:
        return None
    return _one_term(sa.func.coalesce(tenant, ""), scope, none="")


def _one_term(tenant: Any, scope: frozenset[str | None], *, none: str | None = None) -> sa.ColumnElement[bool]:
    """:func:`_terms` as one condition: the named tenants as one IN of plain binds (an OR
    per tenant builds an expression tree SQLite refuses past a thousand levels)."""
    named = sorted(t for t in scope if t is not None)
    terms: list[sa.ColumnElement[bool]] = [tenant.in_([sa.literal(t, sa.String()) for t in named])] if named else []
    if None in scope:
        terms.append(tenant.is_(None) if none is None else tenant == sa.literal(none, sa.String()))
    return sa.or_(*terms) if terms else sa.false()


def _terms(
    tenant: Any, scope: frozenset[str | None], *, none: str | None = None
) -> list[sa.ColumnElement[bool]]:
    """One condition per tenant of ``scope``; ``None`` in it: ``tenant IS NULL``, or
    ``tenant = none`` where the column expression spells no tenant so."""
    # Plain binds, one per tenant (no expanding IN): every executor compiles fixed SQL.
    terms: list[sa.ColumnElement[bool]] = [
        tenant == sa.literal(t, sa.String()) for t in sorted(t for t in scope if t is not None)
    ]
    if None in scope:
        terms.append(tenant.is_(None) if none is None else tenant == sa.literal(none, sa.String()))
    return terms


MAX_BRANCHES = 32
"""Tenants of a scope read each on its own branch; a larger scope is one walk of the
page's index with its tenants checked on the rows (SQLite takes at most 500 terms of a
compound SELECT)."""


def scoped_page(
    query: sa.Select[Any], tenant: Any, scope: Scope, *, keys: Sequence[str], limit: int | None
) -> sa.Select[Any]:
    """``query`` (ordered by its index's ``keys``, cut at ``limit``) kept to ``scope``, one
    keyset branch per tenant of it: each branch reads the tenant's own entries of an index
    led by ``tenant`` (a tenant equal to a bind, or NULL), from the cursor on and at most
    ``limit`` of them; the branches' rows (``UNION ALL``) are merged in ``keys`` order and
    cut again. A page of a scope of k tenants reads at most k pages of index entries,
    however many interrupts the other tenants hold (SPEC §17)."""
    if scope is None:
        return query
    terms = _terms(tenant, scope)
    if not terms:
        return query.where(sa.false())
    # Each branch in the index's own order, its tenant first: the same rows in the same
    # order, and PostgreSQL then walks the index in order for ``tenant IS NULL`` too (its
    # planner takes an equality, not IS NULL, as fixing the leading column).
    if len(terms) > MAX_BRANCHES:  # one walk, the tenants checked on the rows it meets
        return query.where(_one_term(tenant, scope))
    order = (tenant, *(query.selected_columns[k] for k in keys))
    branches = [query.where(t).order_by(None).order_by(*order) for t in terms]
    if len(branches) == 1:
        return branches[0]
    merged = sa.union_all(*(sa.select(b.subquery()) for b in branches)).subquery("scoped")
    page = sa.select(merged).order_by(*(merged.c[k] for k in keys))
    return page if limit is None else page.limit(limit)


def allows(scope: Scope, tenant: str | None) -> bool:
    """Does ``scope`` show an interrupt minted for ``tenant``?"""
    return scope is None or tenant in scope


_BATCH = 200


def mint_tenants(
    conn: Connection, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], str | None]:
    """The tenant of each minted interrupt among ``keys`` (``(thread_id, interrupt_id)``),
    read through the mint's unique index; keys never minted are left out."""
    return mint_values(conn, keys, events.c.tenant)


def mint_values(
    conn: Connection, keys: Iterable[tuple[str, str]], column: sa.Column[Any]
) -> dict[tuple[str, str], Any]:
    """``column`` of the mint of each interrupt among ``keys`` (``(thread_id,
    interrupt_id)``), read through the mint's unique index, in batches of plain binds;
    keys never minted are left out."""
    keys = list(keys)
    found: dict[tuple[str, str], Any] = {}
    for start in range(0, len(keys), _BATCH):
        batch = keys[start:start + _BATCH]
        query = (
            sa.select(events.c.thread_id, events.c.interrupt_id, column)
            .where(events.c.type == MINTED)
            .where(sa.or_(*(
                sa.and_(events.c.thread_id == t, events.c.interrupt_id == i) for t, i in batch
            )))
        )
        for t, i, value in conn.execute(query):
            found[(t, i)] = value
    return found
