"""Every SQL statement the store runs, in one place, as SQLAlchemy Core.

Both stores execute these through a synchronous ``Connection`` (the asyncio store via
``AsyncConnection.run_sync``), so there is one copy of each statement and of the logic
around it. All values are bound parameters. The statements are backend-blind: the hot
ones run through the connection's :class:`~symfonic_store.db.executor.Executor`, which
alone knows the backend.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from ..audit_columns import AUDIT_COLUMNS, JSON_COPIES
from ..audit_columns import derive as derive_audit_columns
from ..event_types import audited_types, run_id_types
from ..events import ENDINGS, MINTED, RESUME_REJECTED, NewEvent, StoredEvent
from ..native import NATIVE_SOURCE
from ..projection import ThreadState
from ..protocol import MARKER_KEYS
from .executor import WRITERS_LOCK_KEY, Executor, JsonText, executor_for
from .schema import (
    archived_read_keys,
    archived_threads,
    archives,
    checkpoint_buckets,
    checkpoint_heads,
    checkpoints,
    claims,
    events,
    open_interrupts,
    threads,
    wakeups,
)

EVENT_COLUMNS = (
    events.c.position,
    events.c.thread_id,
    events.c.version,
    events.c.type,
    events.c.interrupt_id,
    events.c.run_id,
    events.c.actor,
    events.c.data,
    events.c.occurred_at,
    events.c.hash,
)

THREAD_COLUMNS = (
    threads.c.thread_id,
    threads.c.version,
    threads.c.last_hash,
    threads.c.run_id,
    threads.c.pending,
    threads.c.pending_since,
)


THREAD_ROW_KEYS = (
    "thread_id", "version", "last_hash", "run_id", "pending", "pending_interrupt_id",
    "pending_run_id", "pending_minted_at", "pending_since",
)
"""The keys of :func:`thread_row`, the columns the projection INSERT binds."""
EVENT_ROW_KEYS = (
    "thread_id", "version", "type", "interrupt_id", "run_id", "actor", "data",
    "occurred_at", "hash", *AUDIT_COLUMNS,
)
"""The keys of ``NewEvent.row()`` and its audit columns: the columns the event INSERT binds."""


def to_event(row: Row[Any] | Sequence[Any]) -> StoredEvent:
    return StoredEvent(*row)


def to_thread(row: Row[Any] | Sequence[Any]) -> ThreadState:
    thread_id, version, last_hash, run_id, pending, pending_since = tuple(row)
    if pending is not None and list(pending) != _MARKER_ORDER:
        # Stored as its mint's canonical JSON (sorted keys): handed out in the seed's order.
        ordered = {key: pending[key] for key in MARKER_KEYS if key in pending}
        pending = {**ordered, **pending}
    return ThreadState(thread_id, version, last_hash, run_id, pending, pending_since)


_MARKER_ORDER = list(MARKER_KEYS)


def thread_row(state: ThreadState, pending_json: str | None = None) -> dict[str, Any]:
    """The projection row of a thread (its columns derived from the folded state).

    ``pending_json``: the pending marker already encoded (the JSON of its mint), bound as
    it is where the executor takes encoded JSON.
    """
    pending: Any = state.pending
    if pending is not None and pending_json is not None:
        pending = JsonText(pending_json)
    return {
        "thread_id": state.thread_id,
        "version": state.version,
        "last_hash": state.last_hash,
        "run_id": state.run_id,
        "pending": pending,
        "pending_interrupt_id": state.pending_interrupt_id,
        "pending_run_id": state.pending_run_id,
        "pending_minted_at": state.pending_minted_at,
        "pending_since": state.pending_since,
    }


# --- the thread projection ----------------------------------------------------------


# The statements of the append path are built once, with bound parameters, so each
# call reuses SQLAlchemy's compiled form instead of building and hashing a new query.
_LOAD_THREAD = sa.select(*THREAD_COLUMNS).where(threads.c.thread_id == sa.bindparam("t"))
# FOR UPDATE compiles to nothing on SQLite, whose writers hold the database lock.
_LOAD_THREAD_FOR_UPDATE = _LOAD_THREAD.with_for_update()


def load_thread(conn: Connection, thread_id: str, *, for_update: bool) -> ThreadState | None:
    query = _LOAD_THREAD_FOR_UPDATE if for_update else _LOAD_THREAD
    rows = executor_for(conn).fetch(conn, query, {"t": thread_id})
    return to_thread(rows[0]) if rows else None


_MINTED_ON_THREAD = (
    sa.select(events.c.position)
    .where(events.c.thread_id == sa.bindparam("t"))
    .where(events.c.interrupt_id == sa.bindparam("i"))
    .where(events.c.type == MINTED)
    .exists()
)
_LOAD_THREAD_PROBING_MINT = (
    sa.select(*THREAD_COLUMNS, _MINTED_ON_THREAD)
    .where(threads.c.thread_id == sa.bindparam("t"))
    .with_for_update(of=threads)
)


def load_thread_probing_mint(
    conn: Connection, thread_id: str, interrupt_id: str
) -> tuple[ThreadState | None, bool]:
    """The thread's row locked for update, and whether ``interrupt_id`` was minted on it.

    One statement. On PostgreSQL the probe reads the statement's snapshot, which may be
    older than the row lock it waited for: a mint committed meanwhile is then missed,
    and the mint appended again loses on ``uq_symfonic_events_one_mint`` and is retried,
    so the answer the caller acts on is always right.
    """
    rows = executor_for(conn).fetch(
        conn, _LOAD_THREAD_PROBING_MINT, {"t": thread_id, "i": interrupt_id}
    )
    if not rows:
        return None, False
    return to_thread(rows[0][:-1]), bool(rows[0][-1])


_INSERT_THREAD = threads.insert()
_UPDATE_THREAD = (
    threads.update()
    .where(threads.c.thread_id == sa.bindparam("b_thread_id"))
    .values(
        version=sa.bindparam("version"),
        last_hash=sa.bindparam("last_hash"),
        run_id=sa.bindparam("run_id"),
        pending=sa.bindparam("pending"),
        pending_interrupt_id=sa.bindparam("pending_interrupt_id"),
        pending_run_id=sa.bindparam("pending_run_id"),
        pending_minted_at=sa.bindparam("pending_minted_at"),
        pending_since=sa.bindparam("pending_since"),
    )
)


def _thread_rows(
    executor: Executor, states: Sequence[ThreadState], pending_json: Sequence[str | None] | None
) -> list[dict[str, Any]]:
    if pending_json is None or not executor.takes_json_text:
        return [thread_row(s) for s in states]
    return [thread_row(s, j) for s, j in zip(states, pending_json, strict=True)]


def insert_threads(
    conn: Connection,
    states: Sequence[ThreadState],
    pending_json: Sequence[str | None] | None = None,
) -> None:
    """Insert projection rows (``pending_json``: each pending marker's JSON, when known)."""
    executor = executor_for(conn)
    executor.write(conn, _INSERT_THREAD, _thread_rows(executor, states, pending_json), THREAD_ROW_KEYS)


def update_threads(
    conn: Connection,
    states: Sequence[ThreadState],
    pending_json: Sequence[str | None] | None = None,
) -> None:
    """Update projection rows (``pending_json`` as for :func:`insert_threads`)."""
    executor = executor_for(conn)
    rows = _thread_rows(executor, states, pending_json)
    for row in rows:
        row["b_thread_id"] = row.pop("thread_id")
    executor.write(conn, _UPDATE_THREAD, rows)


def delete_all_threads(conn: Connection) -> None:
    conn.execute(threads.delete())


def pending_threads(
    conn: Connection, *, since_before: float | None, limit: int | None
) -> list[ThreadState]:
    query = (
        sa.select(*THREAD_COLUMNS)
        .where(threads.c.pending_interrupt_id.is_not(None))
        .order_by(threads.c.pending_since, threads.c.thread_id)
    )
    if since_before is not None:
        query = query.where(threads.c.pending_since < since_before)
    if limit is not None:
        query = query.limit(limit)
    return [to_thread(r) for r in conn.execute(query)]


def stale_candidates(
    conn: Connection,
    *,
    ttl_cutoff: float | None,
    after_thread: str,
    limit: int,
    lock: bool,
    thread_ids: Sequence[str] | None = None,
) -> list[ThreadState]:
    """Pending threads that may be stale: a superset the Python predicate then decides.

    ``ttl_cutoff`` is a little later than ``now - ttl`` so that floating-point rounding
    can only add candidates, never lose one. Keyset-paged on ``thread_id``. With
    ``lock`` on PostgreSQL the rows are locked ``FOR UPDATE SKIP LOCKED``, so concurrent
    sweeps split the work instead of waiting on each other. ``thread_ids`` limits the
    candidates to those threads (an expanding bound parameter: one bind per id).
    """
    run_moved_on = sa.and_(
        threads.c.pending_run_id.is_not(None),
        sa.or_(threads.c.run_id.is_(None), threads.c.run_id != threads.c.pending_run_id),
    )
    stale = run_moved_on
    if ttl_cutoff is not None:
        stale = sa.or_(run_moved_on, threads.c.pending_minted_at < ttl_cutoff)
    query = (
        sa.select(*THREAD_COLUMNS)
        .where(threads.c.pending_interrupt_id.is_not(None))
        .where(threads.c.thread_id > after_thread)
        .where(stale)
        .order_by(threads.c.thread_id)
        .limit(limit)
    )
    if thread_ids is not None:
        query = query.where(threads.c.thread_id.in_(thread_ids))
    if lock:  # compiles to nothing on SQLite, whose writers hold the database lock
        query = query.with_for_update(skip_locked=True)
    return [to_thread(r) for r in conn.execute(query)]


# --- owed wake-ups ------------------------------------------------------------------

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


# --- the event log ------------------------------------------------------------------

_INSERT_EVENT = events.insert()


def insert_events(conn: Connection, new_events: Sequence[NewEvent]) -> None:
    if not new_events:
        return
    executor = executor_for(conn)
    rows = []
    for e in new_events:
        row = e.row()
        row.update(derive_audit_columns(e.type, e.data, e.occurred_at))
        rows.append(row)
    if executor.takes_json_text:
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
    executor.write(conn, _INSERT_EVENT, rows, EVENT_ROW_KEYS)


_INTERRUPT_EVENTS = (
    sa.select(*EVENT_COLUMNS)
    .where(events.c.thread_id == sa.bindparam("t"))
    .where(events.c.interrupt_id == sa.bindparam("i"))
    # Spelled as ORs of plain binds (not IN) so the statement compiles to fixed SQL.
    .where(sa.or_(*(events.c.type == t for t in (MINTED, *ENDINGS))))
    .order_by(events.c.version)
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
    return [to_event(r) for r in executor_for(conn).fetch(conn, _INTERRUPT_EVENTS, params)]


def was_minted(conn: Connection, thread_id: str, interrupt_id: str) -> bool:
    params = {"t": thread_id, "i": interrupt_id}
    return bool(executor_for(conn).fetch(conn, _WAS_MINTED, params))


def waits_at(conn: Connection, thread_id: str, checkpoint_id: str, breakpoint_id: str) -> bool:
    """Is an open LangGraph interrupt of the thread from that checkpoint, or was its
    breakpoint (``breakpoint_id``) minted? One round trip: asked on every checkpoint."""
    params = {"t": thread_id, "c": checkpoint_id, "i": breakpoint_id}
    return bool(executor_for(conn).fetch(conn, _WAITS_AT, params)[0][0])


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
    executor = executor_for(conn)
    if not executor.reads_below_horizon:
        return read_page(conn, events_after_query(after, limit))
    horizon = read_horizon(conn, after=after)
    params = {"ctx": horizon.cursor[0], "cpos": horizon.cursor[1], "h": horizon.below, "n": limit}
    return [to_event(r) for r in executor.fetch(conn, _EVENTS_BELOW_HORIZON, params)]


# --- the writers' horizon on PostgreSQL (I11, SPEC §11) ------------------------------
#
# Every write transaction takes the writers' lock (executor.WRITERS_LOCK_KEY) in SHARE
# mode at its BEGIN, before it has a transaction id, and every event's tx_id is at least
# its transaction's id (the trigger of schema.POSTGRES_TX_ID_TRIGGER). One statement
# reads the lock's holders and their transaction ids (pg_stat_activity.backend_xid,
# which the server sets the moment an id is assigned); a LATER statement (a newer
# snapshot, as READ COMMITTED gives each statement) reads the events whose tx_id is
# below all of them and below the first statement's xmax:
#
# - a writer holding the lock either shows its id, or has none yet and gets one later,
#   >= that xmax;
# - a writer that took the lock after it was read gets its id later still, >= xmax;
# - a writer that let go of the lock before it was read had committed (or rolled back)
#   before the events are read: its events are visible, or never will be.
#
# So no event below the horizon can appear later, and a consumer whose cursor came from
# such a read never skips one. Only this schema's writers hold the horizon back: a long
# transaction elsewhere in the database does not delay the readers of this store.

_pg_locks = sa.table(
    "pg_locks",
    sa.column("locktype", sa.Text()),
    sa.column("classid", sa.Text()),
    sa.column("objid", sa.Text()),
    sa.column("objsubid", sa.Integer()),
    sa.column("pid", sa.Integer()),
)
_pg_stat_activity = sa.table(
    "pg_stat_activity",
    sa.column("pid", sa.Integer()),
    sa.column("backend_xid", sa.Text()),
    sa.column("xact_start", sa.DateTime()),
)
_XID_SPACE = 2**32


def _as_bigint(value: Any) -> sa.ColumnElement[int]:
    """An oid, xid or xid8 as a BIGINT (PostgreSQL has no direct cast: through text)."""
    return sa.cast(sa.cast(value, sa.Text()), sa.BigInteger())


def _horizon_query() -> sa.Select[Any]:
    snapshot = sa.func.pg_current_snapshot()
    schema_key = sa.cast(sa.func.hashtext(sa.func.current_schema()), sa.BigInteger()).op("&")(
        _XID_SPACE - 1
    )
    writers = (
        sa.select(
            sa.literal(True).label("present"),
            _pg_locks.c.pid.label("pid"),
            _as_bigint(_pg_stat_activity.c.backend_xid).label("xid"),
            sa.func.extract(
                "epoch", sa.func.clock_timestamp() - _pg_stat_activity.c.xact_start
            ).label("age"),
        )
        .select_from(
            _pg_locks.outerjoin(_pg_stat_activity, _pg_stat_activity.c.pid == _pg_locks.c.pid)
        )
        .where(_pg_locks.c.locktype == "advisory")
        .where(_pg_locks.c.pid != sa.func.pg_backend_pid())  # this reader's own session
        .where(_as_bigint(_pg_locks.c.classid) == WRITERS_LOCK_KEY)
        .where(_as_bigint(_pg_locks.c.objid) == schema_key)
        .where(_pg_locks.c.objsubid == 2)
        .subquery("writers")
    )
    after = sa.bindparam("after", type_=sa.BigInteger())
    # Where the consumer's cursor sits in the read order: its event, else (archived) the
    # read key kept for it, else (a position that named no event: 0) the nearest event
    # below it.
    candidates = sa.union_all(
        sa.select(events.c.tx_id, events.c.position, sa.literal(0).label("rank"))
        .where(events.c.position == after),
        sa.select(archived_read_keys.c.tx_id, archived_read_keys.c.position, sa.literal(1))
        .where(archived_read_keys.c.position == after),
        sa.select(events.c.tx_id, events.c.position, sa.literal(2))
        .where(events.c.position <= after)
        .order_by(events.c.position.desc())
        .limit(1)
        .subquery("below")
        .select(),
    ).subquery("candidates")
    before = (
        sa.select(candidates.c.tx_id, candidates.c.position)
        .order_by(candidates.c.rank)
        .limit(1)
        .subquery("cursor_event")
    )
    head = sa.select(
        _as_bigint(sa.func.pg_snapshot_xmax(snapshot)).label("xmax"),
        _as_bigint(sa.func.pg_snapshot_xmin(snapshot)).label("xmin"),
        sa.func.current_setting("transaction_isolation").label("isolation"),
        sa.select(before.c.tx_id).scalar_subquery().label("ctx"),
        sa.select(before.c.position).scalar_subquery().label("cpos"),
    ).subquery("head")
    return sa.select(
        head.c.xmax, head.c.xmin, head.c.isolation, head.c.ctx, head.c.cpos,
        writers.c.present, writers.c.pid, writers.c.xid, writers.c.age,
    ).select_from(head.outerjoin(writers, sa.true()))


_HORIZON = _horizon_query()
_EVENTS_BELOW_HORIZON = (
    sa.select(*EVENT_COLUMNS)
    .where(
        sa.tuple_(events.c.tx_id, events.c.position)
        > sa.tuple_(
            sa.bindparam("ctx", type_=sa.BigInteger()), sa.bindparam("cpos", type_=sa.BigInteger())
        )
    )
    .where(events.c.tx_id < sa.bindparam("h", type_=sa.BigInteger()))
    .order_by(events.c.tx_id, events.c.position)
    .limit(sa.bindparam("n", type_=sa.Integer()))  # NULL: no limit
)
_BEHIND_HORIZON = (
    sa.select(sa.func.count())
    .select_from(events)
    .where(events.c.tx_id >= sa.bindparam("h", type_=sa.BigInteger()))
)


@dataclass(frozen=True, slots=True)
class Horizon:
    """What a gap-safe read may return: events with ``tx_id`` below ``below``."""

    below: int
    """Every transaction that may still insert events has an id >= this."""
    cursor: tuple[int, int]
    """``(tx_id, position)`` of the consumer's cursor event; (-1, 0) before everything."""
    writers: int
    """This schema's write transactions in flight (that have written) when it was read."""
    oldest_writer_seconds: float | None
    """How long the oldest of them has been open (None: none, or not visible to this role)."""


def _widen(xid: int, near: int) -> int:
    """A 32-bit transaction id as the 64-bit one closest to ``near`` (ids in flight are
    within 2**31 of the next id to be assigned)."""
    delta = (xid - near) % _XID_SPACE
    if delta >= _XID_SPACE // 2:
        delta -= _XID_SPACE
    return near + delta


def read_horizon(conn: Connection, *, after: int = 0) -> Horizon:
    """The writers' horizon of this schema now, and where the cursor ``after`` sits.

    Read in its own statement: the events must then be read by a LATER statement (a
    newer snapshot), which READ COMMITTED gives every statement. Under a stricter
    isolation level the whole transaction shares one snapshot, and the horizon is that
    snapshot's xmin (below every transaction it does not see).
    """
    rows = executor_for(conn).fetch(conn, _HORIZON, {"after": after})
    xmax, xmin, isolation, ctx, cpos = rows[0][:5]
    holders = [(pid, xid, age) for _, _, _, _, _, present, pid, xid, age in rows if present]
    # A holder without a transaction id has written nothing yet (a reader, or a writer
    # between its BEGIN and its first write): when it writes, its id will be >= xmax.
    writing = [(xid, age) for _, xid, age in holders if xid is not None]
    if isolation != "read committed" or any(pid is None for pid, _, _ in holders):
        below = int(xmin)  # one snapshot for the whole transaction (or a prepared one)
    else:
        below = min([int(xmax), *(_widen(int(xid), int(xmax)) for xid, _ in writing)])
    ages = [float(age) for _, age in writing if age is not None]
    return Horizon(
        below=below,
        cursor=(-1, 0) if ctx is None else (int(ctx), int(cpos)),
        writers=len(writing),
        oldest_writer_seconds=max(ages) if ages else None,
    )


def events_behind_horizon(conn: Connection, horizon: Horizon) -> int:
    """Committed events a gap-safe reader cannot return yet (they wait for the horizon)."""
    return int(executor_for(conn).fetch(conn, _BEHIND_HORIZON, {"h": horizon.below})[0][0])


def all_events_by_thread_query(thread_id: str | None = None) -> sa.Select[Any]:
    query = sa.select(*EVENT_COLUMNS)
    if thread_id is not None:
        query = query.where(events.c.thread_id == thread_id)
    return query.order_by(events.c.thread_id, events.c.version)


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


def _audit_query(*, by_thread: bool, by_actor: bool) -> sa.Select[Any]:
    """Each mint joined to its ending (if any), in mint order: their audit columns, not
    their data (symfonic_store/audit_columns.py). Binds ``t`` / ``a`` when filtered."""
    mint = events.alias("mint")
    ending = events.alias("ending")
    query = (
        sa.select(
            mint.c.position,
            mint.c.thread_id,
            mint.c.interrupt_id,
            mint.c.audit_name,
            mint.c.audit_payload,
            mint.c.audit_minted_at,
            mint.c.audit_native,
            ending.c.type,
            ending.c.actor,
            ending.c.audit_reason,
            ending.c.audit_response,
            ending.c.audit_decisions,
            ending.c.occurred_at,
            mint.c.actor,
            ending.c.audit_authenticated_by,
        )
        .select_from(
            mint.outerjoin(
                ending,
                sa.and_(
                    ending.c.thread_id == mint.c.thread_id,
                    ending.c.interrupt_id == mint.c.interrupt_id,
                    # ORs of plain binds (not IN): the statement compiles to fixed SQL.
                    sa.or_(*(ending.c.type == t for t in ENDINGS)),
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
    return query


def _audit_attempts_query(*, by_thread: bool, by_actor: bool) -> sa.Select[Any]:
    """The refused answers (``interrupt.resume_rejected``) to the interrupts that
    :func:`_audit_query` lists, in one statement: per thread, in version order.

    Columns: ``thread_id``, ``interrupt_id``, ``actor``, ``audit_reason`` (the ``why``),
    ``audit_error``, ``occurred_at``.
    Refusals of an id never minted on the thread belong to no record and are left out.
    """
    rejected = events.alias("rejected")
    mint = events.alias("mint")
    query = (
        sa.select(
            rejected.c.thread_id,
            rejected.c.interrupt_id,
            rejected.c.actor,
            rejected.c.audit_reason,
            rejected.c.audit_error,
            rejected.c.occurred_at,
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
        .where(rejected.c.type == RESUME_REJECTED)
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
    return query


# Module constants, one per filter, so the fast paths compile each once.
_AUDIT = {
    (t, a): (_audit_query(by_thread=t, by_actor=a), _audit_attempts_query(by_thread=t, by_actor=a))
    for t in (False, True)
    for a in (False, True)
}


def audit_rows(
    conn: Connection, *, thread_id: str | None, actor: str | None
) -> tuple[Sequence[Sequence[Any]], Sequence[Sequence[Any]]]:
    """The rows of the audit: the mints with their endings, then the refused answers
    (columns as :func:`_audit_query` and :func:`_audit_attempts_query` list them)."""
    records, attempts = _AUDIT[(thread_id is not None, actor is not None)]
    params = {"t": thread_id, "a": actor}
    executor = executor_for(conn)
    return executor.fetch(conn, records, params), executor.fetch(conn, attempts, params)


def _is_marker_mint() -> sa.ColumnElement[bool]:
    """A seed marker's mint (a LangGraph interrupt's mint records ``source``)."""
    return sa.and_(
        events.c.type == MINTED,
        sa.func.coalesce(events.c.data["source"].as_string(), "") != NATIVE_SOURCE,
    )


def open_native_mints_query() -> sa.Select[Any]:
    """The mints of LangGraph interrupts without an ending: the open-interrupts fold."""
    ending = events.alias("ending_event")
    return (
        sa.select(*EVENT_COLUMNS)
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
        )
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


# --- LangGraph's own interrupts and their claims (SPEC §8) ---------------------------

OPEN_COLUMNS = tuple(open_interrupts.c)
_INSERT_OPEN = open_interrupts.insert()
_DELETE_OPEN = open_interrupts.delete().where(
    open_interrupts.c.thread_id == sa.bindparam("b_thread_id"),
    open_interrupts.c.interrupt_id == sa.bindparam("b_interrupt_id"),
)
_LOAD_OPEN = (
    sa.select(*OPEN_COLUMNS)
    .where(open_interrupts.c.thread_id == sa.bindparam("t"))
    .order_by(open_interrupts.c.minted_at, open_interrupts.c.interrupt_id)
)
_WAITS_AT = sa.select(
    sa.or_(
        sa.exists().where(
            open_interrupts.c.thread_id == sa.bindparam("t"),
            open_interrupts.c.checkpoint_id == sa.bindparam("c"),
        ),
        sa.exists().where(
            events.c.thread_id == sa.bindparam("t"),
            events.c.interrupt_id == sa.bindparam("i"),
            events.c.type == MINTED,
        ),
    )
)
_LOAD_CLAIMS = sa.select(
    claims.c.interrupt_id,
    claims.c.actor,
    claims.c.response,
    claims.c.claimed_at,
    claims.c.authenticated_by,
    claims.c.decided,
).where(claims.c.thread_id == sa.bindparam("t"))
_INSERT_CLAIM = claims.insert()
_DELETE_CLAIM = claims.delete().where(
    claims.c.thread_id == sa.bindparam("b_thread_id"),
    claims.c.interrupt_id == sa.bindparam("b_interrupt_id"),
)


def insert_open_interrupts(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    executor_for(conn).write(conn, _INSERT_OPEN, rows, [c.key for c in OPEN_COLUMNS])


def delete_open_interrupts(conn: Connection, keys: Sequence[tuple[str, str]]) -> None:
    rows = [{"b_thread_id": t, "b_interrupt_id": i} for t, i in keys]
    executor_for(conn).write(conn, _DELETE_OPEN, rows)


def open_rows(conn: Connection, thread_id: str) -> list[dict[str, Any]]:
    """The thread's open LangGraph interrupts, oldest first, as dicts of their columns."""
    names = [c.key for c in OPEN_COLUMNS]
    return [dict(zip(names, r, strict=True)) for r in executor_for(conn).fetch(conn, _LOAD_OPEN, {"t": thread_id})]


def claim_rows(conn: Connection, thread_id: str) -> dict[str, dict[str, Any]]:
    """The thread's claims in flight, by interrupt id."""
    rows = executor_for(conn).fetch(conn, _LOAD_CLAIMS, {"t": thread_id})
    return {
        r[0]: {
            "actor": r[1],
            "response": r[2],
            "claimed_at": r[3],
            "authenticated_by": r[4],
            "decided": r[5],
        }
        for r in rows
    }


def insert_claim(conn: Connection, row: dict[str, Any]) -> None:
    executor_for(conn).write(
        conn,
        _INSERT_CLAIM,
        [row],
        [
            "thread_id", "interrupt_id", "actor", "response", "claimed_at",
            "authenticated_by", "decided",
        ],
    )


def delete_claim(conn: Connection, thread_id: str, interrupt_id: str) -> None:
    executor_for(conn).write(conn, _DELETE_CLAIM, [{"b_thread_id": thread_id, "b_interrupt_id": interrupt_id}])


def open_interrupts_query(*, since_before: float | None = None, limit: int | None = None) -> sa.Select[Any]:
    """Open LangGraph interrupts across all threads, oldest first."""
    query = sa.select(*OPEN_COLUMNS).order_by(
        open_interrupts.c.minted_at, open_interrupts.c.thread_id, open_interrupts.c.interrupt_id
    )
    if since_before is not None:
        query = query.where(open_interrupts.c.minted_at < since_before)
    if limit is not None:
        query = query.limit(limit)
    return query


def delete_all_open_interrupts(conn: Connection) -> None:
    conn.execute(open_interrupts.delete())


def read_open_interrupts(
    conn: Connection, *, since_before: float | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    names = [c.key for c in OPEN_COLUMNS]
    query = open_interrupts_query(since_before=since_before, limit=limit)
    return [dict(zip(names, r, strict=True)) for r in conn.execute(query)]


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


def stale_open_interrupts(
    conn: Connection,
    *,
    cutoff: float,
    after: tuple[str, str],
    limit: int,
    thread_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Open LangGraph interrupts minted before ``cutoff`` with no answer in flight.

    Keyset-paged on ``(thread_id, interrupt_id)``. Not locked: the sweep takes each
    thread's lock and reads what is still open under it.
    """
    names = [c.key for c in OPEN_COLUMNS]
    query = (
        sa.select(*OPEN_COLUMNS)
        .where(open_interrupts.c.minted_at < cutoff)
        .where(
            sa.tuple_(open_interrupts.c.thread_id, open_interrupts.c.interrupt_id)
            > sa.tuple_(sa.literal(after[0]), sa.literal(after[1]))
        )
        .where(
            ~sa.exists().where(
                claims.c.thread_id == open_interrupts.c.thread_id,
                claims.c.interrupt_id == open_interrupts.c.interrupt_id,
            )
        )
        .order_by(open_interrupts.c.thread_id, open_interrupts.c.interrupt_id)
        .limit(limit)
    )
    if thread_ids is not None:
        query = query.where(open_interrupts.c.thread_id.in_(thread_ids))
    return [dict(zip(names, r, strict=True)) for r in conn.execute(query)]


def stale_claims(
    conn: Connection, *, claimed_before: float, thread_ids: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """Claims older than ``claimed_before``: answers whose process may be gone."""
    query = (
        sa.select(claims.c.thread_id, claims.c.interrupt_id)
        .where(claims.c.claimed_at < claimed_before)
        .order_by(claims.c.claimed_at)
    )
    if thread_ids is not None:
        query = query.where(claims.c.thread_id.in_(thread_ids))
    return [(r[0], r[1]) for r in conn.execute(query)]


# --- evidence: checkpoints and archives (SPEC §10) -----------------------------------

ID_CHUNK = 500
"""Ids per statement when a statement names many threads (one bound parameter each)."""
ROW_CHUNK = 5000


class ArchivedBase(NamedTuple):
    """A thread's archived head: versions up to ``version`` are in an archive."""

    thread_id: str
    version: int
    position: int
    last_hash: str


def _chunks(items: Sequence[Any], size: int = ID_CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def lock_evidence(conn: Connection) -> None:
    """Serialise checkpoints and archive removals until commit (see the executor)."""
    executor_for(conn).lock_evidence(conn)


STEPS_LOCK_KEY = 0x53594D54  # "SYMT": one thread's checkpointer steps, in turn
_LOCK_THREAD_STEPS = sa.select(
    sa.func.pg_advisory_xact_lock(
        sa.literal(STEPS_LOCK_KEY, sa.Integer()), sa.func.hashtext(sa.bindparam("t"))
    )
)


def lock_thread_steps(conn: Connection, thread_id: str) -> None:
    """PostgreSQL: until commit, no other step transaction of ``thread_id`` (the store's
    checkpointer) takes its deferred records, whether or not the thread exists yet."""
    conn.execute(_LOCK_THREAD_STEPS, {"t": thread_id})


def final_max_position(conn: Connection) -> int:
    """The log's last position, read while no write transaction is in flight (see
    :meth:`~symfonic_store.db.executor.Executor.writers_shut_out`): no event can commit
    at or below it later.

    Raises:
        WritersBusyError: on PostgreSQL, a write transaction stayed open past the wait.
    """
    with executor_for(conn).writers_shut_out(conn):
        return max_position(conn)


def max_position(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(events.c.position), 0))).scalar_one())


def max_archive_id(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(archives.c.id), 0))).scalar_one())


def events_upto_query(position: int, *, thread_id: str | None = None) -> sa.Select[Any]:
    """Events at or below ``position``, by thread and version (one thread's, if given)."""
    query = sa.select(*EVENT_COLUMNS).where(events.c.position <= position)
    if thread_id is not None:
        query = query.where(events.c.thread_id == thread_id)
    return query.order_by(events.c.thread_id, events.c.version)


def events_between_query(after: int, upto: int) -> sa.Select[Any]:
    """Events in ``(after, upto]``, by thread and version."""
    return (
        sa.select(*EVENT_COLUMNS)
        .where(events.c.position > after, events.c.position <= upto)
        .order_by(events.c.thread_id, events.c.version)
    )


def events_of_threads_query(thread_ids: Sequence[str]) -> sa.Select[Any]:
    return (
        sa.select(*EVENT_COLUMNS)
        .where(events.c.thread_id.in_(list(thread_ids)))
        .order_by(events.c.thread_id, events.c.version)
    )


def threads_with_events_between(conn: Connection, after: int, upto: int) -> list[str]:
    query = (
        sa.select(events.c.thread_id)
        .where(events.c.position > after, events.c.position <= upto)
        .distinct()
    )
    return [str(t) for (t,) in conn.execute(query)]


def _latest_archived(where: Sequence[sa.ColumnElement[bool]] = ()) -> sa.Select[Any]:
    """Per thread, its newest archived head among the rows ``where`` selects."""
    a = archived_threads
    newest = (
        sa.select(a.c.thread_id.label("thread_id"), sa.func.max(a.c.version).label("version"))
        .where(*where)
        .group_by(a.c.thread_id)
        .subquery("newest")
    )
    return sa.select(a.c.thread_id, a.c.version, a.c.position, a.c.last_hash).select_from(
        a.join(newest, sa.and_(a.c.thread_id == newest.c.thread_id, a.c.version == newest.c.version))
    )


def latest_archived_heads(conn: Connection) -> list[ArchivedBase]:
    """Every archived thread's newest archived head."""
    return [ArchivedBase(str(t), int(v), int(p), str(h)) for t, v, p, h in conn.execute(_latest_archived())]


def archived_heads_since(conn: Connection, after_archive: int, upto_archive: int) -> list[ArchivedBase]:
    """The newest archived head of each thread archived by archives ``(after, upto]``."""
    a = archived_threads
    query = _latest_archived([a.c.archive_id > after_archive, a.c.archive_id <= upto_archive])
    return [ArchivedBase(str(t), int(v), int(p), str(h)) for t, v, p, h in conn.execute(query)]


def archived_bases_as_of(conn: Connection, archives_upto: int, *, thread_id: str | None) -> dict[str, int]:
    """``thread -> archived version`` as archives ``1..archives_upto`` left them."""
    a = archived_threads
    where = [a.c.archive_id <= archives_upto]
    if thread_id is not None:
        where.append(a.c.thread_id == thread_id)
    return {str(t): int(v) for t, v, _, _ in conn.execute(_latest_archived(where))}


def archived_head_records(
    conn: Connection, *, thread_id: str | None = None, thread_ids: Sequence[str] | None = None
) -> dict[tuple[str, int], tuple[int, str]]:
    """``(thread, archived version) -> (position, last hash)`` of the archive records."""
    a = archived_threads
    columns = (a.c.thread_id, a.c.version, a.c.position, a.c.last_hash)
    queries: list[sa.Select[Any]] = []
    if thread_ids is not None:
        queries = [sa.select(*columns).where(a.c.thread_id.in_(list(c))) for c in _chunks(thread_ids)]
    elif thread_id is not None:
        queries = [sa.select(*columns).where(a.c.thread_id == thread_id)]
    else:
        queries = [sa.select(*columns)]
    out: dict[tuple[str, int], tuple[int, str]] = {}
    for query in queries:
        for t, v, p, h in conn.execute(query):
            out[(str(t), int(v))] = (int(p), str(h))
    return out


def archived_versions(conn: Connection, thread_ids: Sequence[str]) -> dict[str, int]:
    """``thread -> archived_version`` of those projection rows that have one."""
    out: dict[str, int] = {}
    for chunk in _chunks(list(thread_ids)):
        query = sa.select(threads.c.thread_id, threads.c.archived_version).where(
            threads.c.thread_id.in_(list(chunk)), threads.c.archived_version.is_not(None)
        )
        out.update({str(t): int(v) for t, v in conn.execute(query)})
    return out


def thread_run_ids(conn: Connection, thread_ids: Sequence[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for chunk in _chunks(list(thread_ids)):
        query = sa.select(threads.c.thread_id, threads.c.run_id).where(threads.c.thread_id.in_(list(chunk)))
        out.update({str(t): r for t, r in conn.execute(query)})
    return out


def archived_bases_for_live_events(conn: Connection, thread_id: str | None) -> dict[str, tuple[int, str]]:
    """``thread -> (archived version, hash)`` of archived threads with later events: where
    their chain starts again. The projection row names the version; the record its hash."""
    a = archived_threads
    query = (
        sa.select(threads.c.thread_id, a.c.version, a.c.last_hash)
        .select_from(
            threads.join(a, sa.and_(a.c.thread_id == threads.c.thread_id, a.c.version == threads.c.archived_version))
        )
        .where(threads.c.version > threads.c.archived_version)
    )
    if thread_id is not None:
        query = query.where(threads.c.thread_id == thread_id)
    return {str(t): (int(v), str(h)) for t, v, h in conn.execute(query)}


# checkpoint state: the latest checkpoint's leaves and bucket hashes

HeadRow = tuple[str, int, int, str, str, int]
"""``(thread_id, version, position, last_hash, digest, base)`` of a checkpoint head."""
_HEAD_COLUMNS = (
    checkpoint_heads.c.thread_id,
    checkpoint_heads.c.version,
    checkpoint_heads.c.position,
    checkpoint_heads.c.last_hash,
    checkpoint_heads.c.digest,
    checkpoint_heads.c.base,
)


def latest_checkpoint(conn: Connection) -> tuple[int, Any] | None:
    """``(seq, statement)`` of the newest checkpoint recorded (not its heads), or None."""
    row = conn.execute(
        sa.select(checkpoints.c.seq, checkpoints.c.statement).order_by(checkpoints.c.seq.desc()).limit(1)
    ).first()
    return None if row is None else (int(row[0]), row[1])


def stored_checkpoints_newest_first(
    conn: Connection, *, upto_position: int
) -> Generator[tuple[str, Any, Any], None, None]:
    """``(id, statement, heads)`` of the recorded checkpoints at or below a position,
    newest first."""
    query = (
        sa.select(checkpoints.c.id, checkpoints.c.statement, checkpoints.c.heads)
        .where(checkpoints.c.position <= upto_position)
        .order_by(checkpoints.c.seq.desc())
    )
    result = conn.execute(query, execution_options={"yield_per": 100})
    try:
        for doc_id, statement, heads in result:
            yield str(doc_id), statement, heads
    finally:
        result.close()


def checkpoint_buckets_all(conn: Connection) -> dict[int, tuple[str, int]]:
    rows = conn.execute(sa.select(checkpoint_buckets.c.bucket, checkpoint_buckets.c.digest, checkpoint_buckets.c.threads))
    return {int(b): (str(d), int(n)) for b, d, n in rows}


def checkpoint_heads_of(conn: Connection, thread_ids: Sequence[str]) -> list[tuple[HeadRow, str]]:
    """The kept heads of these threads, each with its stored leaf hash."""
    out: list[tuple[HeadRow, str]] = []
    for chunk in _chunks(list(thread_ids)):
        query = sa.select(*_HEAD_COLUMNS, checkpoint_heads.c.leaf_hash).where(
            checkpoint_heads.c.thread_id.in_(list(chunk))
        )
        out.extend(
            ((str(t), int(v), int(p), str(h), str(d), int(b)), str(lh))
            for t, v, p, h, d, b, lh in conn.execute(query)
        )
    return out


def checkpoint_leaf_hashes_in(conn: Connection, buckets: Sequence[int]) -> dict[int, dict[str, str]]:
    """``bucket -> {thread_id: leaf hash}`` of the kept heads in those buckets."""
    out: dict[int, dict[str, str]] = {}
    for chunk in _chunks(list(buckets)):
        query = sa.select(
            checkpoint_heads.c.bucket, checkpoint_heads.c.thread_id, checkpoint_heads.c.leaf_hash
        ).where(checkpoint_heads.c.bucket.in_(list(chunk)))
        for bucket, t, h in conn.execute(query):
            out.setdefault(int(bucket), {})[str(t)] = str(h)
    return out


def _insert_heads(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    for chunk in _chunks(list(rows), ROW_CHUNK):
        conn.execute(checkpoint_heads.insert(), list(chunk))


def _insert_buckets(conn: Connection, buckets: dict[int, tuple[str, int]]) -> None:
    rows = [{"bucket": b, "digest": d, "threads": n} for b, (d, n) in sorted(buckets.items()) if n]
    for chunk in _chunks(rows, ROW_CHUNK):
        conn.execute(checkpoint_buckets.insert(), list(chunk))


def replace_checkpoint_state(
    conn: Connection, heads: Sequence[dict[str, Any]], buckets: dict[int, tuple[str, int]]
) -> None:
    """The kept state becomes exactly ``heads`` (rows of the heads table) and ``buckets``."""
    conn.execute(checkpoint_heads.delete())
    conn.execute(checkpoint_buckets.delete())
    _insert_heads(conn, heads)
    _insert_buckets(conn, buckets)


def update_checkpoint_state(
    conn: Connection, heads: Sequence[dict[str, Any]], buckets: dict[int, tuple[str, int]]
) -> None:
    """Replace the given threads' heads and the given buckets' hashes."""
    ids = [h["thread_id"] for h in heads]
    for chunk in _chunks(ids):
        conn.execute(checkpoint_heads.delete().where(checkpoint_heads.c.thread_id.in_(list(chunk))))
    _insert_heads(conn, heads)
    for chunk in _chunks(sorted(buckets)):
        conn.execute(checkpoint_buckets.delete().where(checkpoint_buckets.c.bucket.in_(list(chunk))))
    _insert_buckets(conn, buckets)


def insert_checkpoint(conn: Connection, row: dict[str, Any]) -> None:
    conn.execute(checkpoints.insert(), row)


# archives


def archivable_threads(
    conn: Connection, *, before: datetime | None, thread_ids: Sequence[str] | None = None
) -> list[tuple[str, int, str]]:
    """``(thread_id, version, last_hash)`` of each whole finished thread: events in the table
    since any earlier archive, every interrupt ended, nothing open, claimed or owed, and
    (with ``before``) no event at or after that time."""
    mint = events.alias("mint_event")
    ending = events.alias("ending_event")
    late = events.alias("late_event")
    unended = (
        sa.exists()
        .where(mint.c.thread_id == threads.c.thread_id, mint.c.type == MINTED)
        .where(
            ~sa.exists().where(
                ending.c.thread_id == mint.c.thread_id,
                ending.c.interrupt_id == mint.c.interrupt_id,
                ending.c.type.in_(ENDINGS),
            )
        )
    )
    query = (
        sa.select(threads.c.thread_id, threads.c.version, threads.c.last_hash)
        .where(threads.c.pending_interrupt_id.is_(None))
        .where(sa.or_(threads.c.archived_version.is_(None), threads.c.version > threads.c.archived_version))
        .where(~sa.exists().where(open_interrupts.c.thread_id == threads.c.thread_id))
        .where(~sa.exists().where(claims.c.thread_id == threads.c.thread_id))
        .where(~sa.exists().where(wakeups.c.thread_id == threads.c.thread_id))
        .where(~unended)
        .order_by(threads.c.thread_id)
    )
    if before is not None:
        query = query.where(
            ~sa.exists().where(late.c.thread_id == threads.c.thread_id, late.c.occurred_at >= before)
        )
    queries = [query] if thread_ids is None else [query.where(threads.c.thread_id.in_(list(c))) for c in _chunks(thread_ids)]
    out: list[tuple[str, int, str]] = []
    for q in queries:
        out.extend((str(t), int(v), str(h)) for t, v, h in conn.execute(q))
    return out


def insert_archive(conn: Connection, row: dict[str, Any]) -> int:
    result = conn.execute(archives.insert(), row)
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


_KEEP_READ_KEYS = archived_read_keys.insert().from_select(
    ["position", "tx_id"],
    sa.select(events.c.position, events.c.tx_id).where(
        events.c.thread_id == sa.bindparam("t"),
        events.c.version <= sa.bindparam("v"),
        events.c.tx_id.is_not(None),
    ),
)


def keep_read_keys(conn: Connection, heads: Sequence[tuple[str, int]]) -> None:
    """Before an archive removes threads' events: keep each one's read key (see
    ``schema.archived_read_keys``), so a cursor at any of them stays exact."""
    for thread_id, version in heads:
        conn.execute(_KEEP_READ_KEYS, {"t": thread_id, "v": version})


def insert_archived_threads(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    for chunk in _chunks(list(rows), ROW_CHUNK):
        conn.execute(archived_threads.insert(), list(chunk))


def mark_archived(conn: Connection, heads: Sequence[tuple[str, int]]) -> None:
    """Each thread's projection head is kept, marked as archived up to its version."""
    stmt = (
        threads.update()
        .where(threads.c.thread_id == sa.bindparam("b_thread_id"))
        .values(archived_version=sa.bindparam("b_version"))
    )
    rows = [{"b_thread_id": t, "b_version": v} for t, v in heads]
    for chunk in _chunks(rows, ROW_CHUNK):
        conn.execute(stmt, list(chunk))


def restore_archived_rows(conn: Connection) -> int:
    """After a rebuild from the events: put back each archived thread's head, and the
    archive marks and run ids of threads whose later events were folded; returns the
    number of archived-only rows put back."""
    newest = _latest_archived().subquery("newest_archived")
    a = archived_threads
    run_of_newest = (
        sa.select(a.c.run_id)
        .where(a.c.thread_id == threads.c.thread_id)
        .order_by(a.c.version.desc())
        .limit(1)
        .scalar_subquery()
    )
    conn.execute(
        threads.update()
        .where(sa.exists().where(a.c.thread_id == threads.c.thread_id))
        .values(
            archived_version=sa.select(sa.func.max(a.c.version))
            .where(a.c.thread_id == threads.c.thread_id)
            .scalar_subquery(),
            run_id=sa.func.coalesce(threads.c.run_id, run_of_newest),
        )
    )
    run_ids = sa.select(a.c.run_id).where(
        a.c.thread_id == newest.c.thread_id, a.c.version == newest.c.version
    ).scalar_subquery()
    rows = sa.select(
        newest.c.thread_id, newest.c.version, newest.c.last_hash, run_ids, newest.c.version
    ).where(~sa.exists().where(threads.c.thread_id == newest.c.thread_id))
    result = conn.execute(
        threads.insert().from_select(
            ["thread_id", "version", "last_hash", "run_id", "archived_version"], rows
        )
    )
    return max(int(result.rowcount or 0), 0)


def unmarked_archive_records(conn: Connection, thread_id: str | None) -> list[tuple[str, int, int | None]]:
    """``(thread_id, newest archived version, the projection's archived_version)`` of each
    archived thread whose projection row is missing or does not mark that version."""
    a = archived_threads
    newest = sa.select(a.c.thread_id.label("thread_id"), sa.func.max(a.c.version).label("version")).group_by(
        a.c.thread_id
    )
    if thread_id is not None:
        newest = newest.where(a.c.thread_id == thread_id)
    n = newest.subquery("newest_archived")
    query = (
        sa.select(n.c.thread_id, n.c.version, threads.c.archived_version)
        .select_from(n.outerjoin(threads, threads.c.thread_id == n.c.thread_id))
        .where(sa.func.coalesce(threads.c.archived_version, -1) != n.c.version)
        .order_by(n.c.thread_id)
    )
    return [(str(t), int(v), None if m is None else int(m)) for t, v, m in conn.execute(query)]
