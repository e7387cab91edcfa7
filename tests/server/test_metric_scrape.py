"""SPEC §17: one scrape of ``/metrics`` costs the same at a thousand open interrupts and at
a hundred thousand (what the database touches, tests/bounded_rig.py), and a new process
reports the counters the log has without folding it from position 0. Migration 0026
backfills the counts and counters of a populated store, so the first scrape after the
upgrade is right."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from audit_log import rich_log
from bounded_rig import SCALE, Probe, ThreadSpec, assert_bounded, load, native_rows, probe
from factories import marker
from freezegun import freeze_time
from migration_rig import migrate
from sqlalchemy.engine import Engine

from symfonic_store import InterruptStore
from symfonic_store.server.metrics import ServiceMetrics
from symfonic_store.services import metric_counts
from symfonic_store.store.plan import Op

COUNT = 20
"""Threads of each kind in the small store (the fuller one: 100 times more)."""
SCOPE = frozenset({"acme", None})


def _fill(store: InterruptStore, prefix: str, count: int, base: float) -> None:
    """``count`` threads of each kind: answered markers, pending markers (half for acme),
    expired markers, and open LangGraph interrupts."""
    start = datetime.fromtimestamp(base, UTC)
    load(
        store,
        [
            ThreadSpec(f"{prefix}r", count, 4, ending="resumed"),
            ThreadSpec(f"{prefix}p", count, 4, ending="pending", tenant="acme"),
            ThreadSpec(f"{prefix}q", count, 2, ending="pending"),
            ThreadSpec(f"{prefix}x", count, 3, ending="expired"),
        ],
        start=start,
        extra=list(native_rows(f"{prefix}n", count, minted_at=base + 50)),
    )


def _traffic(store: InterruptStore, tag: str) -> None:
    """What happens between two scrapes: a few mints, an answer, an expiry."""
    for n in range(3):
        store.mint(f"{tag}-{n}", marker(f"i-{n}"), tenant="acme" if n else None)
    store.resume(f"{tag}-0", "i-0", {"approved": True}, actor="ann")
    store.expire(f"{tag}-1", "i-1", actor="bob")


def _scrape(store: InterruptStore, scope: frozenset[str | None] | None) -> tuple[Probe, str]:
    metrics = ServiceMetrics(store)
    # Catch up with the loaded log first, as scrapes do, a budget at a time (once: the
    # fold is kept in the database); what is measured is a scrape after a few writes.
    while metrics.tail.position != metrics.tail.catch_up():
        pass
    _traffic(store, f"tr-{time.monotonic_ns()}")
    with probe(store) as seen:
        text = metrics.render(scope).decode()
    return seen, text


def _store_only(seen: Probe) -> Probe:
    """On PostgreSQL, the probe less the writers' horizon (the reads of ``events(after=)``
    and of the reader lag): it reads the server's lock table, whose rows are the other
    sessions of the server (other tests' among them), not the store's."""
    if seen.dialect != "postgresql":
        return seen
    kept = [e for e in seen.explained if "pg_locks" not in e[0]]
    return Probe(
        seen.dialect, [e[0] for e in kept], explained=kept,
        rows=sum(e[1] for e in kept), buffers=sum(e[2] for e in kept),
    )


def _figure(text: str, line: str) -> float:
    found = re.search(rf"^{re.escape(line)} (\S+)$", text, re.M)
    assert found, (line, text)
    return float(found.group(1))


@pytest.mark.parametrize("scope", [None, SCOPE], ids=["all", "scoped"])
def test_a_scrape_touches_no_more_in_a_store_100_times_fuller(
    store: InterruptStore, scope: frozenset[str | None] | None
) -> None:
    """A scrape after a few writes, on ~100 open interrupts then on ~10,000 (and a log 100
    times longer): no plan scans the log or the projection, and the database touches no
    more (SQLite: VM steps; PostgreSQL: rows and buffers), but for a B-tree level. The
    figures are the store's: every open interrupt counted, the answers folded."""
    base = time.time() - 86_400
    _fill(store, "s-", COUNT, base)
    small, _ = _scrape(store, scope)
    _fill(store, "t-", COUNT * SCALE, base + 10_000)
    large, text = _scrape(store, scope)
    assert_bounded(_store_only(small), _store_only(large))
    total = COUNT * (1 + SCALE)
    # The scope holds every tenant here: a scope's count is the whole store's (the test
    # below shows a scope leaving tenants out).
    assert _figure(text, 'symfonic_open_interrupts{source="langgraph"}') == total
    # Pending markers: acme's, those of no tenant, and the one each scrape's traffic left.
    assert _figure(text, 'symfonic_open_interrupts{source="marker"}') == 2 * total + 2
    assert _figure(text, 'symfonic_answers_total{outcome="resumed"}') >= total


def test_a_new_process_reports_the_same_counters_without_reading_the_log_from_0(
    store: InterruptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second ServiceMetrics (as a new process, or another replica, has) renders what the
    first did, reading the log only after the position the first reached; and an event
    appended since is folded once, whichever of the two scrapes first."""
    rich_log(store)
    with freeze_time(datetime.now(UTC)):
        first = ServiceMetrics(store).render().decode()
        reads: list[int] = []
        folded = metric_counts.events_after

        def spy(conn: Any, after: int, limit: int | None) -> Any:
            reads.append(after)
            return folded(conn, after=after, limit=limit)

        monkeypatch.setattr(metric_counts, "events_after", spy)
        second = ServiceMetrics(store)
        assert second.render().decode() == first
    position = _figure(first, "symfonic_log_position")
    assert position > 0 and reads and min(reads) == position
    store.mint("t-later", marker("i-later"))
    again, other = ServiceMetrics(store), ServiceMetrics(store)
    again.render()
    text = other.render().decode()
    minted = 'symfonic_events_total{type="interrupt.minted"}'
    assert _figure(text, minted) == _figure(first, minted) + 1


def test_a_scrape_under_a_tenant_scope_counts_only_its_tenants_open_interrupts(store: InterruptStore) -> None:
    """The open gauges of a scope count its tenants' interrupts only, before and after a
    compaction moved the writes' deltas into the totals."""
    for n, tenant in enumerate(("acme", "acme", "globex", None)):
        store.mint(f"t-{n}", marker(f"i-{n}"), tenant=tenant)
    metrics = ServiceMetrics(store)
    line = 'symfonic_open_interrupts{source="marker"}'
    for _ in range(2):  # the first render compacts; the second reads the totals
        assert _figure(metrics.render(frozenset({"acme"})).decode(), line) == 2
        assert _figure(metrics.render(frozenset({"globex", None})).decode(), line) == 2
        assert _figure(metrics.render(frozenset({"initech"})).decode(), line) == 0
        assert _figure(metrics.render().decode(), line) == 4
    store.resume("t-0", "i-0", {"approved": True}, actor="ann")
    assert _figure(metrics.render(frozenset({"acme"})).decode(), line) == 1


def test_0026_backfills_the_counts_and_counters_of_a_populated_store(engine: Engine, db_url: str) -> None:
    """A populated store taken down to 0023 (no count tables) and up again, twice: the first
    scrape after the upgrade shows what a scrape showed before, without folding the log."""
    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        rich_log(store)
        for n, tenant in enumerate(("acme", "globex", None)):
            store.mint(f"t-ten{n}", marker(f"a-{n}"), tenant=tenant)
        with freeze_time(datetime.now(UTC)):
            before = {s: ServiceMetrics(store).render(s).decode() for s in (None, frozenset({"acme"}))}
    for _ in range(2):
        migrate(engine, "down", "0023_inbox_pages")
        migrate(engine, "up", "head")
        with InterruptStore(db_url) as store, freeze_time(datetime.now(UTC)):
            # Nothing is left to fold: the backfill reached the last event.
            reached = _figure(before[None], "symfonic_log_position")
            assert store.runner.run(Op(metric_counts.fold_page, write=True, appends=False)) == (reached, 0)
            after = {s: ServiceMetrics(store).render(s).decode() for s in (None, frozenset({"acme"}))}
        for scope, text in after.items():
            assert _without_ages(text) == _without_ages(before[scope])


def _without_ages(text: str) -> str:
    """The exposition less what moves with the clock between two scrapes."""
    return "\n".join(
        line for line in text.splitlines()
        if not line.startswith(("symfonic_oldest_open_interrupt_age_seconds", "symfonic_reader_lag"))
    )

