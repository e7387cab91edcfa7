"""SPEC §17, bounded reads, the store's side: one interrupt, its votes and assignment, the
event stream's pages (a tenant-scoped reader's too), a notifier batch, and the per-thread
reads (``history`` of one interrupt, ``replay``) cost what they return, not the history
behind them -- proven by what the database touches (tests/bounded_rig.py: SQLite's plans
and virtual machine steps, PostgreSQL's rows and buffers) on a small fixture and on one
100 times larger, in the same database, never by a clock.

(The answers and the sweep batches: tests/store/test_bounded_reads.py; the service's reads
of one interrupt and its answers: tests/server/test_read_bounds.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from bounded_rig import (
    SCALE,
    Probe,
    ThreadSpec,
    assert_bounded,
    crowded_thread,
    load,
    native_rows,
    probe,
)
from factories import marker
from notify_rig import Receiver, http_receiver, write_secret

from symfonic_store import InterruptStore
from symfonic_store.db.schema import events
from symfonic_store.notify import Notifier
from symfonic_store.redaction import visible_events
from symfonic_store.server.approvals import Approvals
from symfonic_store.server.principal import Principal

PADDING = 20
"""Threads of the small fixture besides the ones a test reads (the large one: 100 times)."""
HISTORY = 24
"""Events of the thread read in the small fixture (the large one: 100 times)."""
PAGE = 50
FIRST = f"i-{1:012x}"
"""The first interrupt of a bulk-loaded thread: minted, routed, resumed."""


def _interrupt_reads(store: InterruptStore, thread_id: str) -> Probe:
    """Every read of one interrupt of ``thread_id`` the store offers, under one probe: its
    history, its mint, its tenant, its assignment and votes, and the thread's escalations
    (none) -- for its first interrupt (answered long ago) and its last (open, voted on)."""
    (waiting,) = store.open_interrupts(thread_id)
    open_id = waiting["interrupt_id"]
    store.assign(thread_id, open_id, to="alice", actor="lead")
    store.vote(thread_id, open_id, "approve", {"ok": True}, actor="bob")
    with probe(store) as seen:
        for interrupt_id in (FIRST, open_id):
            assert store.history(thread_id, interrupt_id=interrupt_id)
            assert store.interrupt_record(thread_id, interrupt_id) is not None
            assert (thread_id, interrupt_id) in store.interrupt_tenants([(thread_id, interrupt_id)])
        assert store.assignment(thread_id, open_id) is not None
        assert len(store.votes(thread_id, open_id)) == 1
        assert store.escalations([thread_id]) == []
    return seen


def test_one_interrupts_reads_cost_its_events_not_the_threads(store: InterruptStore) -> None:
    """One interrupt's history, mint, tenant, assignment and votes on a thread of 24 events
    in a store of ~20 threads, then on a thread of 2,400 in a store of ~2,000: no plan scans
    the log or the projection, and what the database touches does not grow."""
    load(store, [ThreadSpec("pad", PADDING, 6), ThreadSpec("t", 1, HISTORY, "pending")])
    small = _interrupt_reads(store, "t-0000000")
    load(store, [ThreadSpec("pad-l", PADDING * SCALE, 6), ThreadSpec("u", 1, HISTORY * SCALE, "pending")])
    large = _interrupt_reads(store, "u-0000000")
    assert len(store.history("u-0000000")) > HISTORY * SCALE
    assert_bounded(small, large)


def _replay(store: InterruptStore, thread_id: str) -> Probe:
    with probe(store) as seen:
        steps = list(store.replay(thread_id))
        whole = store.history(thread_id)
    assert len(steps) == len(whole) == HISTORY
    return seen


def test_a_threads_replay_and_history_cost_the_thread_not_the_store(store: InterruptStore) -> None:
    """``replay`` and ``history`` of a thread of 24 events in a store of ~20 threads, then of
    another of 24 in a store of ~2,000 (and one thread of 2,400 events): per-thread reads,
    they read that thread's events through its key, no more."""
    load(store, [ThreadSpec("pad", PADDING, 6), ThreadSpec("t", 1, HISTORY, "pending")])
    small = _replay(store, "t-0000000")
    load(store, [ThreadSpec("pad-l", PADDING * SCALE, 6), ThreadSpec("long", 1, HISTORY * SCALE),
                 ThreadSpec("u", 1, HISTORY, "pending")])
    large = _replay(store, "u-0000000")
    assert_bounded(small, large)


# --- the event stream ------------------------------------------------------------------

SCOPE = frozenset({"acme", None})
"""A reader kept to acme's interrupts and those minted without a tenant."""


def _log(store: InterruptStore, tag: str, threads: int) -> None:
    """``threads`` open LangGraph interrupts (no tenant), then ``3 * threads`` threads of 6
    events each, for acme, globex and no tenant in turn: a log whose every later page mixes
    interrupts a reader kept to acme may and may not see."""
    load(store, extra=list(native_rows(f"l{tag}", threads, minted_at=1.7e9)))
    tenants = ("acme", "globex", None)
    load(store, [ThreadSpec(f"{tag}{i}", 1, 6, tenant=tenants[i % 3]) for i in range(3 * threads)])


def _last_position(store: InterruptStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.max(events.c.position))).scalar_one())


def _stream_page(store: InterruptStore, after: int) -> Probe:
    """A page of the stream after ``after`` (``GET /api/events?after=``, the SSE stream's
    pages: ``store.events(after=, limit=)``), as everyone sees it and as a scoped reader
    does (the tenants of the page's interrupts looked up, SPEC §15): one kept to acme and
    the untenanted, and a principal of the service kept to acme (``tenancy.visible_events``)."""
    with probe(store) as seen:
        page = store.events(after=after, limit=PAGE)
        shown = visible_events(store, SCOPE, page)
        acme = Approvals(store).visible_events(Principal("ann", tenants=frozenset({"acme"})), page)
    assert len(page) == PAGE and 0 < len(acme) < len(shown) < PAGE
    assert page[0].position > after
    return seen


def test_a_page_of_the_event_stream_costs_the_page(store: InterruptStore) -> None:
    """A page of 50 events after a cursor, read from a log of ~300 events, then after a cursor
    as near the end of one of ~30,000 (a consumer that read everything before it): no plan
    scans the log, and what the database touches does not grow -- also for a reader kept to
    some tenants, whose page's tenants are looked up through the mints' index."""
    _log(store, "s", PADDING // 2)
    small = _stream_page(store, _last_position(store) - 3 * PAGE)
    _log(store, "l", PADDING // 2 * SCALE)
    large = _stream_page(store, _last_position(store) - 3 * PAGE)
    assert_bounded(small, large, rows=PAGE)


# --- a notifier batch ------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with http_receiver() as r:
        yield r


BATCH = 6
"""Interrupts minted (for acme, with one superseded) after the notifier's cursor: the batch."""


def _batch(store: InterruptStore, tag: str, url: str, folder: Path, receiver: Receiver) -> Probe:
    """Subscriptions whose cursors stand at the log's end (everything before them delivered,
    or skipped); a batch of events (mints, a superseded one's expiry, an answer to one of
    the bulk-loaded threads' interrupts) after them; one notifier pass under the probe."""
    secret = str(write_secret(folder))
    config = {"subscriptions": [
        {"name": f"all-{tag}", "webhook": {"url": url, "secret_file": secret}},
        {"name": f"acme-{tag}", "tenants": ["acme"], "webhook": {"url": url, "secret_file": secret}},
        {"name": f"named-{tag}", "interrupts": ["wire"], "events": ["interrupt.resumed"],
         "webhook": {"url": url, "secret_file": secret}},
    ]}
    with Notifier(store, config) as notifier:
        notifier.run_once()  # the cursors, at the log's end
        before = len(receiver.requests)
        for k in range(BATCH):
            store.mint(f"b{tag}-{k}", marker(f"i-b{tag}-{k}", name="wire"), actor="agent", tenant="acme")
        store.mint(f"b{tag}-0", marker(f"i-b{tag}-x", name="wire"), actor="ceo", tenant="globex")
        (old,) = store.open_interrupts(f"a{tag}-0000001")
        store.resume(f"a{tag}-0000001", old["interrupt_id"], {"approved": True}, actor="alice")
        store.resume(f"b{tag}-1", f"i-b{tag}-1", {"approved": True}, actor="alice")
        with probe(store) as seen:
            report = notifier.run_once()
    delivered = {name.split("-")[0]: t.delivered for name, t in report.subscriptions.items()}
    assert delivered == {"all": BATCH + 4, "acme": BATCH + 3, "named": 1}, delivered
    assert len(receiver.requests) - before == 2 * BATCH + 8
    return seen


def _resend(store: InterruptStore, thread_id: str, url: str, folder: Path, receiver: Receiver) -> Probe:
    """An answer on ``thread_id`` refused by the receiver once -- dead-lettered at once --
    then sent again by ``retry`` under the probe."""
    name = f"dead-{thread_id}"
    config = {"subscriptions": [{"name": name, "retry": {"max_tries": 1},
                                 "webhook": {"url": url, "secret_file": str(write_secret(folder))}}]}
    with Notifier(store, config) as notifier:
        notifier.run_once()  # the cursor, at the log's end
        (waiting,) = store.open_interrupts(thread_id)
        store.resume(thread_id, waiting["interrupt_id"], {"approved": True}, actor="alice")
        receiver.answer = lambda request: 500
        assert notifier.run_once().subscriptions[name].dead_lettered == 1
        receiver.answer = lambda request: 200
        with probe(store) as seen:
            assert notifier.retry(name).resent == 1
    return seen


def test_a_dead_letter_resent_reads_its_interrupt_not_the_thread(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """``retry`` of a dead letter (an answer) on a thread of 24 events, then of 2,400: it
    finds the event among its interrupt's own events, not the thread's whole history."""
    load(store, [ThreadSpec("t", 1, HISTORY, "pending")])
    small = _resend(store, "t-0000000", receiver.url, tmp_path, receiver)
    load(store, [ThreadSpec("u", 1, HISTORY * SCALE, "pending")])
    large = _resend(store, "u-0000000", receiver.url, tmp_path, receiver)
    assert_bounded(small, large)


def test_a_notifier_batch_costs_the_batch_not_the_log_behind_it(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """A notifier pass that delivers a batch of ~10 events to three subscriptions (one kept to
    a tenant, one to a name and a type) after ~120 events already behind their cursors, then
    after ~12,000: no plan scans the log or the projection, and what the database touches
    does not grow with the log behind the cursors."""
    load(store, [ThreadSpec("as", PADDING // 2, 6, "pending", tenant="acme"), ThreadSpec("gs", PADDING // 2, 6, tenant="globex")])
    small = _batch(store, "s", receiver.url, tmp_path, receiver)
    load(store, [ThreadSpec("al", PADDING // 2 * SCALE, 6, "pending", tenant="acme"),
                 ThreadSpec("gl", PADDING // 2 * SCALE, 6, tenant="globex")])
    large = _batch(store, "l", receiver.url, tmp_path, receiver)
    assert_bounded(small, large)


# --- a thread crowded with other interrupts ----------------------------------------------

CROWD = 8
"""Other interrupts of the crowded thread in the small fixture, of each kind (the large one:
100 times): seed markers escalated and answered, LangGraph interrupts still open."""


def _crowd_answers(store: InterruptStore, thread_id: str) -> Probe:
    """On a thread crowded with open LangGraph interrupts: one of them read by its key,
    claimed and confirmed; the waiting marker's graph run claimed (as the service does for
    a ``--graph`` that waits on it), the marker resumed, the run's claim dropped."""
    with probe(store) as seen:
        (one,) = store.open_interrupts(thread_id, interrupt_id=f"n-{3:07d}")
        assert one["source"] == "langgraph" and "claimed_by" not in one
        store.claim(thread_id, f"n-{3:07d}", {"ok": True}, actor="alice")
        assert store.open_interrupts(thread_id, interrupt_id=f"n-{3:07d}")[0]["claimed_by"] == "alice"
        assert store.confirm(thread_id, f"n-{3:07d}")
        assert store.open_interrupts(thread_id, interrupt_id=f"n-{3:07d}") == []
        assert store.claim_marker_run(thread_id, "i-last", {"approved": True}, actor="bob")
        store.resume(thread_id, "i-last", {"approved": True}, actor="bob")
        assert store.end_marker_run(thread_id, "i-last")
    return seen


def test_an_answer_on_a_thread_crowded_with_open_interrupts_reads_its_own(store: InterruptStore) -> None:
    """A LangGraph interrupt's claim and confirm and a seed marker's graph run, on a thread
    with 8 other open LangGraph interrupts and 8 answered markers, then 800 and 800: each
    reads its own interrupt's row, claim and events, never the thread's other ones."""
    now = datetime.now(UTC)
    load(store, [ThreadSpec("pad-s", PADDING, 6)], extra=crowded_thread("crowd-s", CROWD, CROWD, start=now))
    small = _crowd_answers(store, "crowd-s")
    load(store, [ThreadSpec("pad-l", PADDING * SCALE, 6)],
         extra=crowded_thread("crowd-l", CROWD * SCALE, CROWD * SCALE, start=now))
    large = _crowd_answers(store, "crowd-l")
    assert len(store.open_interrupts("crowd-l")) == CROWD * SCALE - 1
    assert_bounded(small, large)


# --- sweep batches: the reminders and escalations, and a crowded thread -----------------

CHASING = {"approval_required": {"remind_after": 3_600, "escalate_after": 7_200, "escalate_to": ["lead"]},
           "approve": {"remind_after": 3_600}}


def _chase(store: InterruptStore, tag: str, count: int, now: datetime) -> Probe:
    """``count`` seed markers and ``count`` LangGraph interrupts open and young; 3 of each
    two days old: a sweep under a policy that reminds and escalates records 9 chases."""
    load(store, [ThreadSpec(f"open-{tag}", count, 4, "pending")],
         extra=list(native_rows(f"nopen-{tag}", count, minted_at=now.timestamp() - 600)))
    load(store, [ThreadSpec(f"old-{tag}", 3, 4, "pending", stale_every=1)],
         extra=list(native_rows(f"nold-{tag}", 3, minted_at=(now - timedelta(days=2)).timestamp())))
    with probe(store) as seen:
        report = store.sweep(policy=CHASING, batch_size=50)
    assert (len(report.reminded), len(report.escalated), report.expired) == (6, 3, [])
    return seen


def test_a_chasing_sweep_reads_the_old_interrupts_not_every_open_one(store: InterruptStore) -> None:
    """A sweep that reminds 6 interrupts and escalates 3 (two days old) among 40 open ones,
    then among 4,000 (3 more old ones each time): it reads the candidates from the indexes
    on their age, up to the policy's earliest threshold, never the young ones."""
    now = datetime.now(UTC)
    small = _chase(store, "s", PADDING, now)
    large = _chase(store, "l", PADDING * SCALE, now)
    assert_bounded(small, large)


def _crowd_sweep(store: InterruptStore, thread_id: str) -> Probe:
    """Two sweeps of a crowded thread whose 3 first LangGraph interrupts are stale: one
    reminds of them (among the thread's many escalations), one expires them (among its
    many open interrupts)."""
    with probe(store) as seen:
        reminded = store.sweep(policy=CHASING).reminded
        expired = store.sweep(ttl_seconds=86_400).expired
    assert [i for t, i, _ in reminded if t == thread_id] == [f"n-{k:07d}" for k in range(3)]
    assert [i for t, i, _ in expired if t == thread_id] == [f"n-{k:07d}" for k in range(3)]
    return seen


def test_a_sweep_of_a_crowded_thread_reads_what_it_chases_and_expires(store: InterruptStore) -> None:
    """The sweeps of a thread with 8 answered and escalated markers and 8 open LangGraph
    interrupts, then 800 and 800 (3 stale each time): whether each stale one is still open,
    and whether it was chased before, is read by its key, never the thread's others."""
    now = datetime.now(UTC)
    load(store, extra=crowded_thread("crowd-s", CROWD, CROWD, start=now, stale=3))
    small = _crowd_sweep(store, "crowd-s")
    load(store, extra=crowded_thread("crowd-l", CROWD * SCALE, CROWD * SCALE, start=now, stale=3))
    large = _crowd_sweep(store, "crowd-l")
    assert_bounded(small, large)


# --- the inbox's escalations --------------------------------------------------------------


def _escalated_first(store: InterruptStore, thread_id: str) -> Probe:
    """The inbox's escalations of a page holding the thread's waiting marker."""
    with probe(store) as seen:
        (item,) = Approvals(store).escalated_first([{"thread_id": thread_id, "interrupt_id": "i-last"}])
    assert item["escalated_to"] == ["lead"]
    return seen


def test_an_inbox_pages_escalations_cost_the_page_not_its_threads_history(store: InterruptStore) -> None:
    """The inbox marks a page's escalated items (``escalations(interrupts=)``): on a thread
    of 20 escalated interrupts answered long ago, then on one of 2,000, it reads the page's
    own interrupts' escalations, not every escalation on their threads."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    load(store, extra=crowded_thread("c-small", PADDING, 0, start=start))
    small = _escalated_first(store, "c-small")
    load(store, extra=crowded_thread("c-large", PADDING * SCALE, 0, start=start))
    large = _escalated_first(store, "c-large")
    assert len(store.escalations(["c-large"])) == PADDING * SCALE + 1
    assert_bounded(small, large)
