"""SQLite (pysqlite, aiosqlite): WAL, a busy timeout and BEGIN IMMEDIATE for writers, so
one writer at a time and positions that commit in order; its triggers as
``sqlite_master`` shows them; errors by extended result code; ``SqliteSaver``'s tables.

Whoever can write the file can drop the triggers (or remove them from ``sqlite_master``
through ``PRAGMA writable_schema``); :meth:`SQLiteBackend.guard_problems` sees that
afterwards, and the signed checkpoints are the defence against what was done meanwhile.
The archive drops and recreates the triggers inside its own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine

from ...errors import InvalidInputError
from ..checkpoint_tables import SQLITE, Layout
from ..executors.base import Executor, in_driver_transaction
from ..executors.cursor import SQLiteCursorExecutor
from ..schema import (
    EVENTS_TABLE,
    SQLITE_APPEND_ONLY_TRIGGER_NAMES,
    SQLITE_APPEND_ONLY_TRIGGERS,
    events,
)
from .base import (
    GUARD_CHECK,
    GUARD_RESTORE,
    Backend,
    DriverCode,
    EngineOptions,
    run_on_driver,
    sql_words,
    trigger_missing,
)

SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SYNCHRONOUS_PRAGMA = {mode: "PRAGMA synchronous=" + mode for mode in SQLITE_SYNCHRONOUS}

# Result codes (https://sqlite.org/rescode.html); the primary code is the low byte.
SQLITE_ERROR = 1
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_CONSTRAINT = 19
SQLITE_CONSTRAINT_PRIMARYKEY = 1555
SQLITE_CONSTRAINT_UNIQUE = 2067
SQLITE_RACES = frozenset({SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE})
"""Every unique key of the store's schema is a concurrency guard (SQLite does not name
the constraint in a code), so a unique or primary-key violation is a lost race."""
SQLITE_REFUSALS = {
    "SQLITE_CONSTRAINT_TRIGGER": "a trigger refused it (the event table is append-only)",
    "SQLITE_CONSTRAINT_NOTNULL": "a required column got no value (NOT NULL)",
    "SQLITE_CONSTRAINT_FOREIGNKEY": "a foreign key has no matching row",
    "SQLITE_CONSTRAINT_CHECK": "a CHECK constraint failed",
}

_TRIGGERS = sa.text(
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :table"
)
_EXPECTED = {
    name: sql_words(sql)
    for name, sql in zip(SQLITE_APPEND_ONLY_TRIGGER_NAMES, SQLITE_APPEND_ONLY_TRIGGERS, strict=True)
}


def _primary(code: DriverCode) -> int | None:
    return None if code.number is None else code.number & 0xFF


class SQLiteBackend(Backend):
    """SQLite: one writer at a time (BEGIN IMMEDIATE), positions committed in order."""

    name = "sqlite"
    driver_modules = ("sqlite3",)  # aiosqlite raises sqlite3's errors too
    sync_driver = "sqlite+pysqlite"
    async_driver = "sqlite+aiosqlite"
    checkpoint_saver = "sqlite"
    in_process = True

    @classmethod
    def database_file(cls, url: URL) -> Path | None:
        """The file of ``sqlite:///path``; None in memory, or for a ``file:`` URI (SQLite
        decides what its name means)."""
        database = url.database
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        return Path(database)

    @classmethod
    def prepare_url(cls, url: URL) -> None:
        """A newcomer's ``sqlite:///data/store.db`` should just work: create the folder."""
        file = cls.database_file(url)
        if file is not None:
            folder = file.expanduser().parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except (OSError, ValueError) as exc:
                raise InvalidInputError(
                    "database URL",
                    f"cannot create the folder {str(folder)!r} for the SQLite file "
                    f"({getattr(exc, 'strerror', None) or exc}); choose a writable path",
                ) from None

    def prepare(self, engine: Engine, options: EngineOptions) -> None:
        """WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for writers.

        pysqlite's own transaction handling is switched off so SQLAlchemy's BEGIN is the
        real one: a write transaction takes the write lock at BEGIN (IMMEDIATE), so two
        writers queue on the busy timeout instead of deadlocking on a lock upgrade.
        """
        busy_timeout_ms = options.busy_timeout_ms
        synchronous = _SYNCHRONOUS_PRAGMA[options.sqlite_synchronous]

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
                # PRAGMA values cannot be bound parameters: the timeout is an int and the
                # mode one of SQLITE_SYNCHRONOUS, both checked by db.engines.
                cursor.execute("PRAGMA busy_timeout=" + str(int(busy_timeout_ms)))
                cursor.execute("PRAGMA foreign_keys=ON")
                cursor.execute(synchronous)
            finally:
                cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            if in_driver_transaction(connection):
                return  # a statement through SQLAlchemy joins the fast path's transaction
            write = bool(connection.get_execution_options().get("symfonic_write"))
            for statement in self.begin_statements(None, write=write, appends=True):
                run_on_driver(connection, statement)

    def begin_statements(self, dbapi_connection: Any, *, write: bool, appends: bool) -> tuple[str, ...]:
        """BEGIN IMMEDIATE for a write: it takes the database's write lock at once."""
        return ("BEGIN IMMEDIATE",) if write else ("BEGIN",)

    def _fast_executor(self) -> Executor | None:
        return SQLiteCursorExecutor(self)

    # --- guards -------------------------------------------------------------------

    def guard_problems(self, conn: Connection) -> list[str]:
        found = {str(n): str(s or "") for n, s in conn.execute(_TRIGGERS, {"table": EVENTS_TABLE})}
        problems = []
        for name, expected in _EXPECTED.items():
            if name not in found:
                problems.append(trigger_missing(name, EVENTS_TABLE))
            elif sql_words(found[name]) != expected:
                problems.append(
                    f"the append-only trigger {name} on {EVENTS_TABLE} was replaced by one that "
                    f"does not refuse the write ({GUARD_RESTORE}; {GUARD_CHECK})"
                )
        return problems

    def restore_guards(self, conn: Connection) -> None:
        for name in SQLITE_APPEND_ONLY_TRIGGER_NAMES:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        for statement in SQLITE_APPEND_ONLY_TRIGGERS:
            conn.exec_driver_sql(statement)

    def remove_archived(self, conn: Connection, heads: Sequence[dict[str, Any]]) -> int:
        # DDL is transactional, so the triggers are gone for this transaction only; a
        # crash before COMMIT rolls their removal back with everything else.
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

    # --- error codes --------------------------------------------------------------

    # Alike postgres.py's driver_code in shape only: each reads its own driver's error attributes.
    @classmethod
    def driver_code(cls, orig: BaseException) -> DriverCode | None:
        number = getattr(orig, "sqlite_errorcode", None)
        if not isinstance(number, int):
            return None
        name = getattr(orig, "sqlite_errorname", None)
        return DriverCode(code=name if isinstance(name, str) else None, number=number)

    @classmethod
    def is_race(cls, code: DriverCode) -> bool:
        return code.number in SQLITE_RACES

    @classmethod
    def is_integrity(cls, exc: BaseException, code: DriverCode) -> bool:
        return _primary(code) == SQLITE_CONSTRAINT

    @classmethod
    def is_busy(cls, code: DriverCode) -> bool:
        return _primary(code) in (SQLITE_BUSY, SQLITE_LOCKED)

    @classmethod
    def is_schema_suspect(cls, code: DriverCode) -> bool:
        return _primary(code) == SQLITE_ERROR

    @classmethod
    def refusal(cls, code: DriverCode) -> tuple[str, str]:
        what, label = super().refusal(code)
        return SQLITE_REFUSALS.get(code.code or "", what), label

    # --- LangGraph's checkpoint tables ----------------------------------------------

    @property
    def checkpoint_layout(self) -> Layout:
        return SQLITE
