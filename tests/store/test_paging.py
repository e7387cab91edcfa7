"""Paging in Python and the CLI (SPEC §17): ``audit(limit=, after=)`` and
``list_pending(after=)``, with an opaque cursor on each item; keyset pages that hold every
item exactly once while others append between the reads."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from audit_log import rich_log
from cli_helpers import assert_clean_error, run_cli, run_json
from freezegun import freeze_time

from symfonic_store import AsyncInterruptStore, InterruptStore
from symfonic_store.errors import InvalidInputError

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)

WAITING = {"task_id": "task", "checkpoint_id": "c" * 32, "checkpoint_ns": "", "breakpoint": False}
HITL = {"action_requests": [{"name": n, "args": {}} for n in ("wire", "mail", "drop")], "review_configs": []}


def _native(store: InterruptStore, thread_id: str, interrupt_id: str, value: Any) -> None:
    store.record_waiting(thread_id, [{"interrupt_id": interrupt_id, "value": value, **WAITING}], graph="g")


def history(store: InterruptStore) -> None:
    """Markers answered, refused, expired and pending; batched HITL requests; tenants; two actors."""
    rich_log(store)
    for i in range(6):
        store.mint(f"p-{i}", {"name": "pay", "interrupt_id": f"i-{i}", "payload": {"n": i}},
                   tenant="acme" if i % 2 else None)
        if i % 3 == 0:
            store.resume(f"p-{i}", f"i-{i}", {"approved": i % 2 == 0}, actor="alice" if i else "bob")
    store.mint("p-0", {"name": "pay", "interrupt_id": "i-again"}, tenant="acme")
    store.resume("p-0", "i-again", {"approved": False}, actor="alice")
    _native(store, "h-1", "h" * 32, HITL)
    store.claim("h-1", "h" * 32, {"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"},
                                                {"type": "approve"}]}, actor="alice")
    store.confirm("h-1", "h" * 32)


def read_all(read: Callable[..., list[Any]], key: Callable[[Any], str], limit: int, **filters: Any) -> list[Any]:
    """Every page of ``read`` from the first to the last."""
    items: list[Any] = []
    after = None
    while True:
        page = read(limit=limit, after=after, **filters)
        assert len(page) <= limit
        items += page
        if len(page) < limit:
            return items
        after = key(page[-1])


def record_key(r: Any) -> tuple[str, str, int | None]:
    return r.thread_id, r.interrupt_id, r.action_index


FILTERS: list[dict[str, Any]] = [
    {},
    {"thread_id": "p-0"},
    {"thread_id": "h-1"},
    {"actor": "alice"},
    {"decision": "reject"},
    {"decision": "approve"},
    {"tenant": "acme"},
    {"tenants": ["acme", None]},
    {"since": T0 - timedelta(days=3650)},
    {"until": T0 + timedelta(days=3650)},
    {"since": T0 + timedelta(days=3650)},
]


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f) or "none")
def test_the_pages_of_the_audit_are_the_whole_audit(store: InterruptStore, filters: dict[str, Any]) -> None:
    """Read page by page (1, 2, 3 and 50 at a time, batched requests cut mid-way), the records are audit()'s, each once, in mint order."""
    history(store)
    whole = store.audit(**filters)
    for limit in (1, 2, 3, 50):
        paged = read_all(store.audit, lambda r: r.cursor, limit, **filters)
        assert sorted(paged, key=lambda r: r.minted_at) == whole, limit
        assert len({r.cursor for r in paged}) == len(paged)
    assert filters.get("since") is not None or len(whole) > 1


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f) or "none")
def test_audit_pages_hold_every_record_once_while_others_append(
    store: InterruptStore, filters: dict[str, Any]
) -> None:
    """Between page reads new interrupts are minted, answered and refused on other threads and on the same ones: every record there at the first read is on exactly one page, none twice."""
    history(store)
    before = {record_key(r) for r in store.audit(**filters)}
    seen: list[tuple[str, str, int | None]] = []
    after, turn = None, 0
    while True:
        page = store.audit(limit=2, after=after, **filters)
        seen += [record_key(r) for r in page]
        if len(page) < 2:
            break
        after = page[-1].cursor
        turn += 1
        if turn > 4:  # appends faster than pages read would never let the reader finish
            continue
        # Others append meanwhile: a new thread, the same threads, an answer, a refusal.
        store.mint(f"new-{turn}", {"name": "pay", "interrupt_id": "i-1"}, tenant="acme")
        store.mint("p-0", {"name": "pay", "interrupt_id": f"more-{turn}"}, tenant="acme")
        store.resume("p-0", f"more-{turn}", {"approved": False}, actor="alice")
        store.mint(page[-1].thread_id, {"name": "pay", "interrupt_id": f"same-{turn}"})
        store.record_refusal(page[-1].thread_id, f"same-{turn}", actor="eve", error="policy")
        _native(store, "h-1", f"{turn:032d}", HITL)
    assert len(seen) == len(set(seen)), "a record on two pages"
    assert before <= set(seen), before - set(seen)
    assert turn >= 1 or len(before) < 2  # others appended at least once mid-read


def test_a_page_without_a_limit_reads_on_to_the_end(store: InterruptStore) -> None:
    """after= alone: every record after the cursor; audit() without limit or after is unchanged."""
    history(store)
    whole = store.audit()
    rest = store.audit(after=whole[2].cursor)
    assert sorted(whole[:3] + rest, key=lambda r: r.minted_at) == whole


async def test_the_async_store_pages_the_audit_and_the_inbox(astore: AsyncInterruptStore) -> None:
    """The asyncio store takes limit/after and hands out the same cursors."""
    for i in range(5):
        await astore.mint(f"a-{i}", {"name": "pay", "interrupt_id": "i"})
    whole = await astore.audit()
    first = await astore.audit(limit=2)
    second = await astore.audit(limit=2, after=first[-1].cursor)
    assert first + second == whole[:4]
    pending = await astore.list_pending()
    page = await astore.list_pending(limit=3, after=pending[0]["cursor"])
    assert page == pending[1:4]
    with pytest.raises(ValueError, match="after"):
        await astore.audit(after="nonsense")


def _forged(*key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


BAD_AUDIT_CURSORS = [
    "", "nonsense", "!!!", "a" * 5000, _forged("audit", "t-m"), _forged("audit", "t-m", "i-1", True),
    _forged("audit", "t-m", "i-1", "0"), _forged("pending", 1.0, 0, "t-m", "i-1"),
    _forged("audit", "t-m", "never-minted", -1), base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    # What no id may be, and an index no column holds: refused, never handed to the driver.
    _forged("audit", "a\ud800", "i-1", -1), _forged("audit", "t\x00m", "i-1", -1),
    _forged("audit", "t-m", "i-1", 10**30), _forged("audit", "t" * 300, "i-1", -1),
]


@pytest.mark.parametrize("cursor", BAD_AUDIT_CURSORS)
def test_a_forged_audit_cursor_is_a_value_error(store: InterruptStore, cursor: str) -> None:
    """A cursor the audit did not hand out is an InvalidInputError (a ValueError) naming after."""
    rich_log(store)
    with pytest.raises(InvalidInputError, match="after") as raised:
        store.audit(limit=2, after=cursor)
    assert isinstance(raised.value, ValueError)


def test_a_cursor_of_another_thread_is_refused(store: InterruptStore) -> None:
    """A thread's pages take only that thread's cursors (its keys are versions in it)."""
    history(store)
    other = store.audit(thread_id="p-1")[0].cursor
    with pytest.raises(InvalidInputError, match="another thread"):
        store.audit(thread_id="p-0", limit=2, after=other)


@pytest.mark.parametrize("cursor", [
    "nonsense", _forged("pending", 1.0, 2, "t", "i"), _forged("pending", "1", 0, "t", "i"),
    _forged("audit", "t-m", "i-1", -1), _forged("pending", 1.0, 0, "t"), '"NaN"',
    _forged("pending", float("inf"), 0, "t", "i"), _forged("pending", 10**400, 0, "t", "i"),
    _forged("pending", 1.0, 0, "t\x00", "i"), _forged("pending", 1.0, 0, "a\ud800", "i"),
])
def test_a_forged_pending_cursor_is_a_value_error(store: InterruptStore, cursor: str) -> None:
    """list_pending(after=) refuses what it did not hand out, before reading anything."""
    with pytest.raises(InvalidInputError, match="after"):
        store.list_pending(after=cursor)


def test_list_pending_pages_markers_and_langgraph_interrupts_of_one_time(store: InterruptStore) -> None:
    """Markers and open LangGraph interrupts minted at the same instant, paged 1..4 at a time: the pages are list_pending(), and each item carries its cursor."""
    with freeze_time(T0):
        for i in range(3):
            store.mint(f"m-{i}", {"name": "pay", "interrupt_id": "i"}, tenant="acme" if i else None)
            store.record_waiting(f"n-{i}", [{"interrupt_id": c * 32, "value": {"q": i}, **WAITING}
                                            for c in "xy"], graph="g")
    with freeze_time(T0 + timedelta(seconds=1)):
        store.mint("m-late", {"name": "pay", "interrupt_id": "i"})
    whole = store.list_pending()
    assert len(whole) == 10 and all(isinstance(p["cursor"], str) for p in whole)
    for limit in (1, 2, 3, 4):
        assert read_all(store.list_pending, lambda p: p["cursor"], limit) == whole
    scoped = store.list_pending(tenant="acme")
    assert read_all(store.list_pending, lambda p: p["cursor"], 1, tenant="acme") == scoped


def test_list_pending_filters_by_thread_and_name_in_its_pages(store: InterruptStore) -> None:
    """list_pending(thread_id=, name=): the whole list's items of that thread or name, in its
    order, paged 1..3 at a time with the same cursors; a thread or name of nothing is []."""
    with freeze_time(T0):
        for i in range(3):
            store.mint(f"m-{i}", {"name": "pay" if i % 2 else "ship", "interrupt_id": "i"},
                       tenant="acme" if i else None)
            store.record_waiting(f"n-{i}", [{"interrupt_id": c * 32, "value": {"q": i}, **WAITING}
                                            for c in "xy"], graph="g")
    with freeze_time(T0 + timedelta(seconds=1)):
        store.mint("n-1", {"name": "pay", "interrupt_id": "late"})
    whole = store.list_pending()
    names = {p.get("name") for p in whole}
    cases: list[dict[str, Any]] = [
        {"thread_id": "n-1"}, {"thread_id": "m-2"}, {"name": "pay"}, {"name": "ship"},
        {"name": "pay", "thread_id": "n-1"}, {"name": "pay", "tenants": ["acme"]},
        *({"name": n} for n in names if n is not None),
    ]
    for filters in cases:
        tenants = filters.get("tenants")
        wanted = [
            p for p in (whole if tenants is None else store.list_pending(tenants=tenants))
            if all(p.get(k) == v for k, v in filters.items() if k != "tenants")
        ]
        assert store.list_pending(**filters) == wanted, filters
        assert wanted, filters
        for limit in (1, 2, 3):
            assert read_all(store.list_pending, lambda p: p["cursor"], limit, **filters) == wanted
    assert store.list_pending(thread_id="nobody") == [] and store.list_pending(name="nothing") == []


def test_list_pending_pages_hold_every_item_once_while_others_mint(store: InterruptStore) -> None:
    """New markers and LangGraph interrupts (some at the very time of the last item read), answers and supersedes between pages: every item open throughout is on one page, none twice."""
    with freeze_time(T0) as clock:
        for i in range(8):
            store.mint(f"m-{i}", {"name": "pay", "interrupt_id": "i"})
            _native(store, f"n-{i}", "x" * 32, {"q": i})
        kept = {(p["thread_id"], p["interrupt_id"]) for p in store.list_pending()}
        seen: list[tuple[str, str]] = []
        after, turn = None, 0
        while True:
            page = store.list_pending(limit=3, after=after)
            seen += [(p["thread_id"], p["interrupt_id"]) for p in page]
            if len(page) < 3:
                break
            after, turn = page[-1]["cursor"], turn + 1
            if turn > 4:  # appends faster than pages read would never let the reader finish
                continue
            store.mint(f"late-{turn}", {"name": "pay", "interrupt_id": "i"})  # same instant
            _native(store, f"late-n-{turn}", "z" * 32, {"q": turn})
            clock.tick(1)
            store.mint(f"later-{turn}", {"name": "pay", "interrupt_id": "i"})
    assert len(seen) == len(set(seen))
    assert kept <= set(seen)


def test_cli_audit_pages_with_limit_and_after(store: InterruptStore, migrated_url: str) -> None:
    """`audit --limit N --after CURSOR`: json records carry their cursor, stderr names the next page's flag, and the pages are the whole audit."""
    history(store)
    whole = run_json("audit", "--format", "json", db=migrated_url)
    assert "cursor" not in whole[0]
    paged: list[dict[str, Any]] = []
    args: list[str] = []
    while True:
        result = run_cli("audit", "--format", "json", "--limit", "4", *args, db=migrated_url)
        assert result.returncode == 0, result.stderr
        page = json.loads(result.stdout)
        paged += page
        if len(page) < 4:
            assert "next page" not in result.stderr
            break
        assert result.stderr.strip() == f"next page: --after {page[-1]['cursor']}"
        args = ["--after", page[-1]["cursor"]]
    assert sorted(({k: v for k, v in r.items() if k != "cursor"} for r in paged),
                  key=lambda r: r["minted_at"]) == whole
    table = run_cli("audit", "--limit", "2", "--thread", "p-0", db=migrated_url)
    assert table.returncode == 0 and "2 interrupt(s)" in table.stdout, table


def test_cli_audit_refuses_a_forged_cursor_with_one_line(store: InterruptStore, migrated_url: str) -> None:
    """A forged --after is exit 2 with one stderr line naming after; --limit 0 a usage error."""
    rich_log(store)
    message = assert_clean_error(run_cli("audit", "--after", "nonsense", db=migrated_url), 2)
    assert "after" in message
    assert_clean_error(run_cli("audit", "--limit", "0", db=migrated_url), 2)


def test_a_cursor_of_another_tenants_record_is_refused_as_an_unknown_one(store: InterruptStore) -> None:
    """Under ``tenants=``, a cursor naming another tenant's interrupt (forged: cursors are
    not secret) is refused with exactly the words of one naming no interrupt, so a scoped
    reader learns nothing of what it may not see (SPEC §15)."""
    store.mint("s-1", {"name": "pay", "interrupt_id": "i-1"}, tenant="acme")
    store.mint("s-2", {"name": "pay", "interrupt_id": "i-2"}, tenant="globex")
    store.mint("s-3", {"name": "pay", "interrupt_id": "i-3"}, tenant="acme")
    hidden = store.audit(thread_id="s-2")[0].cursor
    unknown = _forged("audit", "s-9", "i-9", -1)
    refusals = []
    for cursor in (hidden, unknown):
        with pytest.raises(InvalidInputError) as raised:
            store.audit(tenants=["acme"], limit=5, after=cursor)
        refusals.append(str(raised.value))
    assert refusals[0] == refusals[1]
    assert [r.interrupt_id for r in store.audit(tenants=["globex"], limit=5, after=hidden)] == []


def test_a_scope_of_hundreds_of_tenants_reads_as_one_walk(store: InterruptStore) -> None:
    """A principal of 600 tenants: the inbox's and the audit's pages (with and without an
    actor) are one walk with the tenants checked on its rows, not a branch per tenant
    (SQLite takes at most 500 terms of a compound SELECT), and keep exactly that scope."""
    for i in range(4):
        store.mint(f"w-{i}", {"name": "pay", "interrupt_id": "i"}, tenant=f"t{i:03d}")
        store.resume(f"w-{i}", "i", {"approved": True}, actor="alice") if i % 2 else None
    store.mint("w-none", {"name": "pay", "interrupt_id": "i"})
    scope = [f"t{i:03d}" for i in range(1, 600)]  # not t000
    pending = store.list_pending(tenants=scope, limit=10)
    assert [p["thread_id"] for p in pending] == ["w-2"]
    assert [r.thread_id for r in store.audit(tenants=scope, limit=10)] == ["w-1", "w-2", "w-3"]
    assert [r.thread_id for r in store.audit(tenants=[*scope, None], actor="alice", limit=10)] == ["w-1", "w-3"]
