"""The cursor fast paths and SQLAlchemy Core give the same answers, statement for statement.

The fast paths (``symfonic_store/db/executor.py``) compile each Core statement once and run
it on the driver's cursor, with the driver's own BEGIN and COMMIT (on PostgreSQL in psycopg's
pipeline mode); switched off (engine option ``symfonic_fast_path=False``, or any
``before_cursor_execute`` listener) every statement goes through ``Connection.execute``.
The same scripted scenario -- mint, supersede, route decisions, resume, a refused resume,
expire, sweep, and every read -- runs with the clock frozen on one store of each kind, sync
and asyncio, on SQLite and PostgreSQL, and must return identical results (positions,
timestamps and hashes included) and leave identical tables. SQLite's own trace of what it
ran shows that both run the same statements, and that with the fast path off SQLAlchemy's
statement events see every one; on PostgreSQL a listener turns the fast path off too.
The asyncio PostgreSQL driver has no fast path: it always runs on the Core executor.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from conftest import postgres_base_url, with_search_path
from freezegun import freeze_time
from langgraph.types import Command
from sqlalchemy import event

from symfonic_store import (
    AsyncInterruptStore,
    InterruptStore,
    SymfonicStoreError,
)
from symfonic_store.audit_columns import AUDIT_COLUMNS
from symfonic_store.db.executor import (
    FAST_PATH_OPTION,
    CoreExecutor,
    PostgresCursorExecutor,
    PostgresExecutor,
    SQLiteCursorExecutor,
    choose_executor,
)
from symfonic_store.db.schema import events, threads

# langgraph.types is imported above, not first inside a frozen clock: its pydantic import
# breaks on freezegun's fake date class.
T0 = "2026-03-01T09:00:00+00:00"
TTL = 60.0


marker = partial(factories.pending, name="approval")


@dataclass(frozen=True)
class Step:
    """One store call of the scenario, then how far the frozen clock moves."""

    label: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None
    tick: float = 1.0


NATIVE_ID = "n" * 32
NATIVE_WAIT = {
    "interrupt_id": NATIVE_ID,
    "value": {"action_requests": [{"name": "wire", "args": {}}, {"name": "mail", "args": {}}],
              "review_configs": []},
    "task_id": "task-1", "checkpoint_id": "cp-1", "checkpoint_ns": "", "breakpoint": False,
}
HITL_ANSWER = {"decisions": [{"type": "approve"}, {"type": "reject"}]}


def scenario() -> list[Step]:
    """The scenario's calls; built under the frozen clock, so every marker's minted_at is T0."""
    return [
        Step("mint", "mint", ("t-1", marker("i-1", amount=420))),
        Step("mint again (idempotent)", "mint", ("t-1", marker("i-1", amount=420))),
        Step("supersede", "mint", ("t-1", marker("i-2", amount=430))),
        Step("route", "record_route", ("t-1", "interrupt"), {"run_id": "run-1"}),
        Step("router decision", "record_router_decision",
             ("t-2", {"_interrupt_pending": marker("i-3", run_id="run-1"), "run_id": "run-1"}, "interrupt")),
        Step("router sees a new run", "record_router_decision",
             ("t-2", {"_interrupt_pending": marker("i-3", run_id="run-1"), "run_id": "run-2"}, "agent")),
        Step("resume", "resume", ("t-1", "i-2", {"approved": True}), {"actor": "alice"}),
        Step("resume again (same answer)", "resume", ("t-1", "i-2", {"approved": True}), {"actor": "alice"}),
        Step("refused resume: resolved", "resume", ("t-1", "i-2", {"approved": False}), {"actor": "bob"}),
        Step("refused resume: superseded", "resume", ("t-1", "i-1", {"approved": True}), {"actor": "bob"}),
        Step("refused resume: unknown", "resume", ("t-1", "i-nope"), {"actor": "eve"}),
        Step("mint to cancel", "mint", ("t-3", marker("i-4"))),
        Step("expire", "expire", ("t-3", "i-4"), {"reason": "cancelled", "actor": "ops"}),
        Step("refused expire", "expire", ("t-3", "i-4")),
        Step("mint to sweep", "mint", ("t-4", marker("i-5"))),
        Step("mint to sweep", "mint", ("t-5", marker("i-6")), tick=2 * TTL),
        Step("node resume", "mint", ("t-6", marker("i-7"))),
        Step("node admits", "admit_node_resume", ("t-6", marker("i-7"), {"ok": 1}), {"actor": "carol"}),
        Step("sweep, dry run", "sweep", (), {"ttl_seconds": TTL, "dry_run": True}),
        Step("sweep", "sweep", (), {"ttl_seconds": TTL, "batch_size": 1}),
        Step("sweep again", "sweep", (), {"ttl_seconds": TTL}),
        # LangGraph interrupts (SPEC §8): a batched HITL request refused once, then answered.
        Step("native interrupts", "record_waiting", ("t-7", [NATIVE_WAIT]), {"graph": "payments"}),
        Step("claim", "claim", ("t-7", NATIVE_ID, HITL_ANSWER), {"actor": "dave"}),
        Step("release", "release", ("t-7", NATIVE_ID), {"error": "not taken"}),
        Step("claim again", "claim", ("t-7", NATIVE_ID, HITL_ANSWER),
             {"actor": "dave", "authenticated_by": "service:jwt"}),
        Step("confirm", "confirm", ("t-7", NATIVE_ID)),
        Step("pending", "pending", ("t-1",)),
        Step("state", "state", ("t-2",)),
        Step("is_current", "is_current", ("t-4",), {"ttl_seconds": TTL}),
        Step("list_pending", "list_pending"),
        *[Step(f"history {t}", "history", (t,)) for t in ("t-1", "t-2", "t-3", "t-4", "t-5", "t-6")],
        Step("events", "events"),
        Step("events page", "events", (), {"after": 3, "limit": 4}),
        Step("iter_events", "iter_events", (), {"page_size": 3}),
        Step("replay", "replay", ("t-1",)),
        Step("replay until", "replay", ("t-1",), {"until": 4}),
        Step("audit", "audit"),
        Step("audit by actor", "audit", (), {"actor": "alice"}),
        Step("audit by decision", "audit", (), {"decision": "approve"}),
        Step("verify", "verify"),
        Step("rebuild", "rebuild_projection"),
        Step("verify one thread", "verify", ("t-2",)),
    ]


def outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except SymfonicStoreError as exc:
        return ("error", type(exc).__name__, str(exc))


def tables(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Both tables as stored, read with Core (no store code involved); tx_id left out, as
    two databases (or schemas) hand out different transaction ids."""
    engine = sa.create_engine(url)
    columns = [c for c in events.c if c.name != "tx_id"]
    try:
        with engine.connect() as conn:
            return (
                [tuple(r) for r in conn.execute(sa.select(*columns).order_by(events.c.position))],
                [tuple(r) for r in conn.execute(sa.select(threads).order_by(threads.c.thread_id))],
            )
    finally:
        engine.dispose()


def engine_for(url: str, *, fast: bool) -> sa.Engine:
    return sa.create_engine(url, execution_options={FAST_PATH_OPTION: fast})


def executor_name(engine: sa.Engine) -> str:
    with engine.connect() as conn:
        return choose_executor(conn).name


def run_sync(url: str, *, fast: bool) -> list[Any]:
    engine = engine_for(url, fast=fast)
    store = InterruptStore(engine)
    try:
        store.setup()
        if url.startswith("sqlite"):
            expected: type = SQLiteCursorExecutor if fast else CoreExecutor
        else:
            expected = PostgresCursorExecutor if fast else PostgresExecutor
        with engine.connect() as conn:
            assert type(choose_executor(conn)) is expected
        results = []
        with freeze_time(T0) as clock:
            for step in scenario():
                method = getattr(store, step.method)
                results.append(
                    (step.label, outcome(lambda m=method, s=step: _listed(m(*s.args, **(s.kwargs or {})))))
                )
                clock.tick(step.tick)
        return results
    finally:
        store.close()
        engine.dispose()


def _listed(value: Any) -> Any:
    return list(value) if isinstance(value, Iterator) else value


async def run_async(url: str, *, fast: bool) -> list[Any]:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(
        sa.make_url(url).set(drivername="sqlite+aiosqlite"), execution_options={FAST_PATH_OPTION: fast}
    )
    store = AsyncInterruptStore(engine)
    try:
        await store.setup()
        async with engine.connect() as aconn:
            name = await aconn.run_sync(lambda conn: choose_executor(conn).name)
        assert name == ("sqlite-cursor" if fast else "core")
        results = []
        with freeze_time(T0) as clock:
            for step in scenario():
                try:
                    value = getattr(store, step.method)(*step.args, **(step.kwargs or {}))
                    if inspect.isawaitable(value):
                        value = await value
                    results.append((step.label, ("ok", value)))
                except SymfonicStoreError as exc:
                    results.append((step.label, ("error", type(exc).__name__, str(exc))))
                clock.tick(step.tick)
        return results
    finally:
        await store.aclose()
        await engine.dispose()


def assert_same(fast: list[Any], core: list[Any]) -> None:
    assert [label for label, _ in fast] == [label for label, _ in core]
    for (label, a), (_, b) in zip(fast, core, strict=True):
        assert a == b, f"{label}: the fast path returned {a!r}, Core {b!r}"


@pytest.fixture
def two_databases(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> tuple[str, str]:
    """Two empty databases of the backend: two files, or two fresh PostgreSQL schemas."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'fast.db'}", f"sqlite:///{tmp_path / 'core.db'}"
    first = str(request.getfixturevalue("postgres_schema_url"))
    return first, str(request.getfixturevalue("other_postgres_schema_url"))


@pytest.fixture
def other_postgres_schema_url() -> Iterator[str]:
    """A second fresh PostgreSQL schema (the conftest fixture gives one per test)."""
    base = postgres_base_url()
    assert base is not None
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(sa.make_url(base).set(drivername="postgresql+psycopg"))
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        url = sa.make_url(base).set(drivername="postgresql+psycopg")
        yield with_search_path(url.render_as_string(hide_password=False), schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


def test_the_scenario_gives_identical_results_with_the_fast_path_on_and_off(
    two_databases: tuple[str, str],
) -> None:
    """Every call of the scenario returns the same on the cursor fast path and on Core, and the tables match."""
    fast_url, core_url = two_databases
    fast, core = run_sync(fast_url, fast=True), run_sync(core_url, fast=False)
    assert_same(fast, core)
    # Not vacuous: the scenario did record, refuse and expire things.
    kinds = {r[0] for _, r in fast}
    assert kinds == {"ok", "error"}
    assert dict(fast)["sweep"][1].expired, "the sweep expired nothing"
    assert isinstance(dict(fast)["resume"][1], Command)
    fast_tables = tables(fast_url)
    assert fast_tables == tables(core_url)
    # The audit columns are among the columns compared, and every kind of them was written.
    names = [c.name for c in events.c if c.name != "tx_id"]
    filled = {name for row in fast_tables[0] for name, value in zip(names, row, strict=True)
              if name.startswith("audit_") and value is not None}
    assert filled == set(AUDIT_COLUMNS)


async def test_the_asyncio_store_gives_identical_results_with_the_fast_path_on_and_off(tmp_path: Path) -> None:
    """The asyncio store (aiosqlite) answers the scenario the same with the fast path on and off."""
    fast_url, core_url = f"sqlite:///{tmp_path / 'fast.db'}", f"sqlite:///{tmp_path / 'core.db'}"
    fast, core = await run_async(fast_url, fast=True), await run_async(core_url, fast=False)
    assert_same(fast, core)
    assert tables(fast_url) == tables(core_url)
    # ... and the same as the synchronous store on a third database.
    sync_url = f"sqlite:///{tmp_path / 'sync.db'}"
    assert_same(fast, run_sync(sync_url, fast=True))


# --- every statement is visible with the fast path off --------------------------------------

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SAVEPOINT", "RELEASE")


def shape(sql: str) -> tuple[str, ...]:
    """A statement's verb and first table, the same for ``?`` and expanded parameters."""
    words = sql.replace("(", " ").replace(",", " ").split()
    verb = words[0].upper()
    for keyword in ("INTO", "FROM", "UPDATE"):
        for i, word in enumerate(words):
            if word.upper() == keyword and i + 1 < len(words):
                return (verb, words[i + 1].strip('"'))
    return (verb,)


@dataclass
class Watch:
    """What SQLite ran (its trace callback) and what SQLAlchemy's statement events saw."""

    traced: list[str]
    seen: list[tuple[str, ...]]

    def ran(self) -> list[tuple[str, ...]]:
        return [shape(s) for s in self.traced if not s.lstrip().upper().startswith(TRANSACTION_CONTROL)]

    def clear(self) -> None:
        self.traced.clear()
        self.seen.clear()


def watched_store(url: str, *, fast: bool, listen: bool) -> tuple[InterruptStore, Watch]:
    engine = sa.create_engine(url, pool_size=1, max_overflow=0, execution_options={FAST_PATH_OPTION: fast})
    watch = Watch([], [])

    @event.listens_for(engine, "connect")
    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(watch.traced.append)

    if listen:

        @event.listens_for(engine, "before_cursor_execute")
        def see(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            watch.seen.extend([shape(statement)] * (len(parameters) if many else 1))

    store = InterruptStore(engine)
    store.setup()
    # Python's trace callback repeats the firing statement once per trigger program it runs
    # (the audit's rows, 0025; the open counts, 0026), which no statement event could
    # match: this store, whose audit and metrics are not read, goes without those triggers.
    with engine.begin() as conn:
        for name in ("symfonic_audit_rows_mint", "symfonic_audit_rows_ending", "symfonic_audit_rows_removed",
                     "symfonic_open_count_marker_insert", "symfonic_open_count_marker_update",
                     "symfonic_open_count_marker_delete", "symfonic_open_count_native_insert",
                     "symfonic_open_count_native_delete"):
            conn.exec_driver_sql(f"DROP TRIGGER {name}")
    store.pending("warm-up")  # the schema check is done and the one connection is open
    return store, watch


def appends(store: InterruptStore) -> None:
    """A few appends of different shapes: a new thread, a supersession, a resume, a sweep."""
    store.mint("t-1", marker("i-1"))
    store.mint("t-1", marker("i-2"))
    store.resume("t-1", "i-2", {"approved": True}, actor="alice")
    store.mint("t-2", {**marker("i-3"), "minted_at": 0.0})
    store.sweep(ttl_seconds=TTL)


@pytest.mark.parametrize(
    ("fast", "listen"), [(False, True), (True, True)], ids=["fast path off, listener", "listener alone"]
)
def test_with_the_fast_path_off_every_statement_of_an_append_is_seen_by_sqlalchemy(
    tmp_path: Path, fast: bool, listen: bool
) -> None:
    """Every statement SQLite runs for an append is seen by before_cursor_execute (a listener turns the fast path off)."""
    store, watch = watched_store(f"sqlite:///{tmp_path / 'store.db'}", fast=fast, listen=listen)
    try:
        assert executor_name(store.engine) == "core"
        watch.clear()
        appends(store)
        assert ("INSERT", "symfonic_events") in watch.ran()
        assert ("UPDATE", "symfonic_threads") in watch.ran()
        assert watch.seen == watch.ran()
    finally:
        store.close()
        store.engine.dispose()


def test_the_fast_path_runs_the_same_statements_as_core(tmp_path: Path) -> None:
    """SQLite's trace of the appends is the same on the fast path as on Core: there is no second SQL."""
    ran = []
    for fast in (True, False):
        store, watch = watched_store(f"sqlite:///{tmp_path / f'{fast}.db'}", fast=fast, listen=False)
        try:
            assert executor_name(store.engine) == ("sqlite-cursor" if fast else "core")
            watch.clear()
            with freeze_time(T0):
                appends(store)
            assert watch.seen == [], "no listener, nothing seen"
            ran.append(watch.ran())
        finally:
            store.close()
            store.engine.dispose()
    assert ran[0] == ran[1]
    assert len(ran[0]) > 10


@pytest.mark.postgres
@pytest.mark.parametrize("fast", [True, False], ids=["fast path asked for", "fast path off"])
def test_on_postgres_a_listener_sees_every_statement_of_an_append(
    postgres_schema_url: str, fast: bool
) -> None:
    """On PostgreSQL a before_cursor_execute listener turns the fast path off, so it sees every append."""
    engine = engine_for(postgres_schema_url, fast=fast)
    seen: list[tuple[str, ...]] = []

    @event.listens_for(engine, "before_cursor_execute")
    def see(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        seen.append(("CALL", "symfonic_append") if "symfonic_append(" in statement else shape(statement))

    with engine.connect() as conn:
        assert type(choose_executor(conn)) is PostgresExecutor
    store = InterruptStore(engine)
    store.setup()
    try:
        appends(store)
        # A store method's append to one thread is one call of symfonic_append (seen);
        # the sweep's batch writes its rows itself.
        assert seen.count(("CALL", "symfonic_append")) >= 4
        assert ("INSERT", "symfonic_events") in seen
        assert ("UPDATE", "symfonic_threads") in seen
    finally:
        store.close()
        engine.dispose()


@pytest.mark.postgres
async def test_the_asyncio_postgres_store_runs_on_core(postgres_schema_url: str) -> None:
    """psycopg's asyncio mode has no fast path: the asyncio store runs every statement through Core."""
    store = AsyncInterruptStore(postgres_schema_url)
    try:
        await store.setup()
        async with store.engine.connect() as aconn:
            assert await aconn.run_sync(lambda conn: type(choose_executor(conn))) is PostgresExecutor
    finally:
        await store.aclose()
