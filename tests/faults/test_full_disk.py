"""A write whose COMMIT failed (a full disk, a lost connection) says how to check it."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import psycopg
import pytest
from cli_helpers import run_cli

from symfonic_store import DatabaseError, InterruptStore
from symfonic_store.db.executor import PostgresCursorExecutor

SQLITE_FULL = 13


def commit_failure(backend: str) -> BaseException:
    """What the driver raises at COMMIT: SQLite's full disk, or PostgreSQL's lost connection."""
    if backend == "postgresql":
        return psycopg.OperationalError("server closed the connection unexpectedly")
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = SQLITE_FULL
    error.sqlite_errorname = "SQLITE_FULL"
    return error


def test_a_failed_commit_names_a_command_that_shows_the_thread(
    store: InterruptStore, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maybe-committed message names `replay` (not a command that does not exist), and it works."""
    store.pending("t-1")  # the schema check is done: the next commit is the write's
    if backend == "postgresql":
        # A COMMIT that fails is the transactional path's: on PostgreSQL a store method's
        # append is otherwise one autocommit call of symfonic_append, whose lost answer
        # tests/store/test_error_translation.py covers.
        store.runner.heads = None
    failure = commit_failure(backend)
    dialect = store.engine.dialect
    real_commit = dialect.do_commit
    real_pipeline_commit = PostgresCursorExecutor._commit_pipeline

    def commit_then_fail(dbapi_connection: Any) -> None:
        real_commit(dbapi_connection)
        raise failure

    def pipeline_commit_then_fail(self: Any, conn: Any) -> None:
        real_pipeline_commit(self, conn)
        raise failure

    monkeypatch.setattr(dialect, "do_commit", commit_then_fail)
    monkeypatch.setattr(PostgresCursorExecutor, "_commit_pipeline", pipeline_commit_then_fail)
    with pytest.raises(DatabaseError) as caught:
        store.record_route("t-1", "finish")
    monkeypatch.undo()

    message = str(caught.value)
    assert "history" not in message
    named = re.search(r"`symfonic-store (\w+) THREAD`", message)
    assert named is not None and named.group(1) == "replay", message
    shown = run_cli(named.group(1), "t-1", db=store.engine.url.render_as_string(hide_password=False))
    assert shown.returncode == 0, shown.stderr
    assert "route.decided" in shown.stdout
