"""Audit columns written at append time: ``audit()`` reads columns, not every mint's JSON.

Frozen: this file imports nothing from ``symfonic_store``.

``audit()`` used to join each ``interrupt.minted`` event to its ending and decode both
events' ``data`` for every record. This revision adds to ``symfonic_events`` the values
the audit reports, copied from ``data`` (every cell NULL where it does not apply):

- on ``interrupt.minted``: ``audit_name`` (``data.name``), ``audit_payload`` (JSON,
  ``data.payload``), ``audit_minted_at`` (the marker's ``minted_at`` as a UTC timestamp,
  else the event's ``occurred_at``: the audit's ``minted_at``), ``audit_native`` (a
  LangGraph interrupt, ``data.source == "langgraph"``, rather than a seed marker);
- on ``interrupt.resumed``: ``audit_response`` (JSON, ``data.response``) and
  ``audit_decisions`` (JSON, ``data.decisions``, or ``[data.decision]``);
- on ``interrupt.expired``: ``audit_reason`` (``data.reason``);
- on ``interrupt.resume_rejected``: ``audit_reason`` (``data.why``), ``audit_error``.

Why columns on the event table, not a table of their own: they are written by the same
INSERT as the event (no second statement per append, nothing for ``rebuild_projection``
or ``archive`` to maintain: an archived thread's rows leave with their columns), and they
are part of the public table an auditor already reads with SQL.

They are derived, not evidence: the hash chain covers ``data``, not these copies, and
``verify`` recomputes each one from the hashed data and reports a copy that disagrees
(so "who approved what" cannot be changed through them unnoticed). Hence the downgrade
simply drops them: nothing is lost, the events' data still hold everything.

The backfill: the columns are added NULL (on both backends a change of the catalogue
only), then every existing mint, ending and refusal gets its values computed in Python
(the same function as the store's, copied here) and written by UPDATE, in pages by
position. The event table refuses UPDATE (append-only triggers), so the backfill lifts
the UPDATE trigger inside this migration's own transaction and restores it exactly
before the transaction ends (DDL is transactional on SQLite and PostgreSQL, so no other
session ever sees the table without it, and a failure rolls the whole revision back):

- SQLite: ``symfonic_events_no_update`` is dropped and created again with the text it
  was created with (the one ``verify`` compares the catalogue with);
- PostgreSQL: ``symfonic_events_no_update_delete`` is disabled and put back in the state
  it was in (``pg_trigger.tgenabled``; ALTER TABLE takes the table's ACCESS EXCLUSIVE
  lock, so no writer appends during the backfill). The ``BEFORE INSERT`` trigger that
  sets ``tx_id`` does not fire on UPDATE: read keys are unchanged.

An empty table (a new database) skips the backfill and leaves the triggers untouched.

Revision ID: 0011_audit_columns
Revises: 0010_parallel_writers
Create Date: 2026-12-09
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0011_audit_columns"
down_revision: str | None = "0010_parallel_writers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MINTED = "interrupt.minted"
RESUMED = "interrupt.resumed"
EXPIRED = "interrupt.expired"
RESUME_REJECTED = "interrupt.resume_rejected"
NATIVE_SOURCE = "langgraph"
PAGE = 1000

AUDIT_COLUMNS = (
    ("audit_name", sa.Text()),
    ("audit_payload", sa.JSON(none_as_null=True)),
    ("audit_minted_at", sa.DateTime(timezone=True)),
    ("audit_native", sa.Boolean()),
    ("audit_response", sa.JSON(none_as_null=True)),
    ("audit_decisions", sa.JSON(none_as_null=True)),
    ("audit_reason", sa.Text()),
    ("audit_error", sa.Text()),
)

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


def _minted_at(data: dict[str, Any], occurred_at: datetime) -> datetime:
    minted_at = data.get("minted_at")
    if isinstance(minted_at, int | float) and not isinstance(minted_at, bool):
        try:
            return datetime.fromtimestamp(minted_at, UTC)
        except (OverflowError, OSError, ValueError):
            return occurred_at
    return occurred_at


def derive(type_: str, data: dict[str, Any], occurred_at: datetime) -> dict[str, Any]:
    """The audit columns of one event (a copy of symfonic_store.audit_columns.derive)."""
    values: dict[str, Any] = {name: None for name, _ in AUDIT_COLUMNS}
    if type_ == MINTED:
        values["audit_name"] = data.get("name")
        values["audit_payload"] = data.get("payload")
        values["audit_minted_at"] = _minted_at(data, occurred_at)
        values["audit_native"] = data.get("source") == NATIVE_SOURCE
    elif type_ == RESUMED:
        values["audit_response"] = data.get("response")
        if "decisions" in data:
            found = data["decisions"]
            values["audit_decisions"] = list(found) if isinstance(found, list) else None
        elif "decision" in data:
            values["audit_decisions"] = [data["decision"]]
    elif type_ == EXPIRED:
        values["audit_reason"] = data.get("reason")
    elif type_ == RESUME_REJECTED:
        values["audit_reason"] = data.get("why")
        values["audit_error"] = data.get("error")
    return values


_events = sa.table(
    "symfonic_events",
    sa.column("position", sa.BigInteger()),
    sa.column("type", sa.String(64)),
    sa.column("data", sa.JSON()),
    sa.column("occurred_at", sa.DateTime(timezone=True)),
    *(sa.column(name, type_) for name, type_ in AUDIT_COLUMNS),
)


def _utc(moment: datetime, *, sqlite: bool) -> datetime:
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.replace(tzinfo=None) if sqlite else aware  # SQLite keeps naive UTC


def _backfill(conn: sa.Connection, *, sqlite: bool) -> None:
    page = (
        sa.select(_events.c.position, _events.c.type, _events.c.data, _events.c.occurred_at)
        .where(_events.c.type.in_((MINTED, RESUMED, EXPIRED, RESUME_REJECTED)))
        .where(_events.c.position > sa.bindparam("after"))
        .order_by(_events.c.position)
        .limit(PAGE)
    )
    update = (
        sa.update(_events)
        .where(_events.c.position == sa.bindparam("b_position"))
        .values({name: sa.bindparam(f"b_{name}", type_=type_) for name, type_ in AUDIT_COLUMNS})
    )
    after = 0
    while True:
        rows = conn.execute(page, {"after": after}).all()
        if not rows:
            return
        params = []
        for position, type_, data, occurred_at in rows:
            values = derive(type_, data, _utc(occurred_at, sqlite=False))
            if values["audit_minted_at"] is not None:
                values["audit_minted_at"] = _utc(values["audit_minted_at"], sqlite=sqlite)
            params.append({"b_position": position, **{f"b_{k}": v for k, v in values.items()}})
        conn.execute(update, params)
        after = rows[-1][0]


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    for name, type_ in AUDIT_COLUMNS:
        op.add_column("symfonic_events", sa.Column(name, type_, nullable=True))
    if conn.execute(sa.text("SELECT 1 FROM symfonic_events LIMIT 1")).first() is None:
        return  # nothing to backfill: the triggers stay as they are
    if sqlite:
        had_trigger = conn.execute(
            sa.text(
                "SELECT 1 FROM sqlite_master WHERE type = 'trigger' "
                "AND name = 'symfonic_events_no_update'"
            )
        ).first() is not None
        if had_trigger:
            op.execute("DROP TRIGGER symfonic_events_no_update")
        _backfill(conn, sqlite=True)
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
    _backfill(conn, sqlite=False)
    if restore is not None:
        op.execute(f"ALTER TABLE symfonic_events {restore} {POSTGRES_TRIGGER}")


def downgrade() -> None:
    # Derived copies only: the events' data (hashed) still hold every value.
    for name, _ in reversed(AUDIT_COLUMNS):
        op.drop_column("symfonic_events", name)
