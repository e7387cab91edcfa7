"""The single-append path (``store/single.py``) against the transactional path.

A store method's write to one thread runs its rules on the head the store kept of the
thread and writes in one step (SQLite: one short transaction whose UPDATE swaps the head;
PostgreSQL: one call of ``symfonic_append`` in autocommit). These tests run the same
scripted operations with the clock frozen through both paths and compare the events
(hashes included) and the projection (I6); show that a head another store moved costs a
fallback and never a wrong event; that repeated mints return False; that a connection lost
during the PostgreSQL call is reported as a write of unknown outcome; that ``verify``
checks the function; and that the migration adds and drops it.
"""

from __future__ import annotations

from typing import Any

import factories
import pytest
import sqlalchemy as sa
from consistency import assert_consistent
from freezegun import freeze_time
from langgraph.types import Command  # noqa: F401 -- imported before any frozen clock (pydantic)

from symfonic_store import (
    AsyncInterruptStore,
    DatabaseError,
    InterruptAlreadyResolvedError,
    InterruptStore,
    SymfonicStoreError,
)
from symfonic_store.db.executor import PostgresCursorExecutor
from symfonic_store.db.migrate import downgrade, upgrade
from symfonic_store.db.schema import events, threads
from symfonic_store.store import execute as execute_module
from symfonic_store.store.single import FALLBACK

T0 = "2026-03-01T09:00:00+00:00"
SIGNATURE = "symfonic_append(text, integer, text, text, json, json, json, json)"


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What each single-append attempt gave: "single" or "fallback"."""
    seen: list[str] = []
    original = execute_module.run_single

    def counting(conn: Any, op: Any, heads: Any) -> Any:
        result = original(conn, op, heads)
        seen.append("fallback" if result is FALLBACK else "single")
        return result

    monkeypatch.setattr(execute_module, "run_single", counting)
    return seen


def scenario(thread: str) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Mints, a repeat, a supersede, route decisions, resumes (one refused), an expiry, a
    recorded refusal, a stale router decision: every store method of the path."""
    a, b, c, d = (factories.pending(f"{x}" * 32, run_id="run-1") for x in "abcd")
    return [
        ("mint", (thread, a), {}),
        ("mint", (thread, a), {}),
        ("record_route", (thread, "interrupt"), {"run_id": "run-1"}),
        ("resume", (thread, a["interrupt_id"], {"ok": True}), {"actor": "alice"}),
        ("resume", (thread, a["interrupt_id"], {"ok": False}), {"actor": "bob"}),
        ("mint", (thread, b), {"actor": "agent"}),
        ("mint", (thread, c), {}),
        ("mint", (thread, a), {}),
        ("record_refusal", (thread, c["interrupt_id"], {"no": 1}), {"actor": "eve", "error": "policy"}),
        ("expire", (thread, c["interrupt_id"]), {"actor": "ops"}),
        ("record_router_decision", (thread, {"_interrupt_pending": d, "run_id": "run-2"}, "interrupt"), {}),
        ("record_route", (thread, "finish"), {}),
    ]


def run_scenario(store: InterruptStore, thread: str) -> list[Any]:
    results: list[Any] = []
    with freeze_time(T0) as clock:
        for method, args, kwargs in scenario(thread):
            clock.tick(1.0)
            try:
                results.append(repr(getattr(store, method)(*args, **kwargs)))
            except SymfonicStoreError as exc:
                results.append(type(exc).__name__)
    return results


EVENT_COLUMNS = [c for c in events.c if c.name not in ("position", "tx_id", "thread_id", "hash")]
THREAD_COLUMNS = [c for c in threads.c if c.name not in ("thread_id", "last_hash")]


def tables(store: InterruptStore, thread: str) -> tuple[list[Any], list[Any]]:
    """The thread's events and projection row, all but its id and its hashes (which cover
    the id); ``verify`` vouches for the hashes."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(*EVENT_COLUMNS).where(events.c.thread_id == thread).order_by(events.c.version)
        ).all()
        row = conn.execute(sa.select(*THREAD_COLUMNS).where(threads.c.thread_id == thread)).all()
    return [tuple(r) for r in rows], [tuple(r) for r in row]


def test_the_single_append_path_writes_what_the_transactional_path_writes(
    store: InterruptStore, migrated_url: str, paths: list[str]
) -> None:
    """Same operations, same frozen clock: identical results, events and projection rows;
    every hash chain verifies and the projection equals the fold of the log (I6)."""
    single = run_scenario(store, "t-one")
    assert paths.count("single") >= 8, paths  # the path was taken, not a silent fallback
    with InterruptStore(migrated_url) as plain:
        plain.runner.heads = None  # every write through the transactional path
        paths.clear()
        transactional = run_scenario(plain, "t-two")
    assert paths == []
    assert single == transactional
    assert single[1] == single[7] == "False"  # repeats of a mint
    assert single[4] == "InterruptAlreadyResolvedError"
    e1, r1 = tables(store, "t-one")
    e2, r2 = tables(store, "t-two")
    assert len(e1) == 13
    assert e1 == e2
    assert r1 == r2
    assert store.verify().ok
    assert_consistent(store)


async def test_the_async_store_takes_the_same_path(
    astore: AsyncInterruptStore, migrated_url: str, paths: list[str]
) -> None:
    a = factories.pending("a" * 32, run_id="r")
    with freeze_time(T0):
        assert await astore.mint("t-async", a) is True
        assert await astore.mint("t-async", a) is False
        await astore.record_route("t-async", "interrupt")
        await astore.resume("t-async", a["interrupt_id"], {"ok": True}, actor="alice")
    assert paths == ["single"] * 4
    with InterruptStore(migrated_url) as sync:
        assert [e.type for e in sync.history("t-async")] == [
            "interrupt.minted", "route.decided", "interrupt.resumed",
        ]
        assert_consistent(sync)


def test_a_head_moved_by_another_store_costs_a_fallback_never_a_wrong_event(
    store: InterruptStore, migrated_url: str, paths: list[str]
) -> None:
    a, b = factories.pending("a" * 32), factories.pending("b" * 32)
    assert store.mint("t", a) is True
    with InterruptStore(migrated_url) as other:  # another process, as far as the cache knows
        other.resume("t", a["interrupt_id"], {"ok": True}, actor="bob")
        assert other.mint("t", b) is True
    paths.clear()
    # The cache still holds a pending: the resume would be admitted on it. The head swap
    # fails, and the transactional path refuses the answer as the log says.
    with pytest.raises(InterruptAlreadyResolvedError):
        store.resume("t", a["interrupt_id"], {"ok": False}, actor="alice")
    assert paths == ["fallback"]
    store.record_route("t", "continue")
    assert paths == ["fallback", "single"]  # the fallback refreshed the head
    assert [(e.version, e.type) for e in store.history("t")] == [
        (1, "interrupt.minted"), (2, "interrupt.resumed"), (3, "interrupt.minted"),
        (4, "interrupt.resume_rejected"), (5, "route.decided"),
    ]
    assert store.verify().ok
    assert_consistent(store)


def test_repeats_of_a_mint_return_false_from_any_store(
    store: InterruptStore, migrated_url: str, paths: list[str]
) -> None:
    a, b = factories.pending("a" * 32), factories.pending("b" * 32)
    assert store.mint("t", a) is True
    assert store.mint("t", a) is False  # the cached pending marker proves it
    assert store.mint("t", b) is True
    assert store.mint("t", a) is False  # minted before: the database says so
    with InterruptStore(migrated_url) as other:  # no cached head: taken for a new thread
        assert other.mint("t", a) is False
        assert other.mint("t", b) is False
    assert [e.type for e in store.history("t")] == [
        "interrupt.minted", "interrupt.expired", "interrupt.minted",
    ]
    assert_consistent(store)


def test_a_resume_of_a_thread_the_store_never_wrote_goes_straight_to_the_transactional_path(
    store: InterruptStore, migrated_url: str, paths: list[str]
) -> None:
    a = factories.pending("a" * 32)
    with InterruptStore(migrated_url) as other:
        other.mint("t", a)
    paths.clear()
    store.resume("t", a["interrupt_id"], {"ok": True}, actor="alice")
    assert paths == ["fallback"]
    store.record_route("t", "continue")
    assert paths == ["fallback", "single"]


# --- PostgreSQL: the function ----------------------------------------------------------


@pytest.fixture
def pg_store(store: InterruptStore) -> InterruptStore:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("the one-call append is PostgreSQL's")
    return store


def test_a_connection_lost_during_the_call_is_a_write_of_unknown_outcome(
    pg_store: InterruptStore, monkeypatch: pytest.MonkeyPatch, paths: list[str]
) -> None:
    """The call is the commit: the driver's connection dies under it (closed by the test,
    so psycopg raises its real error), and the store says the write may have been saved."""
    a = factories.pending("a" * 32)
    original = PostgresCursorExecutor.call_once

    def lost(self: Any, conn: Any, *args: Any) -> Any:
        conn.connection.dbapi_connection.close()
        return original(self, conn, *args)

    monkeypatch.setattr(PostgresCursorExecutor, "call_once", lost)
    with pytest.raises(DatabaseError) as caught:
        pg_store.mint("t", a)
    assert caught.value.outcome_unknown is True
    assert "may or may not" in str(caught.value)
    monkeypatch.setattr(PostgresCursorExecutor, "call_once", original)
    assert pg_store.mint("t", a) is True  # nothing was written; the store goes on


def _alter(store: InterruptStore, sql: str) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql(sql)


@pytest.mark.parametrize(
    "damage, words",
    [
        (f"DROP FUNCTION {SIGNATURE}", "is missing"),
        (f"ALTER FUNCTION {SIGNATURE} RESET search_path", "does not pin its search_path"),
        (
            "CREATE OR REPLACE FUNCTION symfonic_append(p_thread text, p_version integer, "
            "p_hash text, p_probe text, p_row json, p_events json, p_opened json, "
            "p_closed json) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN 0; END $$",
            "was replaced",
        ),
    ],
)
def test_verify_reports_a_dropped_or_altered_function_and_appends_stay_right(
    pg_store: InterruptStore, damage: str, words: str, paths: list[str]
) -> None:
    assert pg_store.verify().ok
    _alter(pg_store, damage)
    report = pg_store.verify()
    assert not report.ok
    assert any(words in p and "symfonic_append" in p for p in report.guards), report.guards
    a = factories.pending("a" * 32)
    assert pg_store.mint("t", a) is True  # the transactional path still appends
    assert pg_store.mint("t", factories.pending("b" * 32)) is True
    assert [e.type for e in pg_store.history("t")] == [
        "interrupt.minted", "interrupt.expired", "interrupt.minted",
    ]
    with pg_store.engine.begin() as conn:
        from symfonic_store.db.guards import restore_guards

        restore_guards(conn)
    assert pg_store.verify().ok


def test_the_migration_adds_and_drops_the_function(store: InterruptStore) -> None:
    def present() -> bool:
        with store.engine.connect() as conn:
            return bool(conn.execute(sa.text(
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE p.proname = 'symfonic_append' AND n.nspname = current_schema()"
            )).scalar_one())

    postgres = store.engine.dialect.name == "postgresql"
    assert not postgres or present()
    with store.engine.begin() as conn:
        downgrade(conn, "0015_notify_cursors")
    assert not postgres or not present()
    with store.engine.begin() as conn:
        upgrade(conn)
    assert not postgres or present()
    store.close()
    with InterruptStore(str(store.engine.url.render_as_string(hide_password=False))) as again:
        a = factories.pending("a" * 32)
        assert again.mint("t", a) is True
        assert again.mint("t", a) is False
        assert again.verify().ok

