"""SPEC §17, bounded reads: an answer and a sweep batch cost what they touch, not the
history behind them -- proven by what the database touches (tests/bounded_rig.py) on a
small fixture and on one 100 times larger, in the same database, never by a clock.

- An answer reads the interrupt's own events and the projection: a thread 100 times longer
  (and a store 100 times fuller) costs it nothing more, whichever path admits or refuses
  it (``store.resume``, a LangGraph interrupt's claim and confirm, the service's answer).
- A sweep that finds k stale interrupts reads them and its pages' ends: 100 times more
  open interrupts that are not stale cost it nothing more, for either test of a seed
  marker (TTL passed, run moved on) and for LangGraph's own interrupts.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from bounded_rig import SCALE, Probe, ThreadSpec, assert_bounded, load, native_rows, probe
from factories import mint
from migration_rig import migrate
from sqlalchemy.engine import Engine

from symfonic_store import InterruptStore
from symfonic_store.errors import InterruptAlreadyResolvedError
from symfonic_store.server.approvals import Approvals, interrupt_digest
from symfonic_store.server.principal import Principal

PADDING = 20
"""Threads of the small fixture besides the ones a test acts on (the large one: 100 times)."""
HISTORY = 24
"""Events of the answered thread in the small fixture (the large one: 100 times)."""


def _answers(store: InterruptStore, thread_id: str) -> Probe:
    """Answer on ``thread_id`` (a bulk-loaded thread whose last marker is pending) every
    way an answer comes, under one probe: admitted, refused as answered already, refused
    as an old interrupt of the thread, a LangGraph interrupt's claim and confirm, and the
    service's answer to a new marker."""
    (waiting,) = store.open_interrupts(thread_id)
    marker_id = waiting["interrupt_id"]
    store.record_waiting(thread_id, [{"interrupt_id": "n-1", "value": {"question": "ship?"}}], graph="g")
    with probe(store) as seen:
        store.resume(thread_id, marker_id, {"approved": True}, actor="alice")
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume(thread_id, marker_id, {"approved": False}, actor="bob")
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume(thread_id, f"i-{1:012x}", {"approved": True}, actor="bob")
        store.claim(thread_id, "n-1", {"ok": True}, actor="alice")
        assert store.confirm(thread_id, "n-1")
    minted = mint(store, thread_id, "i-served")
    digest = interrupt_digest(thread_id, "i-served", minted["payload"])
    with probe(store) as served:
        result = Approvals(store).answer(
            Principal("carol"), thread_id, "i-served", {"approved": True}, digest
        )
    assert result.status == 200, result.body
    assert result.body["decision"] is not None
    seen.statements += served.statements
    seen.plans += served.plans
    seen.steps += served.steps
    seen.rows += served.rows
    seen.buffers += served.buffers
    seen.explained += served.explained
    return seen


def test_an_answer_reads_the_interrupt_and_the_projection_not_the_thread(store: InterruptStore) -> None:
    """Every kind of answer on a thread of 24 events in a store of ~20 threads, then on a
    thread of 2,400 events in a store of ~2,000: no plan scans the log or the projection,
    and what the database touches does not grow (SQLite: its virtual machine's steps;
    PostgreSQL: rows and buffers)."""
    load(store, [ThreadSpec("pad", PADDING, 6), ThreadSpec("t", 1, HISTORY, "pending")])
    small = _answers(store, "t-0000000")
    load(store, [ThreadSpec("pad-l", PADDING * SCALE, 6), ThreadSpec("u", 1, HISTORY * SCALE, "pending")])
    large = _answers(store, "u-0000000")
    whole = store.history("u-0000000")
    assert len(whole) > HISTORY * SCALE
    assert_bounded(small, large)
    # What the answers read of one interrupt is what the thread's history holds of it.
    for interrupt_id in ("i-served", "n-1", f"i-{1:012x}"):
        own = store.history("u-0000000", interrupt_id=interrupt_id)
        assert own and own == [e for e in whole if e.interrupt_id == interrupt_id]


def _stale_set(store: InterruptStore, tag: str, now: datetime) -> None:
    """Three seed markers past a one-hour TTL, three whose run moved on, three LangGraph
    interrupts past the TTL: nine stale interrupts, named by ``tag``."""
    load(
        store,
        [ThreadSpec(f"old-{tag}", 3, 4, "pending", stale_every=1)],
        extra=list(native_rows(f"nold-{tag}", 3, minted_at=(now - timedelta(days=2)).timestamp())),
    )
    for k in range(3):
        mint(store, f"moved-{tag}-{k}", f"i-moved-{k}", run_id="r1")
        store.record_route(f"moved-{tag}-{k}", "finish", run_id="r2")


def _fresh(store: InterruptStore, tag: str, count: int, now: datetime) -> None:
    """``count`` seed markers and ``count`` LangGraph interrupts open and not stale."""
    load(
        store,
        [ThreadSpec(f"open-{tag}", count, 4, "pending")],
        extra=list(native_rows(f"nopen-{tag}", count, minted_at=now.timestamp() - 600)),
    )


def _sweep(store: InterruptStore) -> Probe:
    with probe(store) as seen:
        report = store.sweep(ttl_seconds=3600, batch_size=50)
    assert sorted(reason for _, _, reason in report.expired) == ["run_id"] * 3 + ["ttl"] * 6
    return seen


def test_a_sweep_reads_the_stale_interrupts_not_every_open_one(store: InterruptStore) -> None:
    """A sweep that finds 9 stale interrupts (3 markers past the TTL, 3 whose run moved on,
    3 LangGraph interrupts past the TTL) among 40 open ones, then 9 others among 4,000:
    no plan scans the log or the projection, and what the database touches does not grow."""
    now = datetime.now(UTC)
    _fresh(store, "s", PADDING, now)
    _stale_set(store, "s", now)
    small = _sweep(store)
    _fresh(store, "l", PADDING * SCALE - PADDING, now)
    _stale_set(store, "l", now)
    assert len(store.list_pending()) >= 2 * PADDING * SCALE
    large = _sweep(store)
    assert_bounded(small, large)


def test_a_sweep_that_finds_nothing_stale_reads_next_to_nothing(store: InterruptStore) -> None:
    """The run test and the TTL test of a sweep among open interrupts none of which is
    stale: the same cost among 40 as among 4,000 (a dry run, and a real one)."""
    now = datetime.now(UTC)
    _fresh(store, "s", PADDING, now)
    with probe(store) as small:
        assert store.sweep(ttl_seconds=3600, dry_run=True).expired == []
        assert store.sweep(ttl_seconds=3600).expired == []
    _fresh(store, "l", PADDING * SCALE - PADDING, now)
    with probe(store) as large:
        assert store.sweep(ttl_seconds=3600, dry_run=True).expired == []
        assert store.sweep(ttl_seconds=3600).expired == []
    assert_bounded(small, large)


RUN_INDEX = "ix_symfonic_threads_run_moved_on"


def _thread_indexes(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {i["name"] for i in sa.inspect(conn).get_indexes("symfonic_threads") if i["name"]}


def test_0022_indexes_the_threads_whose_run_moved_on_already_there(engine: Engine, db_url: str) -> None:
    """A populated store taken down to 0021 (no index, as the release before has it) and up
    again, twice: the index is built over the threads already there, and the sweep finds
    through it the marker whose run moved on before the upgrade."""
    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        _fresh(store, "m", 5, datetime.now(UTC))
        mint(store, "t-moved", "i-moved", run_id="r1")
        store.record_route("t-moved", "finish", run_id="r2")
    for _ in range(2):
        migrate(engine, "down", "0021_ignore_audit")
        assert RUN_INDEX not in _thread_indexes(engine)
        migrate(engine, "up", "head")
        assert RUN_INDEX in _thread_indexes(engine)
        with InterruptStore(db_url) as store:
            assert store.sweep(dry_run=True).expired == [("t-moved", "i-moved", "run_id")]
    # Built by hand first, as docs/operations.md says for a large store: the upgrade keeps it.
    migrate(engine, "down", "0021_ignore_audit")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE INDEX {RUN_INDEX} ON symfonic_threads (thread_id) WHERE pending_interrupt_id IS NOT NULL"
            " AND pending_run_id IS NOT NULL AND (run_id IS NULL OR run_id != pending_run_id)"
        )
    migrate(engine, "up", "head")
    assert RUN_INDEX in _thread_indexes(engine)
    with InterruptStore(db_url) as store:
        assert store.sweep().expired == [("t-moved", "i-moved", "run_id")]
        assert store.verify().ok
