"""The bound of a page, not its time (SPEC §17): ``audit(limit=50, after=...)`` and
``list_pending(limit=50, after=...)`` read through an index and stop at the page --
SQLite's plans of the statements they run search an index, never scan the event or
projection tables; PostgreSQL's rows touched do not grow from a fixture to one 100× larger.

The audit's pages with every filter, on both backends, are measured by
tests/store/test_audit_bounds.py (its rows, migration 0025); PostgreSQL's audit statements
are measured there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from bench.bulk_load import ThreadSpec, load
from symfonic_store import InterruptStore, cursors
from symfonic_store.db.engines import create_sync_engine
from symfonic_store.db.statements.native import open_interrupts_query
from symfonic_store.db.statements.threads import pending_threads_query

PAGE = 50
TABLES = ("symfonic_events", "symfonic_threads", "symfonic_open_interrupts", "mint", "ending", "rejected", "r")


def _fixture(store: InterruptStore, threads: int, prefix: str = "t") -> None:
    """``threads`` threads of two interrupts each: one resumed, one left pending."""
    load(store, [ThreadSpec(prefix, threads, 4, ending="pending")])


@pytest.fixture
def traced(migrated_url: str) -> Iterator[tuple[InterruptStore, Callable[[Callable[[], Any]], list[str]]]]:
    """A SQLite store on an engine of the test's own, and a recorder of the statements a call runs."""
    if not migrated_url.startswith("sqlite"):
        pytest.skip("SQLite's plans; PostgreSQL's rows are measured below")
    engine = create_sync_engine(migrated_url)
    seen: list[str] = []
    recording = [False]

    @sa.event.listens_for(engine, "checkout")
    def trace(dbapi: Any, record: Any, proxy: Any) -> None:
        dbapi.set_trace_callback(seen.append if recording[0] else None)

    def statements(call: Callable[[], Any]) -> list[str]:
        seen.clear()
        recording[0] = True
        try:
            call()
        finally:
            recording[0] = False
        return [q for q in seen if q.lstrip().upper().startswith("SELECT")]

    store = InterruptStore(engine)  # not held: every call checks a connection out
    yield store, statements
    store.close()
    engine.dispose()


def test_sqlite_pages_search_an_index_never_scan_a_table(
    traced: tuple[InterruptStore, Callable[[Callable[[], Any]], list[str]]],
) -> None:
    """Each SELECT of audit(limit=50, after=...) (whole, one thread) and list_pending(limit=50, after=...) (whole, older_than) plans as an index SEARCH."""
    store, statements = traced
    _fixture(store, 300)
    start = store.audit(limit=20)[-1].cursor
    thread_start = store.audit(thread_id="t-0000007", limit=1)[-1].cursor
    pending_start = store.list_pending(limit=20)[-1]["cursor"]
    calls: dict[str, Callable[[], Any]] = {
        "audit": lambda: store.audit(limit=PAGE, after=start),
        "audit --thread": lambda: store.audit(thread_id="t-0000007", limit=PAGE, after=thread_start),
        "list_pending": lambda: store.list_pending(limit=PAGE, after=pending_start),
        "list_pending older_than": lambda: store.list_pending(limit=PAGE, after=pending_start, older_than=0),
    }
    with store.engine.connect() as conn:
        for name, call in calls.items():
            ran = statements(call)
            assert ran, name
            for sql in ran:
                plan = [r[3] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)]
                scans = [s for s in plan if s.startswith("SCAN") and any(f"SCAN {t}" == s.split(" USING")[0]
                                                                            for t in TABLES)]
                assert not scans, (name, sql, plan)
                assert any(s.startswith("SEARCH") for s in plan), (name, sql, plan)


def _touched(plan: dict[str, Any]) -> int:
    """Rows a PostgreSQL plan node and its children produced or filtered away, every loop."""
    loops = int(plan.get("Actual Loops", 1))
    own = sum(int(plan.get(k, 0)) for k in ("Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"))
    return own * loops + sum(_touched(child) for child in plan.get("Plans", []))


def _measure(store: InterruptStore) -> dict[str, int]:
    """Rows touched by each statement of an inbox page, after a cursor near the end."""
    # Cursors near the end: in the larger store nearly all its rows lie before them, so a
    # statement that walked up to its cursor instead of searching for it would be seen.
    since, kind, thread, _ = cursors.decode(
        store.list_pending()[-(PAGE // 2)]["cursor"], cursors.PENDING, cursors.PENDING_SHAPE
    )
    assert kind == 0  # a marker: the open LangGraph interrupts of its time come after it
    found: dict[str, int] = {}
    with store.engine.connect() as conn:

        def explain(name: str, stmt: sa.Select[Any], params: dict[str, Any]) -> list[Any]:
            compiled = stmt.compile(dialect=conn.dialect)
            bound = compiled.construct_params(params)
            (doc,) = conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + str(compiled), bound).one()
            found[name] = _touched(doc[0]["Plan"])
            return list(conn.exec_driver_sql(str(compiled), bound))

        explain("pending markers", pending_threads_query(since_before=None, limit=PAGE, after=(since, thread)), {})
        explain("pending natives", open_interrupts_query(limit=PAGE, after=(since, "", "")), {})
    return found


@pytest.mark.postgres
def test_postgres_pages_touch_the_same_rows_in_a_store_100_times_larger(store: InterruptStore) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of each statement of an inbox page: rows touched with 50 threads and with 5,000 (100×) stay within 1.5× (+ a few)."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's measured plans; SQLite's are checked above")
    _fixture(store, 50)
    small = _measure(store)
    _fixture(store, 4_950, prefix="u")  # the same first threads, 100× the store
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")
    large = _measure(store)
    for name, rows in small.items():
        assert large[name] <= 1.5 * rows + 10, (name, small, large)
    assert small["pending markers"] >= PAGE // 2 - 1, small
