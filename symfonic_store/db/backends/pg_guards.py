"""PostgreSQL's append-only guards of the event table as ``pg_trigger`` shows them, their
restore, and the archive's one way past them (see :mod:`symfonic_store.db.guards`).

Two triggers on one function. ``ALTER TABLE ... DISABLE TRIGGER`` leaves them in the
catalog with ``tgenabled = 'D'`` (``'R'``: fires only for replicas), which
:func:`guard_problems` reports, as it does a replaced function body. The archive's
removal runs through ``symfonic_archive_remove``, a ``SECURITY DEFINER`` function of the
tables' owner: a role that is not the owner has no other way to delete events.
``SET session_replication_role = replica`` skips triggers for one session and leaves no
trace in the catalog: only the checkpoints show what such a session changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..pg_append import APPEND_FUNCTION, POSTGRES_APPEND_FUNCTION, POSTGRES_PIN_APPEND_PATH
from ..schema import (
    EVENTS_TABLE,
    POSTGRES_APPEND_ONLY_FUNCTION,
    POSTGRES_APPEND_ONLY_TRIGGER_NAMES,
    POSTGRES_APPEND_ONLY_TRIGGERS,
    POSTGRES_DROP_TX_ID_TRIGGER,
    POSTGRES_TX_ID_TRIGGER,
    POSTGRES_TX_ID_TRIGGER_NAME,
)
from .base import GUARD_CHECK, GUARD_RESTORE, sql_words, trigger_missing

ENABLED = frozenset({"O", "A"})
"""``pg_trigger.tgenabled`` values under which a trigger fires in an ordinary session."""

_TRIGGERS = sa.text(
    "SELECT t.tgname, t.tgenabled, p.proname, p.prosrc FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_proc p ON p.oid = t.tgfoid "
    "WHERE c.relname = :table AND n.nspname = current_schema() AND NOT t.tgisinternal"
)
_FUNCTION = sa.text(
    "SELECT p.prosrc, p.proconfig, quote_ident(current_schema()) FROM pg_proc p "
    "JOIN pg_namespace n ON n.oid = p.pronamespace "
    "WHERE p.proname = :name AND n.nspname = current_schema()"
)
_REMOVE = sa.text("SELECT symfonic_archive_remove(CAST(:heads AS jsonb))")


def _body(create_function: str) -> str:
    """The body between the ``$$`` of a CREATE FUNCTION (what ``pg_proc.prosrc`` keeps)."""
    match = re.search(r"\$\$(.*)\$\$", create_function, re.S)
    assert match is not None
    return sql_words(match.group(1))


_EXPECTED_BODY = _body(POSTGRES_APPEND_ONLY_FUNCTION)
_TX_ID_BODY = _body(POSTGRES_TX_ID_TRIGGER[0])
_APPEND_BODY = _body(POSTGRES_APPEND_FUNCTION)
_STATES = {"D": "disabled", "R": "enabled for replication sessions only"}


def guard_problems(conn: Connection) -> list[str]:
    rows = conn.execute(_TRIGGERS, {"table": EVENTS_TABLE}).all()
    found = {str(r[0]): r for r in rows}
    problems = []
    for name in POSTGRES_APPEND_ONLY_TRIGGER_NAMES:
        row = found.get(name)
        if row is None:
            problems.append(trigger_missing(name, EVENTS_TABLE))
            continue
        state = str(row[1])
        if state not in ENABLED:
            problems.append(
                f"the append-only trigger {name} on {EVENTS_TABLE} is "
                f"{_STATES.get(state, f'in state {state!r}')} "
                f"(`symfonic-store db guards --restore` turns it back on; {GUARD_CHECK})"
            )
        if sql_words(str(row[3])) != _EXPECTED_BODY:
            problems.append(
                f"the function {row[2]}() behind the append-only trigger {name} was replaced "
                f"by one that does not refuse the write ({GUARD_RESTORE}; {GUARD_CHECK})"
            )
    order = found.get(POSTGRES_TX_ID_TRIGGER_NAME)
    if order is None or str(order[1]) not in ENABLED or sql_words(str(order[3])) != _TX_ID_BODY:
        what = "missing" if order is None else (
            _STATES.get(str(order[1]), "replaced") if str(order[1]) not in ENABLED else "replaced"
        )
        problems.append(
            f"the read-order trigger {POSTGRES_TX_ID_TRIGGER_NAME} on {EVENTS_TABLE} is {what}: "
            "events appended meanwhile keep their transaction's id as read key, so a "
            f"thread's events may be read out of version order ({GUARD_RESTORE})"
        )
    problems.extend(append_function_problems(conn))
    return problems


def append_function_problems(conn: Connection) -> list[str]:
    """The one-call append (``symfonic_append``) as the catalog shows it: there, its body
    the migration's, its ``search_path`` pinned to this schema (so no table of another
    schema can stand in for the store's)."""
    rows = conn.execute(_FUNCTION, {"name": APPEND_FUNCTION}).all()
    if not rows:
        return [
            f"the append function {APPEND_FUNCTION}() is missing: appends take the slower "
            f"transactional path ({GUARD_RESTORE})"
        ]
    problems = []
    for body, config, schema in rows:
        if sql_words(str(body)) != _APPEND_BODY:
            problems.append(
                f"the append function {APPEND_FUNCTION}() was replaced by one that is not the "
                f"store's: it may skip the writers' lock or the head check ({GUARD_RESTORE}; "
                f"{GUARD_CHECK})"
            )
        if f"search_path={schema}, pg_temp" not in (config or []):
            problems.append(
                f"the append function {APPEND_FUNCTION}() does not pin its search_path to "
                f"this schema: it may write another schema's tables ({GUARD_RESTORE})"
            )
    return problems


def restore_guards(conn: Connection) -> None:
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
    conn.execute(sa.text(POSTGRES_APPEND_FUNCTION))
    conn.execute(sa.text(POSTGRES_PIN_APPEND_PATH))
    # The audit's rows' triggers (0025) back on, if a `DISABLE TRIGGER ALL` took them too
    # (rows appended meanwhile are missing: `projection rebuild` writes them).
    conn.execute(sa.text(_ENABLE_AUDIT_ROWS))


_ENABLE_AUDIT_ROWS = (
    "DO $enable$ BEGIN "
    f"ALTER TABLE {EVENTS_TABLE} ENABLE TRIGGER symfonic_audit_rows_insert; "
    f"ALTER TABLE {EVENTS_TABLE} ENABLE TRIGGER symfonic_audit_rows_removed; "
    "EXCEPTION WHEN undefined_object THEN NULL; END $enable$"
)


def remove_archived(conn: Connection, heads: Sequence[dict[str, Any]]) -> int:
    # The function checks each head against the archive's record and the thread's last
    # event before it deletes anything.
    return int(conn.execute(_REMOVE, {"heads": json.dumps(list(heads))}).scalar_one())
