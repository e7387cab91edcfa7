"""The append-only guards of the event table (I1) as the catalog shows them, and the
archive's one way past them (SPEC §10).

This is the one module that knows how each backend guards the table:

- SQLite: two triggers. Whoever can write the file can drop them (or remove them from
  ``sqlite_master`` through ``PRAGMA writable_schema``); :func:`guard_problems` sees that
  afterwards, and the signed checkpoints are the defence against what was done meanwhile.
  The archive drops and recreates the triggers inside its own transaction.
- PostgreSQL: two triggers on one function. ``ALTER TABLE ... DISABLE TRIGGER`` leaves
  them in the catalog with ``tgenabled = 'D'`` (``'R'``: fires only for replicas), which
  :func:`guard_problems` reports, as it does a replaced function body. The archive's
  removal runs through ``symfonic_archive_remove``, a ``SECURITY DEFINER`` function of
  the tables' owner: a role that is not the owner has no other way to delete events.
  ``SET session_replication_role = replica`` skips triggers for one session and leaves no
  trace in the catalog: only the checkpoints show what such a session changed.

Every problem :func:`guard_problems` reports names ``db guards --restore``
(:func:`restore_guards`), which recreates the guards from the migrations' statements: a
downgrade would drop the events along with the triggers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .schema import (
    EVENTS_TABLE,
    POSTGRES_APPEND_ONLY_FUNCTION,
    POSTGRES_APPEND_ONLY_TRIGGER_NAMES,
    POSTGRES_APPEND_ONLY_TRIGGERS,
    POSTGRES_DROP_TX_ID_TRIGGER,
    POSTGRES_TX_ID_TRIGGER,
    POSTGRES_TX_ID_TRIGGER_NAME,
    SQLITE_APPEND_ONLY_TRIGGER_NAMES,
    SQLITE_APPEND_ONLY_TRIGGERS,
    events,
)

RESTORE = "`symfonic-store db guards --restore` recreates it"
"""What every guard problem advises: never a downgrade, which would drop the events."""
CHECK = "check the signed checkpoints for what changed meanwhile"

ENABLED = frozenset({"O", "A"})
"""``pg_trigger.tgenabled`` values under which a trigger fires in an ordinary session."""

_SQLITE_TRIGGERS = sa.text(
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :table"
)
_PG_TRIGGERS = sa.text(
    "SELECT t.tgname, t.tgenabled, p.proname, p.prosrc FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_proc p ON p.oid = t.tgfoid "
    "WHERE c.relname = :table AND n.nspname = current_schema() AND NOT t.tgisinternal"
)
_PG_REMOVE = sa.text("SELECT symfonic_archive_remove(CAST(:heads AS jsonb))")


def _words(sql: str) -> str:
    """SQL text compared word by word: the catalog may keep other whitespace."""
    return " ".join(sql.split()).rstrip(";").strip()


def _pg_body(create_function: str) -> str:
    """The body between the ``$$`` of a CREATE FUNCTION (what ``pg_proc.prosrc`` keeps)."""
    match = re.search(r"\$\$(.*)\$\$", create_function, re.S)
    assert match is not None
    return _words(match.group(1))


_SQLITE_EXPECTED = {
    name: _words(sql) for name, sql in zip(SQLITE_APPEND_ONLY_TRIGGER_NAMES, SQLITE_APPEND_ONLY_TRIGGERS, strict=True)
}
_PG_EXPECTED_BODY = _pg_body(POSTGRES_APPEND_ONLY_FUNCTION)
_PG_TX_ID_BODY = _pg_body(POSTGRES_TX_ID_TRIGGER[0])
_PG_STATES = {"D": "disabled", "R": "enabled for replication sessions only"}


def guard_problems(conn: Connection) -> list[str]:
    """What is wrong with the append-only triggers of the event table (empty: none)."""
    if conn.dialect.name == "sqlite":
        return _sqlite_problems(conn)
    return _postgres_problems(conn)


def _sqlite_problems(conn: Connection) -> list[str]:
    found = {str(n): str(s or "") for n, s in conn.execute(_SQLITE_TRIGGERS, {"table": EVENTS_TABLE})}
    problems = []
    for name, expected in _SQLITE_EXPECTED.items():
        if name not in found:
            problems.append(
                f"the append-only trigger {name} is missing from {EVENTS_TABLE}: events can be "
                f"changed or deleted with plain SQL ({RESTORE}; {CHECK})"
            )
        elif _words(found[name]) != expected:
            problems.append(
                f"the append-only trigger {name} on {EVENTS_TABLE} was replaced by one that "
                f"does not refuse the write ({RESTORE}; {CHECK})"
            )
    return problems


def _postgres_problems(conn: Connection) -> list[str]:
    rows = conn.execute(_PG_TRIGGERS, {"table": EVENTS_TABLE}).all()
    found = {str(r[0]): r for r in rows}
    problems = []
    for name in POSTGRES_APPEND_ONLY_TRIGGER_NAMES:
        row = found.get(name)
        if row is None:
            problems.append(
                f"the append-only trigger {name} is missing from {EVENTS_TABLE}: events can be "
                f"changed or deleted with plain SQL ({RESTORE}; {CHECK})"
            )
            continue
        state = str(row[1])
        if state not in ENABLED:
            problems.append(
                f"the append-only trigger {name} on {EVENTS_TABLE} is "
                f"{_PG_STATES.get(state, f'in state {state!r}')} "
                f"(`symfonic-store db guards --restore` turns it back on; {CHECK})"
            )
        if _words(str(row[3])) != _PG_EXPECTED_BODY:
            problems.append(
                f"the function {row[2]}() behind the append-only trigger {name} was replaced "
                f"by one that does not refuse the write ({RESTORE}; {CHECK})"
            )
    order = found.get(POSTGRES_TX_ID_TRIGGER_NAME)
    if order is None or str(order[1]) not in ENABLED or _words(str(order[3])) != _PG_TX_ID_BODY:
        what = "missing" if order is None else (
            _PG_STATES.get(str(order[1]), "replaced") if str(order[1]) not in ENABLED else "replaced"
        )
        problems.append(
            f"the read-order trigger {POSTGRES_TX_ID_TRIGGER_NAME} on {EVENTS_TABLE} is {what}: "
            "events appended meanwhile keep their transaction's id as read key, so a "
            f"thread's events may be read out of version order ({RESTORE})"
        )
    return problems


def restore_guards(conn: Connection) -> None:
    """Recreate the event table's guards exactly as the migrations define them at head.

    Every guard :func:`guard_problems` checks is dropped (if there) and created again
    from the statements the migrations run, in the caller's transaction (DDL is
    transactional on both backends): a missing, disabled or replaced trigger, or a
    replaced trigger function, is back as ``db upgrade`` made it. Events are untouched;
    what happened while a guard was off is for the signed checkpoints to show. The
    caller checks that the schema is at head first.
    """
    if conn.dialect.name == "sqlite":
        for name in SQLITE_APPEND_ONLY_TRIGGER_NAMES:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        for statement in SQLITE_APPEND_ONLY_TRIGGERS:
            conn.exec_driver_sql(statement)
        return
    # As the migrations run them (text(): the bodies hold a literal `%`). First
    # 0001_event_log's function as 0009_archive replaced it (CREATE OR REPLACE keeps its
    # owner and grants), then its two triggers, then 0010's read-key trigger.
    statements = [
        POSTGRES_APPEND_ONLY_FUNCTION,
        *(f"DROP TRIGGER IF EXISTS {name} ON {EVENTS_TABLE}" for name in POSTGRES_APPEND_ONLY_TRIGGER_NAMES),
        *POSTGRES_APPEND_ONLY_TRIGGERS[1:],  # [0] creates the function
        *POSTGRES_DROP_TX_ID_TRIGGER,
        *POSTGRES_TX_ID_TRIGGER,
    ]
    for statement in statements:
        conn.execute(sa.text(statement))


def remove_archived(conn: Connection, heads: Sequence[dict[str, Any]]) -> int:
    """Delete the events of whole archived threads, up to each ``{thread_id, version,
    last_hash}`` head; returns the number of events removed.

    The caller has recorded the archive (``symfonic_archived_threads``) in the same
    transaction. On PostgreSQL the function checks each head against that record and
    the thread's last event before it deletes anything.
    """
    if not heads:
        return 0
    if conn.dialect.name == "postgresql":
        return int(conn.execute(_PG_REMOVE, {"heads": json.dumps(list(heads))}).scalar_one())
    # SQLite: DDL is transactional, so the triggers are gone for this transaction only;
    # a crash before COMMIT rolls their removal back with everything else.
    for name in SQLITE_APPEND_ONLY_TRIGGER_NAMES:
        conn.exec_driver_sql(f"DROP TRIGGER {name}")
    delete = events.delete().where(
        events.c.thread_id == sa.bindparam("t"), events.c.version <= sa.bindparam("v")
    )
    removed = 0
    for head in heads:
        result = conn.execute(delete, {"t": head["thread_id"], "v": head["version"]})
        removed += int(result.rowcount)
    for statement in SQLITE_APPEND_ONLY_TRIGGERS:
        conn.exec_driver_sql(statement)
    return removed
