"""SPEC §17: an inbox page costs the page, not the open interrupts behind it. The service's
inbox (``GET /api/interrupts`` and the HTML inbox, server/approvals.py) is one
``list_pending(limit=page + 1, after=..., thread_id=..., name=..., older_than=...,
tenants=...)`` read; each filter is read in SQL over an index, so what the database touches
(tests/bounded_rig.py: SQLite's plans and virtual machine steps, PostgreSQL's rows and
buffers) does not grow from a store to one 100 times fuller, on either backend.

The fuller store adds, after the small one's interrupts in minting order, 100 times more
of each (and open LangGraph interrupts of another name), so each read returns the same
page in both; a page of a name is also measured with 100 times more interrupts of other
names minted before it, which its index skips without reading.

On PostgreSQL the small store's tables fit in a page or two, which the planner reads whole
instead of through the index; the fuller store's page reads through the index a heap page
per row. The buffers allowed are therefore the small store's plus a few per row of the page
(the rows touched are held to the small store's, but for a B-tree level)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from bounded_rig import SCALE, Probe, ThreadSpec, assert_bounded, load, native_rows, probe
from migration_rig import migrate
from sqlalchemy.engine import Engine

from symfonic_store import InterruptStore
from symfonic_store.server.approvals import Approvals

PAGE = 20
COUNT = 30
"""Interrupts of each kind in the small store (the fuller one: 100 times more)."""


def _fill(store: InterruptStore, prefix: str, count: int, base: float) -> None:
    """``count`` pending seed markers (``approval_required``) minted from ``base``, and
    ``count`` open LangGraph interrupts named ``approve`` just after them."""
    load(
        store,
        [ThreadSpec(f"{prefix}m", count, 2, ending="pending")],
        start=datetime.fromtimestamp(base, UTC),
        extra=list(native_rows(f"{prefix}a", count, minted_at=base + 100, name="approve")),
    )


def _reads(store: InterruptStore, now: float) -> dict[str, Callable[[], Any]]:
    """Each inbox read, as the service makes it (a page of PAGE, with and without a cursor)."""
    inbox = Approvals(store).inbox
    # After the 5th: both kinds still hold more than a page after it in the small store.
    after = inbox(limit=5)["next"]
    assert after is not None
    named = inbox(name="approve", limit=5)["next"]
    return {
        "first page": lambda: inbox(limit=PAGE),
        "after": lambda: inbox(limit=PAGE, after=after),
        "thread": lambda: inbox(thread="s-m-0000003", limit=PAGE),
        "name": lambda: inbox(name="approve", limit=PAGE, after=named),
        "older_than": lambda: inbox(older_than=3_600, limit=PAGE, after=after),
        "tenant scope": lambda: inbox(scope=frozenset({None}), limit=PAGE, after=after),
    }


def _measure(store: InterruptStore, now: float) -> dict[str, Probe]:
    measured: dict[str, Probe] = {}
    for name, read in _reads(store, now).items():
        with probe(store) as seen:
            page = read()
        assert page["items"], name
        measured[name] = seen
    return measured


@pytest.mark.parametrize("kind", ["first page", "after", "thread", "name", "older_than", "tenant scope"])
def test_an_inbox_page_touches_no_more_in_a_store_100_times_fuller(store: InterruptStore, kind: str) -> None:
    """Each inbox read (no filter, after=, thread, name, older_than, a tenant scope every
    interrupt is in) on ~60 open interrupts, then on ~9,000 with 3,000 of another name
    minted before them: no plan scans the log or the projection, and the database touches
    no more (SQLite: VM steps; PostgreSQL: rows and buffers), but for a B-tree level."""
    now = time.time()
    base = now - 86_400
    _fill(store, "s-", COUNT, base)
    small = _measure(store, now)[kind]
    load(store, extra=list(native_rows("o-", COUNT * SCALE, minted_at=base + 10_000, name="other")))
    _fill(store, "t-", COUNT * SCALE, base + 20_000)
    large = _measure(store, now)[kind]
    _assert_bounded(small, large)


def _assert_bounded(small: Probe, large: Probe) -> None:
    """:func:`assert_bounded`, with PostgreSQL's heap pages allowed (see the module doc)."""
    if large.dialect != "postgresql":
        assert_bounded(small, large)
        return
    assert_bounded(  # the rows touched, as they are
        Probe(small.dialect, small.statements, rows=small.rows),
        Probe(large.dialect, large.statements, rows=large.rows),
    )
    # A few pages per row of the page (heap, index leaf) and a B-tree's levels: a constant
    # that does not grow with the store (a read of the whole store would touch thousands).
    heap = (3 * (PAGE + 1) + 4) * len(large.statements)
    assert large.buffers <= small.buffers + heap, (small.explained, large.explained)


def test_a_page_of_a_name_skips_the_other_names_in_the_index(store: InterruptStore) -> None:
    """The name filter's page is found through ``ix_symfonic_open_interrupts_name``: what is
    read for a page of ``approve`` does not grow with interrupts of another name, however
    many were minted before them."""
    now = time.time()
    base = now - 86_400
    _fill(store, "s-", COUNT, base)
    inbox = Approvals(store).inbox
    with probe(store) as small:
        page = inbox(name="approve", limit=PAGE)
    load(store, extra=list(native_rows("o-", COUNT * SCALE, minted_at=base - 10_000, name="other")))
    with probe(store) as large:
        again = inbox(name="approve", limit=PAGE)
    assert [i["interrupt_id"] for i in again["items"]] == [i["interrupt_id"] for i in page["items"]]
    assert all(i["name"] == "approve" for i in again["items"])
    _assert_bounded(small, large)


NAME_INDEXES = {"ix_symfonic_open_interrupts_name", "ix_symfonic_threads_pending_name"}


def _indexes(engine: Engine) -> set[str]:
    """The store's index names, read from the catalog (SQLAlchemy's inspector skips
    SQLite's expression indexes)."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")
        else:
            rows = conn.exec_driver_sql("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
        return {str(r[0]) for r in rows}


def test_0023_indexes_the_names_of_the_interrupts_already_open(engine: Engine, db_url: str) -> None:
    """A populated store taken down to 0022 (no name index, as the release before has it)
    and up again, twice: both indexes are built over the rows already there, and a page of
    a name finds the markers and LangGraph interrupts open before the upgrade."""
    migrate(engine, "up", "head")
    base = time.time() - 3_600
    with InterruptStore(db_url) as store:
        _fill(store, "p-", 5, base)
        load(store, extra=list(native_rows("p-o", 5, minted_at=base - 100, name="other")))
        before = store.list_pending(name="approve") + store.list_pending(name="approval_required")
    assert len(before) == 10
    for _ in range(2):
        migrate(engine, "down", "0022_bounded_reads")
        assert not NAME_INDEXES & _indexes(engine)
        migrate(engine, "up", "head")
        assert NAME_INDEXES <= _indexes(engine)
        with InterruptStore(db_url) as store:
            after = store.list_pending(name="approve") + store.list_pending(name="approval_required")
            assert after == before
            assert [p["name"] for p in store.list_pending(name="other")] == ["other"] * 5


# --- the tenant scope and the assignment filter (migration 0024) ------------------------

SCOPE = frozenset({"acme", None})
"""A principal's scope: one tenant, and the interrupts minted without one."""


def _fill_tenant(store: InterruptStore, prefix: str, count: int, base: float, tenant: str,
                 principal: str, role: str) -> None:
    """``count`` pending markers of ``tenant`` minted from ``base``, then ``count`` open
    LangGraph interrupts of it assigned to ``principal`` and ``count`` assigned to ``role``
    (``role:<name>``), among each other in minting order."""
    load(
        store,
        [ThreadSpec(f"{prefix}m", count, 2, ending="pending", tenant=tenant)],
        start=datetime.fromtimestamp(base, UTC),
        extra=[
            *native_rows(f"{prefix}p", count, minted_at=base + 100, tenant=tenant, assigned_to=principal),
            *native_rows(f"{prefix}r", count, minted_at=base + 100, tenant=tenant, assigned_to=role),
        ],
    )


def _scoped_reads(store: InterruptStore) -> dict[str, Callable[[], Any]]:
    inbox = Approvals(store).inbox
    after = inbox(scope=SCOPE, limit=5)["next"]
    assigned = inbox(assigned_to="bob", limit=5)["next"]
    assert after is not None and assigned is not None
    return {
        "scope": lambda: inbox(scope=SCOPE, limit=PAGE),
        "scope after": lambda: inbox(scope=SCOPE, limit=PAGE, after=after),
        "one tenant": lambda: inbox(scope=frozenset({"acme"}), limit=PAGE),
        "assigned": lambda: inbox(assigned_to="bob", limit=PAGE),
        "assigned after": lambda: inbox(assigned_to="bob", limit=PAGE, after=assigned),
        "assigned role": lambda: inbox(assigned_to="role:finance", limit=PAGE),
        "assigned in scope": lambda: inbox(assigned_to="bob", scope=SCOPE, limit=PAGE),
    }


def _measure_pages(store: InterruptStore) -> dict[str, tuple[Probe, list[Any]]]:
    measured = {}
    for name, read in _scoped_reads(store).items():
        with probe(store) as seen:
            page = read()
        assert page["items"], name
        measured[name] = (seen, [(i["thread_id"], i["interrupt_id"]) for i in page["items"]])
    return measured


def test_a_scoped_or_assigned_page_touches_no_more_with_100_times_more_of_other_tenants(
    store: InterruptStore,
) -> None:
    """A tenant scope (one tenant and the untenanted: a keyset branch each; one tenant) and
    the assignment filter (a principal, a role, later pages, within a scope) on ~90 open
    interrupts of one tenant, then with 100 times more of another tenant minted before
    and among them, assigned to others: the same pages, no plan scans the log or the
    projection, and the database touches no more (SQLite: VM steps; PostgreSQL: rows and
    buffers), but for a B-tree level."""
    base = time.time() - 86_400
    _fill_tenant(store, "s-", COUNT, base, "acme", "bob", "role:finance")
    for n in range(5):  # markers assigned through the store, as the service assigns them
        store.assign(f"s-m-{n:07d}", _pending_id(store, f"s-m-{n:07d}"), to="bob", actor="lead")
    small = _measure_pages(store)
    many = COUNT * SCALE
    load(store, [ThreadSpec("z-b", many, 2, ending="pending", tenant="zeta")],
         start=datetime.fromtimestamp(base - 10_000, UTC),
         extra=list(native_rows("z-o", many, minted_at=base - 5_000, tenant="zeta", assigned_to="carol")))
    _fill_tenant(store, "z-", many, base, "zeta", "carol", "role:ops")
    large = _measure_pages(store)
    for name, (probed, page) in small.items():
        assert large[name][1] == page, name
        _assert_bounded(probed, large[name][0])


def _pending_id(store: InterruptStore, thread_id: str) -> str:
    pending = store.pending(thread_id)
    assert pending is not None
    return str(pending["interrupt_id"])


SCOPE_INDEXES = {
    "ix_symfonic_threads_pending_tenant", "ix_symfonic_threads_pending_assignee",
    "ix_symfonic_open_interrupts_tenant", "ix_symfonic_open_interrupts_assignee",
}


def _scope_columns(engine: Engine) -> list[tuple[Any, ...]]:
    """Every projection row's key with its ``tenant`` and ``assigned_to``."""
    with engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql(
            "SELECT thread_id, pending_interrupt_id, tenant, assigned_to FROM symfonic_threads"
            " UNION ALL SELECT thread_id, interrupt_id, tenant, assigned_to FROM symfonic_open_interrupts"
            " ORDER BY 1, 2"
        )]


def _scoped_pages(store: InterruptStore) -> list[list[tuple[str, str]]]:
    reads = [
        store.list_pending(tenants={"acme"}), store.list_pending(tenants={"acme", None}),
        store.list_pending(tenants={None}), store.list_pending(assigned_to="bob"),
        store.list_pending(assigned_to="role:finance"),
        store.list_pending(tenants={"zeta"}, assigned_to="carol"),
    ]
    return [[(p["thread_id"], p["interrupt_id"]) for p in page] for page in reads]


def test_0024_fills_the_tenant_and_assignee_of_the_interrupts_already_open(engine: Engine, db_url: str) -> None:
    """A populated store (tenants, assignments and reassignments of markers and LangGraph
    interrupts, some answered) taken down to 0023 (no such columns, as the release before
    has it) and up again, twice: the columns are filled from the log as the writers fill
    them, the indexes are there, the scoped and assigned pages are the same; and a mint
    after the upgrade writes its tenant (on PostgreSQL through the replaced one-call
    append)."""
    migrate(engine, "up", "head")
    base = time.time() - 3_600
    with InterruptStore(db_url) as store:
        _fill_tenant(store, "p-", 5, base, "acme", "bob", "role:finance")
        load(store, [ThreadSpec("q-m", 5, 2, ending="pending")], start=datetime.fromtimestamp(base, UTC),
             extra=list(native_rows("q-z", 5, minted_at=base + 50, tenant="zeta", assigned_to="carol")))
        for n in range(3):
            thread = f"p-m-{n:07d}"
            store.assign(thread, _pending_id(store, thread), to="dan", actor="lead")
            store.assign(thread, _pending_id(store, thread), to="finance", kind="role", actor="lead")
        store.assign("p-p-0000000", "n-0000000", to="erin", actor="lead")  # reassigned from bob
        store.resume("p-m-0000004", _pending_id(store, "p-m-0000004"), {"ok": True}, actor="bob")
        before = _scope_columns(engine)
        pages = _scoped_pages(store)
    assert ("p-p-0000000", "n-0000000", "acme", "erin") in before
    assert ("p-m-0000000", _pending_of(before, "p-m-0000000"), "acme", "role:finance") in before
    assert all(len(page) > 0 for page in pages), pages
    for prepared in (False, True):
        migrate(engine, "down", "0023_inbox_pages")
        assert not SCOPE_INDEXES & _indexes(engine)
        with engine.connect() as conn:
            assert "assigned_to" not in {c["name"] for c in sa.inspect(conn).get_columns("symfonic_threads")}
        if prepared:  # as docs/operations.md has an operator prepare a large store
            _prepare_0024(engine)
        migrate(engine, "up", "head")
        assert SCOPE_INDEXES <= _indexes(engine)
        assert _scope_columns(engine) == before
        with InterruptStore(db_url) as store:
            assert _scoped_pages(store) == pages
    with InterruptStore(db_url) as store:
        store.mint("p-new", factories.marker(), tenant="acme")
        assert [p["thread_id"] for p in store.list_pending(tenants={"acme"})][-1] == "p-new"


def _prepare_0024(engine: Engine) -> None:
    """The columns and indexes of 0024 added by hand before the upgrade (docs/operations.md;
    a test's transaction cannot build them CONCURRENTLY), the columns left empty."""
    with engine.connect() as conn, conn.begin():
        for table in ("symfonic_threads", "symfonic_open_interrupts"):
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN tenant varchar(255)")
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN assigned_to text")
        for statement in (
            "ix_symfonic_threads_pending_tenant ON symfonic_threads (tenant, pending_since, thread_id)"
            " WHERE pending_interrupt_id IS NOT NULL",
            "ix_symfonic_threads_pending_assignee ON symfonic_threads (assigned_to, pending_since, thread_id)"
            " WHERE assigned_to IS NOT NULL",
            "ix_symfonic_open_interrupts_tenant ON symfonic_open_interrupts (tenant, minted_at, thread_id, interrupt_id)",
            "ix_symfonic_open_interrupts_assignee ON symfonic_open_interrupts"
            " (assigned_to, minted_at, thread_id, interrupt_id) WHERE assigned_to IS NOT NULL",
        ):
            conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS " + statement)


def _pending_of(rows: list[tuple[Any, ...]], thread_id: str) -> Any:
    return next(r[1] for r in rows if r[0] == thread_id)
