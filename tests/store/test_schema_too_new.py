"""A database migrated by a newer release: every entry point says so, and nothing is changed.

The store's version table holding a revision this release does not ship means a newer
release migrated the database (the table is the store's own). ``setup()``, every other
store call and ``symfonic-store db upgrade`` / ``db current`` raise (or exit 2 with)
``SchemaTooNewError`` -- "upgrade symfonic-store" -- instead of a raw Alembic error or
advice to run ``db upgrade``, which could not work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli

from symfonic_store import (
    AsyncInterruptStore,
    InterruptStore,
    SchemaNotMigratedError,
    SchemaTooNewError,
    SymfonicStoreError,
    build_interrupt_marker,
)
from symfonic_store.db.migrate import head_revision
from symfonic_store.db.schema import VERSION_TABLE

FUTURE = "9999_from_a_newer_release"

_version = sa.table(VERSION_TABLE, sa.column("version_num"))


def stamp(db_url: str, revision: str) -> None:
    """Migrate to head, then leave the version table as a newer release would."""
    with InterruptStore(db_url) as store:
        store.setup()
        store.mint("t-1", build_interrupt_marker(name="n", interrupt_id="i-1", payload={}))
        with store.engine.begin() as conn:
            conn.execute(_version.update().values(version_num=revision))


def stamped_revision(db_url: str) -> str:
    with InterruptStore(db_url) as store, store.engine.connect() as conn:
        return str(conn.execute(sa.select(_version.c.version_num)).scalar_one())


def expected_message() -> str:
    return (
        f"the database is at revision {FUTURE}, newer than this release's head "
        f"{head_revision()}: upgrade symfonic-store"
    )


def assert_too_new(error: BaseException) -> None:
    assert isinstance(error, SchemaTooNewError)
    assert isinstance(error, SchemaNotMigratedError)  # code that stops on a mismatch stops here
    assert str(error) == expected_message()
    assert error.current == FUTURE and error.head == head_revision()
    assert "db upgrade" not in str(error)


def test_setup_on_a_newer_database_says_to_upgrade_the_package(db_url: str) -> None:
    """setup() raises SchemaTooNewError (not Alembic's error) and leaves the database as it was."""
    stamp(db_url, FUTURE)
    with InterruptStore(db_url) as store:
        with pytest.raises(SymfonicStoreError) as caught:
            store.setup()
    assert_too_new(caught.value)
    assert stamped_revision(db_url) == FUTURE


CALLS: dict[str, Callable[[InterruptStore], Any]] = {
    "pending": lambda s: s.pending("t-1"),
    "events": lambda s: s.events(),
    "mint": lambda s: s.mint("t-2", build_interrupt_marker(name="n", interrupt_id="i-2", payload={})),
    "resume": lambda s: s.resume("t-1", "i-1", {"ok": True}, actor="alice"),
    "sweep": lambda s: s.sweep(ttl_seconds=1),
    "iter_events": lambda s: list(s.iter_events()),
    "verify": lambda s: s.verify(),
}


@pytest.mark.parametrize("call", list(CALLS), ids=list(CALLS))
def test_every_store_call_on_a_newer_database_says_to_upgrade_the_package(db_url: str, call: str) -> None:
    """The schema check of each store call raises SchemaTooNewError, not 'run db upgrade'."""
    stamp(db_url, FUTURE)
    with InterruptStore(db_url) as store:
        with pytest.raises(SymfonicStoreError) as caught:
            CALLS[call](store)
    assert_too_new(caught.value)


async def test_the_asyncio_store_on_a_newer_database_says_the_same(db_url: str) -> None:
    """AsyncInterruptStore.setup() and its calls raise the same SchemaTooNewError."""
    stamp(db_url, FUTURE)
    store = AsyncInterruptStore(db_url)
    try:
        with pytest.raises(SymfonicStoreError) as caught:
            await store.setup()
        assert_too_new(caught.value)
        with pytest.raises(SymfonicStoreError) as caught:
            await store.events()
        assert_too_new(caught.value)
    finally:
        await store.aclose()


@pytest.mark.parametrize("command", [["db", "upgrade"], ["db", "current"], ["db", "downgrade", "base"], ["pending"]])
def test_the_cli_on_a_newer_database_exits_2_with_one_line(db_url: str, command: list[str]) -> None:
    """`db upgrade`, `db current` (and the rest) exit 2 with the one line that says to upgrade the package."""
    stamp(db_url, FUTURE)
    result = run_cli(*command, db=db_url)
    line = assert_clean_error(result, 2)
    assert line == f"symfonic-store: error: {expected_message()}"
    assert result.stdout == ""
    assert stamped_revision(db_url) == FUTURE
