"""The projection's ``tenant`` and ``assigned_to`` (migration 0024, SPEC §15 and §17): every
writer keeps them as the fold says (a mint carries its tenant, the latest
``interrupt.assigned`` stands, an ending clears the marker's), ``rebuild_projection`` makes
the same rows, and ``list_pending(assigned_to=...)`` / ``tenants=`` read them, on SQLite and
PostgreSQL."""

from __future__ import annotations

from typing import Any

import factories
import pytest
import sqlalchemy as sa

from symfonic_store import InterruptStore
from symfonic_store.db.schema import open_interrupts, threads
from symfonic_store.errors import InvalidInputError


def _native(store: InterruptStore, thread_id: str, *, tenant: str | None = None) -> str:
    """A LangGraph interrupt left open on ``thread_id`` (as the gateway records it)."""
    interrupt_id = thread_id.ljust(32, "0")[:32]
    store.record_waiting(thread_id, [{
        "interrupt_id": interrupt_id, "value": {"question": thread_id}, "task_id": "task",
        "checkpoint_id": f"cp-{thread_id}", "checkpoint_ns": "", "breakpoint": False,
    }], graph="g", tenant=tenant)
    return interrupt_id


def _columns(store: InterruptStore) -> dict[str, dict[tuple[str, str], tuple[Any, Any]]]:
    """``(tenant, assigned_to)`` of every open interrupt in each projection table."""
    with store.engine.connect() as conn:
        marked = conn.execute(
            sa.select(threads.c.thread_id, threads.c.pending_interrupt_id, threads.c.tenant,
                      threads.c.assigned_to)
        ).all()
        native = conn.execute(
            sa.select(open_interrupts.c.thread_id, open_interrupts.c.interrupt_id,
                      open_interrupts.c.tenant, open_interrupts.c.assigned_to)
        ).all()
    return {
        "threads": {(r[0], r[1] or ""): (r[2], r[3]) for r in marked},
        "open": {(r[0], r[1]): (r[2], r[3]) for r in native},
    }


def _keys(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(i["thread_id"], i["interrupt_id"]) for i in items]


def test_the_assignment_filter_follows_the_latest_assignment(store: InterruptStore) -> None:
    """A marker and a LangGraph interrupt, assigned to a principal and to a role: each
    filter lists its own; a reassignment moves the interrupt between filters; an answered
    or expired one leaves them; the projection's columns are what a rebuild makes."""
    m = factories.mint(store, "scope-m", actor="req")["interrupt_id"]
    other = factories.mint(store, "scope-o")["interrupt_id"]
    n = _native(store, "scope-n")
    assert store.list_pending(assigned_to="bob") == []

    store.assign("scope-m", m, to="bob", actor="lead")
    store.assign("scope-n", n, to="finance", kind="role", actor="lead")
    assert _keys(store.list_pending(assigned_to="bob")) == [("scope-m", m)]
    assert _keys(store.list_pending(assigned_to=" bob ")) == [("scope-m", m)]  # trimmed, as assign
    assert _keys(store.list_pending(assigned_to="role:finance")) == [("scope-n", n)]
    assert store.list_pending(assigned_to="finance") == []  # a principal, not the role
    assert store.list_pending(assigned_to="role:bob") == []
    cols = _columns(store)
    assert cols["threads"][("scope-m", m)] == (None, "bob")
    assert cols["threads"][("scope-o", other)] == (None, None)
    assert cols["open"][("scope-n", n)] == (None, "role:finance")

    # Reassigned: it moves from one filter to the other (the latest assignment stands).
    store.assign("scope-m", m, to="finance", kind="role", actor="lead")
    store.assign("scope-n", n, to="bob", actor="lead")
    assert _keys(store.list_pending(assigned_to="bob")) == [("scope-n", n)]
    assert _keys(store.list_pending(assigned_to="role:finance")) == [("scope-m", m)]
    before = _columns(store)
    store.rebuild_projection()
    assert _columns(store) == before

    # Resolved: it leaves the filter (and its row).
    store.resume("scope-m", m, {"approved": True}, actor="alice")
    assert store.list_pending(assigned_to="role:finance") == []
    store.record_waiting("scope-n", [], graph="g")  # LangGraph no longer waits on it
    assert store.list_pending(assigned_to="bob") == []
    assert _keys(store.list_pending()) == [("scope-o", other)]
    after = _columns(store)
    assert after["threads"][("scope-m", "")] == (None, None)
    assert after["open"] == {}
    store.rebuild_projection()
    assert _columns(store) == after


def test_a_new_marker_starts_unassigned(store: InterruptStore) -> None:
    """A mint that supersedes an assigned marker leaves the new one unassigned."""
    first = factories.mint(store, "scope-s")["interrupt_id"]
    store.assign("scope-s", first, to="bob", actor="lead")
    second = factories.mint(store, "scope-s")["interrupt_id"]
    assert store.list_pending(assigned_to="bob") == []
    assert _columns(store)["threads"][("scope-s", second)] == (None, None)


def test_tenant_scopes_read_the_rows_tenant(store: InterruptStore) -> None:
    """Each open interrupt's row carries its mint's tenant; a scope of several tenants
    (``None``: untenanted) lists exactly theirs, oldest first, pages following one another;
    a rebuild makes the same rows."""
    minted: dict[str | None, list[tuple[str, str]]] = {"acme": [], "zeta": [], None: []}
    for i in range(4):
        for tenant in ("acme", "zeta", None):
            t = f"scope-{tenant}-{i}"
            mark = factories.marker()
            store.mint(t, mark, tenant=tenant)
            minted[tenant].append((t, mark["_interrupt_pending"]["interrupt_id"]))
            n = f"scope-n-{tenant}-{i}"
            minted[tenant].append((n, _native(store, n, tenant=tenant)))
    cols = _columns(store)
    for tenant, keys in minted.items():
        for key in keys:
            assert (cols["threads"] | cols["open"])[key] == (tenant, None)
    everything = store.list_pending()
    for scope in ({"acme"}, {"acme", None}, {"acme", "zeta"}, {None}, {"acme", "zeta", None}):
        wanted = [k for k in _keys(everything) if any(k in minted[t] for t in scope)]
        assert _keys(store.list_pending(tenants=scope)) == wanted
        seen: list[tuple[str, str]] = []
        page = store.list_pending(tenants=scope, limit=3)
        while page:
            seen += _keys(page)
            page = store.list_pending(tenants=scope, limit=3, after=page[-1]["cursor"])
        assert seen == wanted
        first = store.list_pending(tenants=scope, limit=1)[0]
        assert _keys(store.list_pending(tenants=scope, assigned_to="bob")) == []
        store.assign(first["thread_id"], first["interrupt_id"], to="bob", actor="lead")
        assert _keys(store.list_pending(tenants=scope, assigned_to="bob")) == _keys([first])
        if first.get("source") != "langgraph":
            store.resume(first["thread_id"], first["interrupt_id"], {"ok": True}, actor="bob")
        else:
            store.record_waiting(first["thread_id"], [], graph="g")
        everything = store.list_pending()
        for keys in minted.values():
            if (first["thread_id"], first["interrupt_id"]) in keys:
                keys.remove((first["thread_id"], first["interrupt_id"]))
    assert store.list_pending(tenants=set()) == []
    before = _columns(store)
    store.rebuild_projection()
    assert _columns(store) == before


@pytest.mark.parametrize("bad", ["", "role:", "role:  ", 7, "x" * 256])
def test_an_assignee_that_names_no_one_is_refused(store: InterruptStore, bad: Any) -> None:
    with pytest.raises(InvalidInputError) as raised:
        store.list_pending(assigned_to=bad)
    assert raised.value.field == "assigned_to"
