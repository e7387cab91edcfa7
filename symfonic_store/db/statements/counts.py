"""The counts ``/metrics`` reads (SPEC §17; tables in :mod:`symfonic_store.db.count_tables`):
the open interrupts by source and tenant, the oldest open one, and the log's counters
with the position they reach. Every read here touches a handful of rows, however many
interrupts are open and however long the log is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import MINTED
from ..backends import backend_of
from ..count_tables import FOLD_ROW
from ..schema import (
    events,
    metric_counts,
    metric_fold,
    open_count_deltas,
    open_counts,
    open_interrupts,
    threads,
)
from .tenants import Scope, mint_tenants, mint_values

MARKER = "marker"
LANGGRAPH = "langgraph"
COMPACTED = 10_000
"""The most deltas one compaction moves into the totals (the rest wait for the next)."""

OpenKey = tuple[str, str | None]
"""``(source, tenant)``."""


# --- the fold row: the lock of scrapers, and where the counters reach --------------------


def fold_position(conn: Connection, *, lock: bool) -> int:
    """The log position the counters reach; ``lock``: hold the fold row until the
    transaction ends (PostgreSQL; SQLite's write transaction holds the database), so
    scrapers fold and compact one at a time. Writers never touch this row."""
    query = sa.select(metric_fold.c.position).where(metric_fold.c.id == FOLD_ROW)
    found = conn.execute(query.with_for_update() if lock else query).scalar()
    if found is None:  # a table emptied behind the store's back: start over, from 0
        conn.execute(metric_fold.insert().values(id=FOLD_ROW, position=0))
        return 0
    return int(found)


def set_fold_position(conn: Connection, position: int) -> None:
    conn.execute(metric_fold.update().where(metric_fold.c.id == FOLD_ROW).values(position=position))


# --- the counters ------------------------------------------------------------------------


def counter_values(conn: Connection) -> list[tuple[str, str, float]]:
    """Every counter as ``(metric, label, value)`` (a few dozen rows)."""
    query = sa.select(metric_counts.c.metric, metric_counts.c.label, metric_counts.c.value)
    return [(m, label, float(v)) for m, label, v in conn.execute(query)]


def add_to_counters(conn: Connection, added: Mapping[tuple[str, str], float]) -> None:
    """Add to counters (created at 0). The caller holds the fold row's lock."""
    for (metric, label), value in sorted(added.items()):
        key = (metric_counts.c.metric == metric) & (metric_counts.c.label == label)
        done = conn.execute(
            metric_counts.update().where(key).values(value=metric_counts.c.value + value)
        )
        if done.rowcount == 0:
            conn.execute(metric_counts.insert().values(metric=metric, label=label, value=value))


def mint_times(conn: Connection, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], datetime]:
    """When each interrupt of ``keys`` (``(thread_id, interrupt_id)``) was minted, read
    through the mint's unique index; keys with no mint in the log are left out."""
    return mint_values(conn, sorted(set(keys)), events.c.occurred_at)


# --- the open interrupts -----------------------------------------------------------------


def _tenant_in(column: Any, scope: frozenset[str | None]) -> sa.ColumnElement[bool]:
    named = sorted(t for t in scope if t is not None)
    terms: list[sa.ColumnElement[bool]] = [column == sa.literal(t, sa.String()) for t in named]
    if None in scope:
        terms.append(column.is_(None))
    return sa.or_(*terms) if terms else sa.false()


def delta_tenant() -> sa.ScalarSelect[Any]:
    """The tenant of a delta row's interrupt: its mint's (one lookup by the mint's index)."""
    mint = events.alias("tenant_mint")
    return (
        sa.select(mint.c.tenant)
        .where(mint.c.thread_id == open_count_deltas.c.thread_id)
        .where(mint.c.interrupt_id == open_count_deltas.c.interrupt_id)
        .where(mint.c.type == MINTED)
        .scalar_subquery()
    )


def open_by_source(conn: Connection, scope: Scope) -> dict[str, int]:
    """The open interrupts of ``scope``'s tenants (None: all) by source: the compacted
    totals plus the deltas after them, in one statement (one snapshot: a compaction that
    commits meanwhile is seen whole or not at all)."""
    if scope is None:
        union = sa.union_all(
            sa.select(open_counts.c.source, open_counts.c.total.label("n")),
            sa.select(open_count_deltas.c.source, open_count_deltas.c.delta),
        ).subquery()
        query = sa.select(union.c.source, sa.func.sum(union.c.n)).group_by(union.c.source)
    else:
        union = sa.union_all(
            sa.select(open_counts.c.source, open_counts.c.tenant, open_counts.c.total.label("n")),
            sa.select(open_count_deltas.c.source, delta_tenant(), open_count_deltas.c.delta),
        ).subquery()
        query = (
            sa.select(union.c.source, sa.func.sum(union.c.n))
            .where(_tenant_in(union.c.tenant, scope))
            .group_by(union.c.source)
        )
    return {source: int(n or 0) for source, n in conn.execute(query)}


def oldest_open(conn: Connection, scope: Scope) -> float | None:
    """The epoch seconds of the oldest open interrupt of ``scope`` (None: none is open):
    a pending marker's ``pending_since``, a LangGraph interrupt's ``minted_at``, each the
    first entry of its index -- under a scope, the first of each tenant's entries in the
    projection's tenant indexes (two index lookups per tenant of the scope)."""
    pending = threads.c.pending_interrupt_id.isnot(None)
    marker = (
        sa.select(threads.c.pending_since).where(pending)
        .order_by(threads.c.pending_since).limit(1)
    )
    native = sa.select(open_interrupts.c.minted_at).order_by(open_interrupts.c.minted_at).limit(1)
    queries = [marker, native]
    if scope is not None:
        queries = []
        for tenant in sorted(scope, key=lambda t: (t is not None, t or "")):
            queries += [
                marker.where(_tenant_in(threads.c.tenant, frozenset({tenant})))
                .order_by(None).order_by(threads.c.tenant, threads.c.pending_since),
                native.where(_tenant_in(open_interrupts.c.tenant, frozenset({tenant})))
                .order_by(None).order_by(open_interrupts.c.tenant, open_interrupts.c.minted_at),
            ]
    found = [conn.execute(q).scalar() for q in queries]
    return min((float(f) for f in found if f is not None), default=None)


def compact(conn: Connection, *, limit: int = COMPACTED) -> int:
    """Move up to ``limit`` delta rows into the totals; returns how many moved.

    The deltas are deleted and returned by one statement, so a delta that commits
    meanwhile (a lower id committing late on PostgreSQL) stays for the next compaction,
    and two compactions never both take one. The caller holds the fold row's lock: the
    totals have one writer at a time.
    """
    oldest = sa.select(open_count_deltas.c.id).order_by(open_count_deltas.c.id).limit(limit)
    taken = conn.execute(
        open_count_deltas.delete()
        .where(open_count_deltas.c.id.in_(oldest.scalar_subquery()))
        .returning(
            open_count_deltas.c.source, open_count_deltas.c.thread_id,
            open_count_deltas.c.interrupt_id, open_count_deltas.c.delta,
        )
    ).all()
    net: Counter[tuple[str, str, str]] = Counter()
    for source, thread_id, interrupt_id, delta in taken:
        net[(source, thread_id, interrupt_id)] += delta
    changed = {k: n for k, n in net.items() if n}
    tenants = mint_tenants(conn, {(t, i) for _, t, i in changed})
    by_key: Counter[OpenKey] = Counter()
    for (source, t, i), n in changed.items():
        by_key[(source, tenants.get((t, i)))] += n
    for (source, tenant), n in sorted(by_key.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if not n:
            continue
        key = (open_counts.c.source == source) & open_counts.c.tenant.is_not_distinct_from(tenant)
        done = conn.execute(open_counts.update().where(key).values(total=open_counts.c.total + n))
        if done.rowcount == 0:
            conn.execute(open_counts.insert().values(source=source, tenant=tenant, total=n))
    return len(taken)


def has_deltas(conn: Connection) -> bool:
    return conn.execute(sa.select(open_count_deltas.c.id).limit(1)).first() is not None


def pause_deltas(conn: Connection) -> None:
    """Write no deltas until the transaction ends (a rebuild, before it rewrites the
    projection; :func:`recount_open` then counts it)."""
    backend_of(conn).pause_open_count_deltas(conn)


def recount_open(conn: Connection) -> None:
    """Set the totals to what the projection holds and drop every delta (after a
    rebuild of the projection, in its transaction)."""
    conn.execute(open_count_deltas.delete())
    conn.execute(open_counts.delete())
    # The projection's rows carry their mint's tenant (migration 0024).
    marker = sa.select(threads.c.tenant).where(threads.c.pending_interrupt_id.isnot(None))
    native = sa.select(open_interrupts.c.tenant)
    for source, tenants in ((MARKER, marker.subquery()), (LANGGRAPH, native.subquery())):
        conn.execute(open_counts.insert().from_select(
            ["source", "tenant", "total"],
            sa.select(sa.literal(source, sa.String()), tenants.c.tenant, sa.func.count())
            .group_by(tenants.c.tenant),
        ))
