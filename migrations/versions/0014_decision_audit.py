"""Who established an answer's actor, and a claim's decision (SPEC §12).

Frozen: this file imports nothing from ``symfonic_store``.

- ``symfonic_events.audit_authenticated_by``: an audit column (like those of
  ``0011_audit_columns``), on ``interrupt.resumed`` the copy of
  ``data["authenticated_by"]`` (``service:tokens``, ``service:jwt``,
  ``service:trusted-header``...), NULL elsewhere. ``verify`` recomputes it from the data.
- ``symfonic_claims.authenticated_by`` and ``symfonic_claims.decided``: what a gateway
  answer's first phase established (how its actor was authenticated, the decision it
  was admitted with), held until the claim settles into ``interrupt.resumed``.

The backfill: releases before this one never recorded ``authenticated_by``, so on a
database they wrote every new cell is NULL, which is what adding the column leaves. The
resumptions are still read, page by page, and any that does carry the key is filled in
(lifting the append-only UPDATE trigger inside this transaction, as 0011 does), so
``verify`` agrees with every row whoever wrote it. Claims in flight keep NULLs: their
answers are recorded with the decision computed when they settle.

The downgrade drops the columns: the events' data (hashed) still hold every value.

Revision ID: 0014_decision_audit
Revises: 0013_wakeup_drops
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_decision_audit"
down_revision: str | None = "0013_wakeup_drops"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RESUMED = "interrupt.resumed"
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
    sa.column("audit_authenticated_by", sa.Text()),
)


def _to_fill(conn: sa.Connection) -> list[dict[str, object]]:
    page = (
        sa.select(_events.c.position, _events.c.data)
        .where(_events.c.type == RESUMED)
        .where(_events.c.position > sa.bindparam("after"))
        .order_by(_events.c.position)
        .limit(PAGE)
    )
    found: list[dict[str, object]] = []
    after = 0
    while True:
        rows = conn.execute(page, {"after": after}).all()
        if not rows:
            return found
        for position, data in rows:
            value = data.get("authenticated_by") if isinstance(data, dict) else None
            if isinstance(value, str):
                found.append({"b_position": position, "b_value": value})
        after = rows[-1][0]


def _fill(conn: sa.Connection, params: list[dict[str, object]]) -> None:
    update = (
        sa.update(_events)
        .where(_events.c.position == sa.bindparam("b_position"))
        .values(audit_authenticated_by=sa.bindparam("b_value"))
    )
    if conn.dialect.name == "sqlite":
        had_trigger = conn.execute(
            sa.text(
                "SELECT 1 FROM sqlite_master WHERE type = 'trigger' "
                "AND name = 'symfonic_events_no_update'"
            )
        ).first() is not None
        if had_trigger:
            op.execute("DROP TRIGGER symfonic_events_no_update")
        conn.execute(update, params)
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
    conn.execute(update, params)
    if restore is not None:
        op.execute(f"ALTER TABLE symfonic_events {restore} {POSTGRES_TRIGGER}")


def upgrade() -> None:
    op.add_column("symfonic_events", sa.Column("audit_authenticated_by", sa.Text(), nullable=True))
    op.add_column("symfonic_claims", sa.Column("authenticated_by", sa.String(255), nullable=True))
    op.add_column("symfonic_claims", sa.Column("decided", sa.JSON(none_as_null=True), nullable=True))
    conn = op.get_bind()
    params = _to_fill(conn)
    if params:
        _fill(conn, params)


def downgrade() -> None:
    op.drop_column("symfonic_claims", "decided")
    op.drop_column("symfonic_claims", "authenticated_by")
    op.drop_column("symfonic_events", "audit_authenticated_by")
