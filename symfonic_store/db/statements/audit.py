"""Audit queries: each mint beside its ending, by their audit columns (never their
data), and the events whose audit columns hold (or should hold) a value.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...audit_columns import AUDIT_COLUMNS
from ...event_types import audited_types
from ...events import ENDINGS, EXPIRED, MINTED
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


def _log_query() -> sa.Select[Any]:
    """Each mint joined to its ending (if any), read from the log itself (not the audit's
    rows: what rebuilds them), from the log position bind ``from`` on, at most ``n`` mints,
    in log order: the columns of the audit's pages (:func:`~.audit_rows.page_query`),
    then the interrupt that superseded a marker, if its expiry names one.

    Nothing is converted per row: JSON columns come as text, timestamps as the driver
    gives them (:func:`utc`)."""
    mint = events.alias("mint")
    ending = events.alias("ending")
    superseded = sa.and_(ending.c.type == EXPIRED, ending.c.audit_reason == "superseded")
    return (
        sa.select(
            mint.c.thread_id, mint.c.interrupt_id, mint.c.audit_name, _text(mint.c.audit_payload),
            _stored(sa.func.coalesce(mint.c.audit_minted_at, mint.c.occurred_at)),
            _stored(mint.c.audit_native), ending.c.type, ending.c.actor, ending.c.audit_reason,
            _text(ending.c.audit_response), _text(ending.c.audit_decisions),
            _stored(ending.c.occurred_at), mint.c.actor, ending.c.audit_authenticated_by,
            mint.c.tenant, mint.c.position, mint.c.version,
            sa.case((superseded, ending.c.data["superseded_by"].as_string())),
        )
        .select_from(
            mint.outerjoin(
                ending,
                sa.and_(
                    ending.c.thread_id == mint.c.thread_id,
                    ending.c.interrupt_id == mint.c.interrupt_id,
                    # Literals, as the partial unique index of endings says them.
                    ending.c.type.in_([sa.literal_column(f"'{t}'") for t in ENDINGS]),
                ),
            )
        )
        .where(mint.c.type == MINTED, mint.c.position >= sa.bindparam("from", type_=sa.BigInteger()))
        .order_by(mint.c.position)
        .limit(sa.bindparam("n", type_=sa.Integer()))
    )


_LOG = _log_query()


def log_audit_rows(conn: Connection, *, start: int, limit: int) -> Sequence[Sequence[Any]]:
    """Up to ``limit`` mints with their endings (columns as :func:`_log_query`'s) from the
    log position ``start`` on, read from the log."""
    return executor_for(conn).fetch(conn, _LOG, {"from": start, "n": limit})


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
