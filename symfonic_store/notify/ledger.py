"""The notifier's rows: cursors, leases, failing tries and dead letters (SPEC §14).

Functions of a ``Connection``, each run by the store's runner in a transaction of its own
(``Op(..., write=True, appends=False)``: on PostgreSQL they do not join the event
writers). Every change of a cursor is conditional on the caller still holding the
subscription's lease, so a process whose lease ran out cannot move a cursor another
process now owns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db.backends.base import WritersBusyError
from ..db.schema import notify_cursors as cursors
from ..db.schema import notify_dead_letters as letters
from ..db.statements import final_max_position
from ..errors import ConcurrencyConflictError


@dataclass(frozen=True, slots=True)
class Cursor:
    """A subscription's row."""

    subscription: str
    position: int
    lease_owner: str | None
    lease_until: float | None
    disabled_at: datetime | None
    disabled_reason: str | None
    failing_position: int | None
    tries: int
    first_failed_at: float | None
    next_try_at: float | None
    last_error: str | None
    delivered: int
    failed: int
    dead_lettered: int
    delivered_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    subscription: str
    position: int
    thread_id: str
    interrupt_id: str | None
    type: str
    tries: int
    error: str | None
    dead_at: datetime
    resent_at: datetime | None


def _cursor(row: Any) -> Cursor:
    return Cursor(**{name: row._mapping[name] for name in Cursor.__dataclass_fields__})


def _letter(row: Any) -> DeadLetter:
    return DeadLetter(**{name: row._mapping[name] for name in DeadLetter.__dataclass_fields__})


def now_utc(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def read_cursors(conn: Connection, names: list[str] | None = None) -> dict[str, Cursor]:
    query = sa.select(cursors)
    if names is not None:
        query = query.where(cursors.c.subscription.in_(names))
    return {r.subscription: _cursor(r) for r in conn.execute(query)}


def open_cursor(conn: Connection, name: str, *, from_start: bool, now: float) -> Cursor:
    """The subscription's cursor, made when it has none: at the log's end (read while no
    writer is in flight, so no event can commit at or below it later), or at 0 with
    ``from_start``."""
    found = read_cursors(conn, [name]).get(name)
    if found is not None:
        return found
    try:
        position = 0 if from_start else final_max_position(conn)
    except WritersBusyError:
        raise ConcurrencyConflictError(
            f"subscription {name!r} starts at the log's end, which a write transaction held "
            "open still hides: try again (the long-running notifier does, next pass)"
        ) from None
    conn.execute(
        cursors.insert().values(
            subscription=name, position=position, created_at=now_utc(now), tries=0,
            delivered=0, failed=0, dead_lettered=0,
        )
    )
    return read_cursors(conn, [name])[name]


def rewind_cursor(conn: Connection, name: str, owner: str, *, now: float) -> int | None:
    """Move the subscription's cursor back to the log's start (its failing event and
    backoff cleared; a 410 stays disabled, its counts stay); returns the position it was
    at, or None when another live process holds it (nothing changed)."""
    before = read_cursors(conn, [name])[name].position
    moved = conn.execute(
        cursors.update()
        .where(cursors.c.subscription == name)
        .where(sa.or_(cursors.c.lease_owner.is_(None), cursors.c.lease_owner == owner, cursors.c.lease_until < now))
        .values(position=0, failing_position=None, tries=0, first_failed_at=None, next_try_at=None, last_error=None)
    ).rowcount
    return before if moved == 1 else None


def take_lease(conn: Connection, name: str, owner: str, *, now: float, seconds: float) -> Cursor | None:
    """Hold the subscription until ``now + seconds`` (or renew the hold); None when
    another live holder has it."""
    taken = conn.execute(
        cursors.update()
        .where(cursors.c.subscription == name)
        .where(
            sa.or_(
                cursors.c.lease_owner.is_(None),
                cursors.c.lease_owner == owner,
                cursors.c.lease_until < now,
            )
        )
        .values(lease_owner=owner, lease_until=now + seconds)
    ).rowcount
    if taken != 1:
        return None
    return read_cursors(conn, [name])[name]


def give_lease(conn: Connection, name: str, owner: str) -> None:
    conn.execute(
        cursors.update()
        .where(cursors.c.subscription == name, cursors.c.lease_owner == owner)
        .values(lease_owner=None, lease_until=None)
    )


def _mine(name: str, owner: str) -> Any:
    return cursors.update().where(cursors.c.subscription == name, cursors.c.lease_owner == owner)


def advance(
    conn: Connection, name: str, owner: str, *, position: int, delivered: int, now: float,
    lease_until: float,
) -> bool:
    """The cursor moves to ``position`` (events up to it are done; ``delivered`` of them
    were delivered now) and the lease is renewed. False when the lease was lost (nothing
    changed)."""
    values: dict[str, Any] = {
        "position": position, "lease_until": lease_until, "failing_position": None, "tries": 0, "first_failed_at": None,
        "next_try_at": None, "last_error": None,
        "delivered": cursors.c.delivered + delivered,
    }
    if delivered:
        values["delivered_at"] = now_utc(now)
    return bool(conn.execute(_mine(name, owner).values(**values)).rowcount == 1)


def record_failure(
    conn: Connection, name: str, owner: str, *, position: int, tries: int, first_failed_at: float,
    next_try_at: float, error: str,
) -> bool:
    return bool(conn.execute(
        _mine(name, owner).values(
            failing_position=position, tries=tries, first_failed_at=first_failed_at,
            next_try_at=next_try_at, last_error=error, failed=cursors.c.failed + 1,
        )
    ).rowcount == 1)


def dead_letter(
    conn: Connection, name: str, owner: str, *, event: Any, tries: int, error: str, now: float,
) -> bool:
    """The event is given up: recorded as a dead letter, and the cursor goes past it."""
    moved = conn.execute(
        _mine(name, owner).values(
            position=event.position, failing_position=None, tries=0, first_failed_at=None,
            next_try_at=None, last_error=error, failed=cursors.c.failed + 1,
            dead_lettered=cursors.c.dead_lettered + 1,
        )
    ).rowcount
    if moved != 1:
        return False
    conn.execute(
        letters.insert().values(
            subscription=name, position=event.position, thread_id=event.thread_id,
            interrupt_id=event.interrupt_id, type=event.type, tries=tries, error=error,
            dead_at=now_utc(now),
        )
    )
    return True


def disable(conn: Connection, name: str, owner: str, *, reason: str, now: float) -> bool:
    """410 Gone: the subscription stops where it is (``enable`` resumes it there)."""
    return bool(conn.execute(
        _mine(name, owner).values(
            disabled_at=now_utc(now), disabled_reason=reason, lease_owner=None, lease_until=None,
            failed=cursors.c.failed + 1,
        )
    ).rowcount == 1)


def enable(conn: Connection, name: str) -> bool:
    """Clear a 410's disabling; False when the subscription has no cursor or was not disabled."""
    return bool(conn.execute(
        cursors.update()
        .where(cursors.c.subscription == name, cursors.c.disabled_at.is_not(None))
        .values(disabled_at=None, disabled_reason=None, failing_position=None, tries=0,
                first_failed_at=None, next_try_at=None)
    ).rowcount == 1)


def dead_letters(conn: Connection, name: str | None = None, *, waiting: bool = True) -> list[DeadLetter]:
    query = sa.select(letters).order_by(letters.c.subscription, letters.c.position)
    if name is not None:
        query = query.where(letters.c.subscription == name)
    if waiting:
        query = query.where(letters.c.resent_at.is_(None))
    return [_letter(r) for r in conn.execute(query)]


def letter_resent(conn: Connection, name: str, position: int, *, now: float) -> None:
    conn.execute(
        letters.update()
        .where(letters.c.subscription == name, letters.c.position == position)
        .values(resent_at=now_utc(now))
    )
    conn.execute(
        cursors.update().where(cursors.c.subscription == name)
        .values(delivered=cursors.c.delivered + 1, delivered_at=now_utc(now))
    )


def letter_failed(conn: Connection, name: str, position: int, *, error: str) -> None:
    conn.execute(
        letters.update()
        .where(letters.c.subscription == name, letters.c.position == position)
        .values(tries=letters.c.tries + 1, error=error)
    )
    conn.execute(cursors.update().where(cursors.c.subscription == name).values(failed=cursors.c.failed + 1))


@dataclass(frozen=True, slots=True)
class Figures:
    """One subscription's delivery figures, for ``/metrics``."""

    subscription: str
    delivered: int
    failed: int
    dead_lettered: int
    waiting_letters: int
    disabled: bool
    lag_events: int
    oldest_undelivered: datetime | None


def figures(conn: Connection) -> list[Figures]:
    """Every subscription with a cursor: its counts, waiting dead letters, and how far it
    trails the log (events after its cursor, and the oldest of them)."""
    from ..db.schema import events

    waiting: dict[str, int] = dict(
        conn.execute(
            sa.select(letters.c.subscription, sa.func.count())
            .where(letters.c.resent_at.is_(None))
            .group_by(letters.c.subscription)
        ).all()
    )
    out = []
    for c in read_cursors(conn).values():
        count, oldest = conn.execute(
            sa.select(sa.func.count(), sa.func.min(events.c.occurred_at)).where(events.c.position > c.position)
        ).one()
        if isinstance(oldest, str):  # SQLite's aggregate loses the column's type
            oldest = datetime.fromisoformat(oldest)
        if oldest is not None and oldest.tzinfo is None:
            oldest = oldest.replace(tzinfo=UTC)
        out.append(Figures(c.subscription, c.delivered, c.failed, c.dead_lettered,
                           int(waiting.get(c.subscription, 0)), c.disabled_at is not None, int(count), oldest))
    return out
