"""PostgreSQL's writers' lock and the horizon it gives readers of the whole log (I11,
SPEC §11): the SQL behind :class:`~symfonic_store.db.backends.postgres.PostgresBackend`'s
gap-safe reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..executors.base import Executor
from ..rows import EVENT_COLUMNS
from ..schema import archived_read_keys, events
from .base import Horizon

WRITERS_LOCK_KEY = 0x53594D46  # "SYMF": held SHARED by every write transaction (I11)
"""With ``hashtext(current_schema())`` the key of the lock every PostgreSQL write
transaction takes in SHARE mode at its BEGIN, before it has a transaction id (see
:meth:`PostgresBackend.begin_statements <symfonic_store.db.backends.postgres.PostgresBackend.begin_statements>`). Shared holders never wait on each other, so writers
run in parallel; the lock only tells readers which transactions may still insert events
into this schema (:func:`read_horizon`). Older releases took
it EXCLUSIVE (one writer at a time), so during an upgrade the two never interleave."""

WRITERS_LOCK = (
    f"SELECT pg_advisory_xact_lock_shared({WRITERS_LOCK_KEY}, hashtext(current_schema()))"
)
"""The writers' lock, without parameters (so it may share a simple query with BEGIN)."""

# --- the writers' horizon ------------------------------------------------------------
#
# Every write transaction takes the writers' lock (WRITERS_LOCK_KEY) in SHARE
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


def _widen(xid: int, near: int) -> int:
    """A 32-bit transaction id as the 64-bit one closest to ``near`` (ids in flight are
    within 2**31 of the next id to be assigned)."""
    delta = (xid - near) % _XID_SPACE
    if delta >= _XID_SPACE // 2:
        delta -= _XID_SPACE
    return near + delta


def read_horizon(executor: Executor, conn: Connection, *, after: int = 0) -> Horizon:
    """The writers' horizon of this schema now, and where the cursor ``after`` sits.

    Read in its own statement: the events must then be read by a LATER statement (a
    newer snapshot), which READ COMMITTED gives every statement. Under a stricter
    isolation level the whole transaction shares one snapshot, and the horizon is that
    snapshot's xmin (below every transaction it does not see).
    """
    rows = executor.fetch(conn, _HORIZON, {"after": after})
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


def events_below_horizon(
    executor: Executor, conn: Connection, horizon: Horizon, limit: int | None
) -> Sequence[Sequence[Any]]:
    """Event rows after the horizon's cursor and below it, in the read order
    ``(tx_id, position)``."""
    params = {"ctx": horizon.cursor[0], "cpos": horizon.cursor[1], "h": horizon.below, "n": limit}
    return executor.fetch(conn, _EVENTS_BELOW_HORIZON, params)


def events_behind_horizon(executor: Executor, conn: Connection, horizon: Horizon) -> int:
    """Committed events a gap-safe reader cannot return yet (they wait for the horizon)."""
    return int(executor.fetch(conn, _BEHIND_HORIZON, {"h": horizon.below})[0][0])

