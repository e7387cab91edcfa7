"""SPEC §17: an audit page costs the page, not the history, with every filter. A page of
``audit(limit=, after=, thread_id=, actor=, decision=, since=, until=, tenants=)`` walks
an index of ``symfonic_audit_rows`` (migration 0025) from its cursor's place, every other
filter checked in SQL -- so what the database touches (tests/bounded_rig.py: SQLite's plans
and virtual machine steps, PostgreSQL's rows and buffers) does not grow from a store to one
100 times fuller, even for a filter that matches a small fraction of the interrupts
(``carol``'s answers, the ``edit`` decision, the tenant ``rare``, one thread).
``GET /api/audit`` is one such read (``limit + 1``, the principal's scope): measured
through the app in-process.

The fuller store adds 100 times more interrupts minted *before* the small store's, so the
pages of a time window and the pages after a cursor read the same records in both.

Also: 0025 fills the rows of a populated store, equal to what ``rebuild_projection``
writes, down to 0023 and up again, twice."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from bounded_rig import SCALE, Probe, ThreadSpec, assert_bounded, load, probe
from migration_rig import migrate
from sqlalchemy.engine import Engine
from starlette.testclient import TestClient

from symfonic_store import InterruptStore
from symfonic_store.server import TokenAuth, create_app

PAGE = 20
COUNT = 30
"""Threads of three interrupts each in the small store (the fuller one: 100 times more)."""
RARE = 5
"""Interrupts of the rare tenant, actor and decision (in both stores)."""


def _fill(store: InterruptStore, prefix: str, count: int, base: float) -> None:
    """``count`` threads of three answered interrupts (alice approves, bob approves, alice
    rejects), minted from ``base``: bench/bulk_load.py's rows, without tenant."""
    load(store, [ThreadSpec(prefix, count, 10)], start=datetime.fromtimestamp(base, UTC))


def _rare(store: InterruptStore) -> None:
    """RARE interrupts of tenant ``rare`` that ``carol`` answers with an ``edit``, and one
    left pending, minted now (after the bulk)."""
    for i in range(RARE):
        store.mint(f"rare-{i}", {"name": "pay", "interrupt_id": "i", "payload": {"n": i}}, tenant="rare")
        store.resume(f"rare-{i}", "i", {"decision": "edit", "note": "x"}, actor="carol")
    store.mint("rare-open", {"name": "pay", "interrupt_id": "i"}, tenant="rare")


def _reads(store: InterruptStore, base: float) -> dict[str, Callable[[], list[Any]]]:
    """Each audit read: a page of PAGE, with the filters, after a cursor where it has one."""
    after = store.audit(limit=5)[-1].cursor
    alice = store.audit(actor="alice", limit=5)[-1].cursor
    since = datetime.fromtimestamp(base, UTC)
    until = datetime.fromtimestamp(base + 3_600, UTC)
    return {
        "first page": lambda: store.audit(limit=PAGE),
        "after": lambda: store.audit(limit=PAGE, after=after),
        "thread": lambda: store.audit(thread_id="s-0000003", limit=PAGE),
        "actor": lambda: store.audit(actor="alice", limit=PAGE, after=alice),
        "rare actor": lambda: store.audit(actor="carol", limit=PAGE),
        "decision": lambda: store.audit(decision="reject", limit=PAGE),
        "rare decision": lambda: store.audit(decision="edit", limit=PAGE),
        "rare tenant": lambda: store.audit(tenants=["rare"], limit=PAGE),
        "untenanted": lambda: store.audit(tenants=[None], limit=PAGE, after=after),
        "since": lambda: store.audit(since=since, limit=PAGE),
        "since until": lambda: store.audit(since=since, until=until, limit=PAGE, after=after),
        "thread decision": lambda: store.audit(thread_id="s-0000003", decision="approve", limit=PAGE),
        "actor decision since": lambda: store.audit(actor="alice", decision="approve", since=since, limit=PAGE),
        "scoped actor": lambda: store.audit(actor="carol", tenants=["rare", None], limit=PAGE),
    }


KINDS = [
    "first page", "after", "thread", "actor", "rare actor", "decision", "rare decision", "rare tenant",
    "untenanted", "since", "since until", "thread decision", "actor decision since", "scoped actor",
]
SAME = {"thread", "rare actor", "rare decision", "rare tenant", "since", "thread decision",
        "actor decision since", "scoped actor"}
"""The reads whose page is the same in both stores (the others start before the fuller
store's older interrupts, or after a cursor taken among them)."""


def _measure(store: InterruptStore, base: float) -> dict[str, tuple[Probe, list[Any]]]:
    measured = {}
    for kind, read in _reads(store, base).items():
        with probe(store) as seen:
            page = read()
        assert page, kind
        measured[kind] = (seen, [(r.thread_id, r.interrupt_id, r.action_index) for r in page])
    return measured


def _bounded(small: Probe, large: Probe) -> None:
    """:func:`assert_bounded`; on PostgreSQL the buffers allowed are the small store's plus
    a few heap and index pages per row of the page and statement (the small store's
    tables fit a page or two, read whole; the fuller store reads the mint, its ending and
    their index leaves per row, each on a page of its own)."""
    if large.dialect != "postgresql":
        assert_bounded(small, large)
        return
    assert_bounded(
        Probe(small.dialect, small.statements, rows=small.rows),
        Probe(large.dialect, large.statements, rows=large.rows),
    )
    heap = (8 * (PAGE + 1) + 4) * len(large.statements)
    assert large.buffers <= small.buffers + heap, (small.explained, large.explained)


def test_an_audit_page_touches_no_more_in_a_store_100_times_fuller(store: InterruptStore) -> None:
    """Each audit read (no filter, after=, a thread, an actor, a decision, a tenant scope,
    since/until, their combinations; rare and common matches) on ~95 interrupts, then on
    ~9,000: no plan scans the log or the projection, the same page is read where the
    fuller store's older interrupts are not on it, and the database touches no more
    (SQLite: VM steps; PostgreSQL: rows and buffers), but for a B-tree level."""
    base = time.time() - 86_400
    _fill(store, "s", COUNT, base)
    _rare(store)
    small = _measure(store, base)
    _fill(store, "u", COUNT * SCALE, base - 20_000)  # minted before the small store's
    large = _measure(store, base)
    assert set(small) == set(KINDS)
    for kind in KINDS:
        if kind in SAME:
            assert large[kind][1] == small[kind][1], kind
        try:
            _bounded(small[kind][0], large[kind][0])
        except AssertionError as exc:
            raise AssertionError(kind) from exc


def _client(store: InterruptStore, tmp_path: Path) -> TestClient:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({
        "ops": {"token_sha256": hashlib.sha256(b"ops").hexdigest(), "roles": [], "tenants": ["*"]},
        "rare": {"token_sha256": hashlib.sha256(b"rare").hexdigest(), "roles": [], "tenants": ["rare"]},
    }))
    return TestClient(create_app(store, auth=TokenAuth(tokens), rate_limits=None))


@pytest.mark.parametrize("who", ["ops", "rare"])
def test_the_api_audit_page_touches_no_more_in_a_store_100_times_fuller(
    store: InterruptStore, tmp_path: Path, who: str
) -> None:
    """GET /api/audit (a page of 20, with a filter of the rare actor, and after its cursor)
    for a principal of every tenant and for one of the rare tenant: one bounded read."""
    base = time.time() - 86_400
    _fill(store, "s", COUNT, base)
    _rare(store)
    headers = {"Authorization": f"Bearer {who}"}
    measured: list[Probe] = []
    shown: list[Any] = []
    for fill in (None, "u"):
        if fill is not None:
            _fill(store, fill, COUNT * SCALE, base - 20_000)
        with _client(store, tmp_path) as client:
            first = client.get("/api/audit", params={"limit": 2, "actor": "carol"}, headers=headers).json()
            assert first["next"] is not None
            with probe(store) as seen:
                page = client.get("/api/audit", params={"limit": PAGE, "after": first["next"]}, headers=headers)
            assert page.status_code == 200, page.text
            shown.append([(r["thread_id"], r["interrupt_id"]) for r in page.json()["items"]])
        measured.append(seen)
    if who == "rare":  # the rare tenant's page is the same in both stores
        assert shown[0] == shown[1]
    _bounded(*measured)


# --- the migration ------------------------------------------------------------------------


def _rows(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql(
            "SELECT position, thread_id, interrupt_id, tenant, actions, outcome, actor, decision,"
            " superseded_by FROM symfonic_audit_rows ORDER BY position"
        )]


def _tables(engine: Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def test_0025_fills_the_audit_rows_of_a_populated_store_as_a_rebuild_does(engine: Engine, db_url: str) -> None:
    """A populated store (bulk answers, a batched HITL request decided two ways, a tenant,
    a superseded marker, a pending one, an expiry) taken down to 0023 (no audit rows) and
    up again, twice: the rows 0025 fills are those rebuild_projection writes, and every
    filtered page reads what the whole audit holds."""
    from audit_log import rich_log

    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        _fill(store, "p", 4, time.time() - 3_600)
        _rare(store)
        rich_log(store)
        store.mint("sup", {"name": "a", "interrupt_id": "old"}, tenant="rare")
        store.mint("sup", {"name": "b", "interrupt_id": "new"}, tenant="other", actor="olga")
        whole = store.audit()
        by = {
            "carol": store.audit(actor="carol"), "edit": store.audit(decision="edit"),
            "rare": store.audit(tenants=["rare"]), "reject": store.audit(decision="reject"),
        }
    triggered = _rows(engine)
    assert len(triggered) >= len({(r.thread_id, r.interrupt_id) for r in whole}) > 20
    for _ in range(2):
        migrate(engine, "down", "0023_inbox_pages")
        assert "symfonic_audit_rows" not in _tables(engine)
        migrate(engine, "up", "head")
        filled = _rows(engine)
        with InterruptStore(db_url) as store:
            assert store.audit() == whole
            assert store.audit(actor="carol") == by["carol"]
            assert store.audit(decision="edit") == by["edit"]
            assert store.audit(tenants=["rare"]) == by["rare"]
            assert store.audit(decision="reject") == by["reject"]
            store.rebuild_projection()
            assert store.verify().ok
            assert store.audit() == whole and store.audit(decision="reject") == by["reject"]
        # A rebuild keys the words the audit derives when read (bench/bulk_load.py's answers
        # record none: "*" in the rows the triggers and the fill write), all else alike.
        rebuilt = _rows(engine)
        assert [r[:7] for r in rebuilt] == [r[:7] for r in filled]
        assert [r for r, f in zip(rebuilt, filled, strict=True) if f[7] != "*"] == [f for f in filled if f[7] != "*"]
        assert {r[7] for r, f in zip(rebuilt, filled, strict=True) if f[7] == "*"} >= {"approve", "reject"}
        # The rows the triggers kept (the answers made through the store, on top of a
        # rebuild of the bulk ones) are the rows a rebuild writes.
        assert rebuilt == triggered
