"""The event log: appending events, reading one thread's, and reading the whole log in
order, gap-safe where the backend needs it (I11: the backend's writers' horizon).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from ...audit_columns import AUDIT_COLUMNS, JSON_COPIES
from ...audit_columns import derive as derive_audit_columns
from ...events import ENDINGS, MINTED, NewEvent, StoredEvent
from ..backends import backend_of
from ..backends.base import Horizon
from ..executor import executor_for
from ..executors.base import JsonText
from ..rows import (
    EVENT_COLUMNS,
    EVENT_ROW_KEYS,
    to_event,
)
from ..schema import (
    events,
)

_INSERT_EVENT = events.insert()


def insert_events(conn: Connection, new_events: Sequence[NewEvent]) -> None:
    if not new_events:
        return
    executor = executor_for(conn)
    if not executor.takes_json_text:
        executor.write(conn, _INSERT_EVENT, event_rows(new_events, False), EVENT_ROW_KEYS)
        return
    executor.write_values(conn, _INSERT_EVENT, EVENT_ROW_KEYS, [event_values(e) for e in new_events])


_COPIED = tuple(AUDIT_COLUMNS.index(column) for column, _ in JSON_COPIES)
_COPIED_KEYS = tuple(key for _, key in JSON_COPIES)
_AUDIT_AT = EVENT_ROW_KEYS.index(AUDIT_COLUMNS[0])
"""Where the audit columns begin in a row of :func:`event_values`."""


def event_values(e: NewEvent) -> list[Any]:
    """The event table's row of ``e`` as values in ``EVENT_ROW_KEYS`` order, for executors
    that take encoded JSON: the same row as :func:`event_rows` gives them, without a dict."""
    audit = derive_audit_columns(e.type, e.data, e.occurred_at)
    values = [
        e.thread_id, e.version, e.type, e.interrupt_id, e.run_id, e.actor,
        JsonText(e.data_json) if e.data_json else e.data, e.occurred_at, e.hash, e.tenant,
        *[audit[column] for column in AUDIT_COLUMNS],
    ]
    encoded = e.encoded
    if encoded:
        for at, key in zip(_COPIED, _COPIED_KEYS, strict=True):
            text = encoded.get(key)
            if text is not None and values[_AUDIT_AT + at] is not None:
                values[_AUDIT_AT + at] = JsonText(text)
    return values


def event_rows(new_events: Sequence[NewEvent], json_text: bool) -> list[dict[str, Any]]:
    """The event table's rows of ``new_events``, audit columns included (``json_text``:
    JSON columns as the :class:`JsonText` the store encoded, where it has it)."""
    rows = []
    for e in new_events:
        row = e.row()
        row.update(derive_audit_columns(e.type, e.data, e.occurred_at))
        rows.append(row)
    if json_text:
        # The canonical text the hash covers, stored as it is: encoded once. The audit
        # columns that copy a value of the data bind the text spliced into it.
        for row, event in zip(rows, new_events, strict=True):
            if event.data_json:
                row["data"] = JsonText(event.data_json)
            if event.encoded:
                for column, key in JSON_COPIES:
                    text = event.encoded.get(key)
                    if text is not None and row[column] is not None:
                        row[column] = JsonText(text)
    return rows


# An interrupt's own events are read through ix_symfonic_events_interrupt and put in
# version order here: asked to order them, SQLite would rather walk the whole thread in
# version order (the thread's unique key) than sort the interrupt's few events.
_INTERRUPT_EVENTS = (
    sa.select(*EVENT_COLUMNS)
    .where(events.c.thread_id == sa.bindparam("t"))
    .where(events.c.interrupt_id == sa.bindparam("i"))
    # Spelled as ORs of plain binds (not IN) so the statement compiles to fixed SQL.
    .where(sa.or_(*(events.c.type == t for t in (MINTED, *ENDINGS))))
)
_WAS_MINTED = (
    sa.select(events.c.position)
    .where(events.c.thread_id == sa.bindparam("t"))
    .where(events.c.interrupt_id == sa.bindparam("i"))
    .where(events.c.type == MINTED)
)


def interrupt_events(conn: Connection, thread_id: str, interrupt_id: str) -> list[StoredEvent]:
    """The mint and the ending (if any) of one interrupt."""
    params = {"t": thread_id, "i": interrupt_id}
    found = [to_event(r) for r in executor_for(conn).fetch(conn, _INTERRUPT_EVENTS, params)]
    return sorted(found, key=by_version)


def by_version(event: StoredEvent) -> int:
    """The sort key of one thread's events read without ``ORDER BY`` (see above)."""
    return event.version


def interrupt_history_query(thread_id: str, interrupt_id: str) -> sa.Select[Any]:
    """Every event of one interrupt, through its index and in no order (sort them with
    :func:`by_version`): what the thread holds besides is not read."""
    return (
        sa.select(*EVENT_COLUMNS)
        .where(events.c.thread_id == thread_id)
        .where(events.c.interrupt_id == interrupt_id)
    )


def was_minted(conn: Connection, thread_id: str, interrupt_id: str) -> bool:
    params = {"t": thread_id, "i": interrupt_id}
    return bool(executor_for(conn).fetch(conn, _WAS_MINTED, params))


def thread_events_query(
    thread_id: str, *, until_position: int | None = None, until_time: datetime | None = None
) -> sa.Select[Any]:
    query = sa.select(*EVENT_COLUMNS).where(events.c.thread_id == thread_id)
    if until_position is not None:
        query = query.where(events.c.position <= until_position)
    if until_time is not None:
        query = query.where(events.c.occurred_at <= until_time)
    return query.order_by(events.c.version)


def events_after_query(after: int, limit: int | None) -> sa.Select[Any]:
    """Events after a position in position order: gap-safe where positions commit in
    order (SQLite's one writer); see :func:`events_after`."""
    query = sa.select(*EVENT_COLUMNS).where(events.c.position > after).order_by(events.c.position)
    if limit is not None:
        query = query.limit(limit)
    return query


def events_after(conn: Connection, after: int, limit: int | None) -> list[StoredEvent]:
    """The events a consumer whose cursor is the position ``after`` has not seen (I11).

    Where positions commit in order (SQLite) this is position order. On PostgreSQL,
    whose writers commit in parallel, a position taken early may commit late: the read
    order is ``(tx_id, position)`` (position order within each thread), and only events
    below the writers' horizon are returned (:func:`read_horizon`), so an event that
    commits later always sorts after every event already returned. The cursor stays a
    position: positions are unique, so the event at ``after`` says where in that order
    the consumer is; an ``after`` that names no event (0, or a removed one) starts after
    the nearest event below it.
    """
    backend = backend_of(conn)
    if not backend.reads_below_horizon:
        return read_page(conn, events_after_query(after, limit))
    horizon = backend.read_horizon(conn, after=after)
    return [to_event(r) for r in backend.events_below_horizon(conn, horizon, limit)]


def read_horizon(conn: Connection, *, after: int = 0) -> Horizon:
    """The writers' horizon of this schema now, and where the cursor ``after`` sits
    (see :meth:`~symfonic_store.db.backends.base.Backend.read_horizon`).

    Read in its own statement: the events must then be read by a LATER statement (a
    newer snapshot), which READ COMMITTED gives every statement.
    """
    return backend_of(conn).read_horizon(conn, after=after)


def events_behind_horizon(conn: Connection, horizon: Horizon) -> int:
    """Committed events a gap-safe reader cannot return yet (they wait for the horizon)."""
    return backend_of(conn).events_behind_horizon(conn, horizon)


def all_events_by_thread_query(thread_id: str | None = None) -> sa.Select[Any]:
    query = sa.select(*EVENT_COLUMNS)
    if thread_id is not None:
        query = query.where(events.c.thread_id == thread_id)
    return query.order_by(events.c.thread_id, events.c.version)


def stream_rows(conn: Connection, query: sa.Select[Any], *, batch: int = 1000) -> Iterator[Row[Any]]:
    """Rows of ``query`` in bounded memory (a server-side cursor on PostgreSQL)."""
    result = conn.execute(query, execution_options={"yield_per": batch})
    try:
        yield from result
    finally:
        result.close()


def stream_events(conn: Connection, query: sa.Select[Any], *, batch: int = 1000) -> Iterator[StoredEvent]:
    """Events from ``query`` in bounded memory (a server-side cursor on PostgreSQL)."""
    # Per-statement option: Connection.execution_options() would change the connection.
    result = conn.execute(query, execution_options={"yield_per": batch})
    try:
        for row in result:
            yield to_event(row)
    finally:
        result.close()


def read_page(conn: Connection, query: sa.Select[Any]) -> list[StoredEvent]:
    return [to_event(r) for r in conn.execute(query)]


def count_events(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(events)).scalar_one())
