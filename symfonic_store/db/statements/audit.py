"""Audit queries: each mint beside its ending, by their audit columns (never their
data), and the events whose audit columns hold (or should hold) a value.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...audit_columns import AUDIT_COLUMNS
from ...event_types import audited_types
from ...events import ENDINGS, MINTED, RESUME_REJECTED
from ..executor import executor_for
from ..schema import (
    events,
)

AUDIT_COLUMN_ELEMENTS = tuple(events.c[name] for name in AUDIT_COLUMNS)


def audit_columns_query(thread_id: str | None = None) -> sa.Select[Any]:
    """Every event whose audit columns hold (or should hold) a value, with its data:
    ``thread_id``, ``version``, ``position``, ``type``, ``data``, ``occurred_at``, then
    the columns of ``AUDIT_COLUMNS``, in (thread_id, version) order."""
    query = sa.select(
        events.c.thread_id,
        events.c.version,
        events.c.position,
        events.c.type,
        events.c.data,
        events.c.occurred_at,
        *AUDIT_COLUMN_ELEMENTS,
    ).where(
        sa.or_(
            events.c.type.in_(audited_types()),
            *(c.is_not(None) for c in AUDIT_COLUMN_ELEMENTS),
        )
    )
    if thread_id is not None:
        query = query.where(events.c.thread_id == thread_id)
    return query.order_by(events.c.thread_id, events.c.version)


def _text(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A JSON column as the text it holds, for the caller to decode when it is read
    (PostgreSQL's driver would decode ``json`` itself; SQLite's is text already)."""
    return sa.cast(column, sa.Text())


def _stored(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A column as the driver gives it, without the schema type's conversion: a UTC
    timestamp is SQLite's text or PostgreSQL's datetime (:func:`utc` reads either), a
    boolean SQLite's 0/1."""
    return sa.type_coerce(column, sa.String())


_fromisoformat = datetime.fromisoformat


def utc(value: Any) -> datetime | None:
    """A timestamp read through :func:`_stored` as the schema's ``UTCDateTime`` reads it:
    timezone-aware UTC (None stays None). SQLite's naive UTC text takes one
    ``fromisoformat`` call."""
    if value is None:
        return None
    moment: datetime
    if isinstance(value, str):
        try:
            return _fromisoformat(value + "+00:00")  # naive UTC text: already UTC
        except ValueError:  # text with an offset of its own (or not a timestamp: raises)
            moment = _fromisoformat(value)
    else:
        moment = value
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _tenant_clause(mint: Any, named: int, untenanted: bool) -> sa.ColumnElement[bool]:
    """The mint's tenant is one of the binds ``n0``..``n{named-1}``, or (``untenanted``)
    it has none. Plain binds (no expanding IN): the executors compile fixed SQL."""
    terms = [mint.c.tenant == sa.bindparam(f"n{i}", type_=sa.String()) for i in range(named)]
    if untenanted:
        terms.append(mint.c.tenant.is_(None))
    return sa.or_(*terms) if terms else sa.false()


def _audit_query(
    *,
    by_thread: bool,
    by_actor: bool,
    by_tenant: tuple[int, bool] | None = None,
    page_key: str | None = None,
) -> sa.Select[Any]:
    """Each mint joined to its ending (if any), in mint order: their audit columns, not
    their data (symfonic_store/audit_columns.py). Binds ``t`` / ``a`` when filtered.

    Nothing is converted per row: JSON columns come as text, timestamps as the driver
    gives them (:func:`utc`), so the audit decodes only what a caller reads."""
    # Audit queries alike in shape only (aliases, joins), deliberately spelled out: each selects its
    # own columns.
    mint = events.alias("mint")
    ending = events.alias("ending")
    query = (
        sa.select(
            mint.c.thread_id,
            mint.c.interrupt_id,
            mint.c.audit_name,
            _text(mint.c.audit_payload),
            _stored(mint.c.audit_minted_at),
            _stored(mint.c.audit_native),
            ending.c.type,
            ending.c.actor,
            ending.c.audit_reason,
            _text(ending.c.audit_response),
            _text(ending.c.audit_decisions),
            _stored(ending.c.occurred_at),
            mint.c.actor,
            ending.c.audit_authenticated_by,
            mint.c.tenant,
            mint.c.position,
            mint.c.version,
        )
        # A join alike projection.py's in shape only (other tables and keys).
        .select_from(
            mint.outerjoin(
                ending,
                sa.and_(
                    ending.c.thread_id == mint.c.thread_id,
                    ending.c.interrupt_id == mint.c.interrupt_id,
                    # The types as literals (constants of this package, not input): SQLite
                    # then reads the endings through their partial unique index, whose
                    # WHERE they match; with binds it cannot prove that and looks at every
                    # event of the interrupt.
                    ending.c.type.in_([sa.literal_column(f"'{t}'") for t in ENDINGS]),
                ),
            )
        )
        .where(mint.c.type == MINTED)
        .order_by(mint.c.position)
    )
    if by_thread:
        query = query.where(mint.c.thread_id == sa.bindparam("t"))
    if by_actor:
        query = query.where(ending.c.actor == sa.bindparam("a"))
    if by_tenant is not None:
        query = query.where(_tenant_clause(mint, *by_tenant))
    if page_key is not None:  # a page: from the bind ``from`` on, at most ``n`` mints
        key = mint.c[page_key]
        query = (
            query.where(key >= sa.bindparam("from", type_=sa.BigInteger()))
            .order_by(None)
            .order_by(key)
            .limit(sa.bindparam("n", type_=sa.Integer()))
        )
    return query


def _audit_attempts_query(
    *,
    by_thread: bool,
    by_actor: bool,
    by_tenant: tuple[int, bool] | None = None,
    range_key: str | None = None,
) -> sa.Select[Any]:
    """The refused answers (``interrupt.resume_rejected``) to the interrupts that
    :func:`_audit_query` lists, in one statement: per thread, in version order.

    Columns: ``thread_id``, ``interrupt_id``, ``actor``, ``audit_reason`` (the ``why``),
    ``audit_error``, ``occurred_at`` (as :func:`_stored` reads it), and the ``response`` as
    JSON text where the ``why`` is ``not_allowed`` (else NULL): a refused assignment of
    releases before ``assign_not_allowed`` is told by it (:func:`symfonic_store.events.refused_assignment`).
    Refusals of an id never minted on the thread belong to no record and are left out.
    """
    # Alike the query above in shape only, deliberately spelled out: it selects its own columns.
    rejected = events.alias("rejected")
    mint = events.alias("mint")
    query = (
        sa.select(
            rejected.c.thread_id,
            rejected.c.interrupt_id,
            rejected.c.actor,
            rejected.c.audit_reason,
            rejected.c.audit_error,
            _stored(rejected.c.occurred_at),
            _text(sa.case((rejected.c.audit_reason == "not_allowed", rejected.c.data["response"]))),
        )
        .select_from(
            rejected.join(
                mint,
                sa.and_(
                    mint.c.thread_id == rejected.c.thread_id,
                    mint.c.interrupt_id == rejected.c.interrupt_id,
                    mint.c.type == MINTED,
                ),
            )
        )
        # A literal, as the index of refusals (0018_audit_refusals) says it: both backends
        # then read only the refusals, through it.
        .where(rejected.c.type == sa.literal_column(f"'{RESUME_REJECTED}'"))
        .order_by(rejected.c.thread_id, rejected.c.version)
    )
    if by_thread:
        query = query.where(rejected.c.thread_id == sa.bindparam("t"))
    if by_actor:  # the records _audit_query keeps: answered or ended by ``actor``
        ending = events.alias("ending")
        query = query.where(
            sa.exists().where(
                ending.c.thread_id == rejected.c.thread_id,
                ending.c.interrupt_id == rejected.c.interrupt_id,
                sa.or_(*(ending.c.type == t for t in ENDINGS)),
                ending.c.actor == sa.bindparam("a"),
            )
        )
    if by_tenant is not None:
        query = query.where(_tenant_clause(mint, *by_tenant))
    if range_key is not None:  # a page's mints: their key from bind ``lo`` to ``hi``
        # Driven by those mints: with an ORDER BY the index of refusals could serve, SQLite
        # walks every refusal instead. The version comes last; the caller sorts on it.
        query = (
            query.where(
                mint.c[range_key].between(
                    sa.bindparam("lo", type_=sa.BigInteger()), sa.bindparam("hi", type_=sa.BigInteger())
                )
            )
            .add_columns(rejected.c.version)
            .order_by(None)
        )
    return query


# Module constants, one per filter, so the fast paths compile each once.
_AUDIT = {
    (t, a): (_audit_query(by_thread=t, by_actor=a), _audit_attempts_query(by_thread=t, by_actor=a))
    for t in (False, True)
    for a in (False, True)
}


@lru_cache(maxsize=64)
def scoped_audit_queries(
    by_thread: bool, by_actor: bool, named: int, untenanted: bool
) -> tuple[sa.Select[Any], sa.Select[Any]]:
    """The two statements of a scoped audit (:func:`_audit_query`,
    :func:`_audit_attempts_query`), built once per shape: the filters, how many tenants
    the scope names (bound as ``n0``.. in sorted order) and whether it shows the
    untenanted. The tenants themselves are parameters, so every scope of one shape runs
    the same statements, compiled once by the fast paths; the most recent shapes are
    kept (bounded: a scope's size is the caller's)."""
    n = (named, untenanted)
    return (
        _audit_query(by_thread=by_thread, by_actor=by_actor, by_tenant=n),
        _audit_attempts_query(by_thread=by_thread, by_actor=by_actor, by_tenant=n),
    )


@lru_cache(maxsize=64)
def audit_page_queries(
    by_thread: bool, by_actor: bool, named: int | None, untenanted: bool
) -> tuple[sa.Select[Any], sa.Select[Any]]:
    """The two statements of a page of the audit (SPEC §17), built once per shape
    (``named`` None: unscoped; else as :func:`scoped_audit_queries`): up to ``n`` mints
    whose key is ``from`` or after, with their endings; then the refused answers to the
    mints whose key is in ``lo``..``hi`` (the page just read).

    Keyset paging on an index: across all threads the key is the log position (the
    primary key); on one thread (``t``) its version (the unique ``(thread_id, version)``
    key: the same order within a thread). Every other filter is checked on the rows that
    walk meets."""
    key = "version" if by_thread else "position"
    by_tenant = None if named is None else (named, untenanted)
    return (
        _audit_query(by_thread=by_thread, by_actor=by_actor, by_tenant=by_tenant, page_key=key),
        _audit_attempts_query(by_thread=by_thread, by_actor=False, by_tenant=by_tenant, range_key=key),
    )


def _scope_params(
    params: dict[str, Any], scope: frozenset[str | None] | None
) -> tuple[int | None, bool]:
    """Bind ``scope``'s tenants as ``n0``.. in sorted order; the scope's shape."""
    if scope is None:
        return None, False
    named = sorted(t for t in scope if t is not None)
    params.update({f"n{i}": t for i, t in enumerate(named)})
    return len(named), None in scope


def audit_page_rows(
    conn: Connection,
    *,
    thread_id: str | None,
    actor: str | None,
    scope: frozenset[str | None] | None,
    start: int,
    limit: int,
) -> Sequence[Sequence[Any]]:
    """Up to ``limit`` rows of the audit's mints (columns as :func:`_audit_query`'s) whose
    key is ``start`` or after: the log position, or with ``thread_id`` the version."""
    params: dict[str, Any] = {"t": thread_id, "a": actor, "from": start, "n": limit}
    named, untenanted = _scope_params(params, scope)
    records, _ = audit_page_queries(thread_id is not None, actor is not None, named, untenanted)
    return executor_for(conn).fetch(conn, records, params)


def audit_page_attempts(
    conn: Connection,
    *,
    thread_id: str | None,
    scope: frozenset[str | None] | None,
    lo: int,
    hi: int,
) -> Sequence[Sequence[Any]]:
    """The refused answers (columns as :func:`_audit_attempts_query`'s, in its order) to
    the mints whose key (as :func:`audit_page_rows`') is in ``lo``..``hi``."""
    params: dict[str, Any] = {"t": thread_id, "lo": lo, "hi": hi}
    named, untenanted = _scope_params(params, scope)
    _, attempts = audit_page_queries(thread_id is not None, False, named, untenanted)
    rows = sorted(executor_for(conn).fetch(conn, attempts, params), key=_thread_version)
    return [row[:-1] for row in rows]


def _thread_version(row: Sequence[Any]) -> tuple[str, int]:
    return row[0], row[-1]


def audit_rows(
    conn: Connection,
    *,
    thread_id: str | None,
    actor: str | None,
    scope: frozenset[str | None] | None = None,
) -> tuple[Sequence[Sequence[Any]], Sequence[Sequence[Any]]]:
    """The rows of the audit: the mints with their endings, then the refused answers
    (columns as :func:`_audit_query` and :func:`_audit_attempts_query` list them);
    ``scope``: only the interrupts minted for those tenants (None among them: without one)."""
    params: dict[str, Any] = {"t": thread_id, "a": actor}
    if scope is None:
        records, attempts = _AUDIT[(thread_id is not None, actor is not None)]
    else:  # one pair per shape: how many tenants it names, and whether None is one
        named = sorted(t for t in scope if t is not None)
        params.update({f"n{i}": t for i, t in enumerate(named)})
        records, attempts = scoped_audit_queries(
            thread_id is not None, actor is not None, len(named), None in scope
        )
    executor = executor_for(conn)
    return executor.fetch(conn, records, params), executor.fetch(conn, attempts, params)


_MINT_KEY = sa.select(events.c.position, events.c.version).where(
    events.c.thread_id == sa.bindparam("t"),
    events.c.interrupt_id == sa.bindparam("i"),
    # A literal, as the unique index of mints says it: read through it.
    events.c.type == sa.literal_column(f"'{MINTED}'"),
)


def mint_key(conn: Connection, thread_id: str, interrupt_id: str) -> tuple[int, int] | None:
    """The log position and thread version of an interrupt's mint; None if never minted
    (or archived)."""
    rows = executor_for(conn).fetch(conn, _MINT_KEY, {"t": thread_id, "i": interrupt_id})
    return (int(rows[0][0]), int(rows[0][1])) if rows else None
