"""Tenants (SPEC §15): which interrupts a read may show, by the tenant of their mint.

The tenant is a column of the ``interrupt.minted`` event (``symfonic_events.tenant``,
migration ``0019_tenants``), found from any row naming ``(thread_id, interrupt_id)``
through the mint's unique index. A *scope* is the set of tenants a read may show, ``None``
in it standing for the interrupts minted without a tenant; a scope of ``None`` shows all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import MINTED
from ..schema import events

Scope = frozenset[str | None] | None
"""The tenants a read may show (``None`` in the set: no tenant); ``None``: every one."""


def scope_of(tenants: Iterable[str | None] | None) -> Scope:
    return None if tenants is None else frozenset(tenants)


def mint_tenant(thread_id: Any, interrupt_id: Any) -> sa.ScalarSelect[Any]:
    """The tenant of the interrupt's mint, as a scalar subquery on the given columns."""
    mint = events.alias("tenant_mint")
    return (
        sa.select(mint.c.tenant)
        .where(mint.c.thread_id == thread_id)
        .where(mint.c.interrupt_id == interrupt_id)
        .where(mint.c.type == MINTED)
        .scalar_subquery()
    )


def in_scope(thread_id: Any, interrupt_id: Any, scope: Scope) -> sa.ColumnElement[bool] | None:
    """A condition keeping the rows of interrupts whose mint's tenant is in ``scope``
    (None: no condition)."""
    if scope is None:
        return None
    tenant = mint_tenant(thread_id, interrupt_id)
    named = sorted(t for t in scope if t is not None)
    # Plain binds, one per tenant (no expanding IN): every executor compiles fixed SQL.
    terms: list[sa.ColumnElement[bool]] = [tenant == sa.literal(t, sa.String()) for t in named]
    if None in scope:
        terms.append(tenant.is_(None))
    return sa.or_(*terms) if terms else sa.false()


def allows(scope: Scope, tenant: str | None) -> bool:
    """Does ``scope`` show an interrupt minted for ``tenant``?"""
    return scope is None or tenant in scope


_BATCH = 200


def mint_tenants(
    conn: Connection, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], str | None]:
    """The tenant of each minted interrupt among ``keys`` (``(thread_id, interrupt_id)``),
    read through the mint's unique index; keys never minted are left out."""
    keys = list(keys)
    found: dict[tuple[str, str], str | None] = {}
    for start in range(0, len(keys), _BATCH):
        batch = keys[start:start + _BATCH]
        query = (
            sa.select(events.c.thread_id, events.c.interrupt_id, events.c.tenant)
            .where(events.c.type == MINTED)
            .where(sa.or_(*(
                sa.and_(events.c.thread_id == t, events.c.interrupt_id == i) for t, i in batch
            )))
        )
        for t, i, tenant in conn.execute(query):
            found[(t, i)] = tenant
    return found
