"""Agent Inbox's thread-level ignore in the audit columns (SPEC §13, §18 amendment).

Frozen: this file imports nothing from ``symfonic_store``.

"Mark as resolved" in Agent Inbox (the thread's state updated as ``END``) closes an
interrupt with an ``interrupt.expired`` (``reason: superseded``) whose hashed data carries
``decision: "ignore"`` and, when the Agent Server authenticated its user,
``authenticated_by: "agent-server"``. The audit columns of an expiry held only
``audit_reason``, so ``audit()`` showed that record's decision and ``authenticated_by`` as
null. From this revision an expiry's audit columns also hold:

- ``audit_decisions``: ``[data["decision"]]`` when the data has a ``decision`` (as on
  ``interrupt.resumed``), else NULL;
- ``audit_authenticated_by``: ``data["authenticated_by"]`` when it is text, else NULL.

No column is added: both exist (``0011_audit_columns``, ``0014_decision_audit``). The
upgrade fills them in for the expiries appended before it, as 0011 and 0014 did: every
``interrupt.expired`` is read, page by page, and each that carries either key gets its
values by UPDATE, the append-only UPDATE trigger lifted inside this migration's own
transaction and restored exactly before it ends (SQLite: dropped and created again with
its text; PostgreSQL: disabled and put back in the state ``pg_trigger.tgenabled`` says it
was in, under the table's ACCESS EXCLUSIVE lock). The events' data, their ``detected_by``
included, are not touched: they are hashed, and an old ignore keeps the ``detected_by:
"gateway"`` it was recorded with (new ones record ``checkpointer``). ``verify`` recomputes
the columns from the data and agrees with every row after the upgrade.

The downgrade empties those two cells of every expiry again (the same lifting of the
trigger), which is what the release before this one writes and what its ``verify``
expects. Nothing is lost: they are copies, and the events' data still hold every value.

Revision ID: 0021_ignore_audit
Revises: 0020_one_vote
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0021_ignore_audit"
down_revision: str | None = "0020_one_vote"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EXPIRED = "interrupt.expired"
PAGE = 1000
SQLITE_NO_UPDATE_TRIGGER = """
    CREATE TRIGGER symfonic_events_no_update BEFORE UPDATE ON symfonic_events
    BEGIN SELECT RAISE(ABORT, 'symfonic_events is append-only: UPDATE is not allowed'); END
    """
POSTGRES_TRIGGER = "symfonic_events_no_update_delete"
POSTGRES_RESTORE = {
    "O": "ENABLE TRIGGER",
    "A": "ENABLE ALWAYS TRIGGER",
    "R": "ENABLE REPLICA TRIGGER",
}

_events = sa.table(
    "symfonic_events",
    sa.column("position", sa.BigInteger()),
    sa.column("type", sa.String(64)),
    sa.column("data", sa.JSON()),
    sa.column("audit_decisions", sa.JSON(none_as_null=True)),
    sa.column("audit_authenticated_by", sa.Text()),
)


def derive(data: Any) -> tuple[list[Any] | None, str | None]:
    """An expiry's ``(audit_decisions, audit_authenticated_by)`` (a copy of the expiry's rule
    in symfonic_store/event_types.py)."""
    if not isinstance(data, dict):
        return None, None
    decisions = [data["decision"]] if "decision" in data else None
    authenticated_by = data.get("authenticated_by")
    return decisions, authenticated_by if isinstance(authenticated_by, str) else None


def _to_fill(conn: sa.Connection) -> list[dict[str, Any]]:
    page = (
        sa.select(_events.c.position, _events.c.data)
        .where(_events.c.type == EXPIRED)
        .where(_events.c.position > sa.bindparam("after"))
        .order_by(_events.c.position)
        .limit(PAGE)
    )
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        rows = conn.execute(page, {"after": after}).all()
        if not rows:
            return found
        for position, data in rows:
            decisions, authenticated_by = derive(data)
            if decisions is not None or authenticated_by is not None:
                found.append(
                    {"b_position": position, "b_decisions": decisions, "b_by": authenticated_by}
                )
        after = rows[-1][0]


@contextmanager
def _updates_allowed(conn: sa.Connection) -> Iterator[None]:
    """The append-only UPDATE trigger lifted for the block, restored as it was after it
    (inside this revision's transaction: no other session sees the table without it)."""
    if conn.dialect.name == "sqlite":
        had_trigger = conn.execute(
            sa.text(
                "SELECT 1 FROM sqlite_master WHERE type = 'trigger' "
                "AND name = 'symfonic_events_no_update'"
            )
        ).first() is not None
        if had_trigger:
            op.execute("DROP TRIGGER symfonic_events_no_update")
        yield
        if had_trigger:
            op.execute(SQLITE_NO_UPDATE_TRIGGER)
        return
    state = conn.execute(
        sa.text(
            "SELECT t.tgenabled FROM pg_trigger t "
            "WHERE t.tgrelid = 'symfonic_events'::regclass AND t.tgname = :name"
        ),
        {"name": POSTGRES_TRIGGER},
    ).scalar()
    restore = POSTGRES_RESTORE.get(str(state)) if state is not None else None
    if restore is not None:
        op.execute(f"ALTER TABLE symfonic_events DISABLE TRIGGER {POSTGRES_TRIGGER}")
    yield
    if restore is not None:
        op.execute(f"ALTER TABLE symfonic_events {restore} {POSTGRES_TRIGGER}")


def upgrade() -> None:
    conn = op.get_bind()
    params = _to_fill(conn)
    if not params:
        return  # nothing to fill: the triggers stay as they are
    update = (
        sa.update(_events)
        .where(_events.c.position == sa.bindparam("b_position"))
        .values(
            audit_decisions=sa.bindparam("b_decisions", type_=sa.JSON(none_as_null=True)),
            audit_authenticated_by=sa.bindparam("b_by"),
        )
    )
    with _updates_allowed(conn):
        conn.execute(update, params)


def downgrade() -> None:
    conn = op.get_bind()
    filled = sa.and_(
        _events.c.type == EXPIRED,
        sa.or_(
            _events.c.audit_decisions.is_not(None),
            _events.c.audit_authenticated_by.is_not(None),
        ),
    )
    if conn.execute(sa.select(_events.c.position).where(filled).limit(1)).first() is None:
        return
    with _updates_allowed(conn):
        emptied = {"audit_decisions": None, "audit_authenticated_by": None}
        conn.execute(sa.update(_events).where(filled).values(emptied))
