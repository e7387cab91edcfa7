"""Gap-safe readers (I11): a consumer paging ``events(after=p)`` never skips an event.

On PostgreSQL a sequence hands out positions at insert time, not at commit time: a
transaction that took position p may commit after one that took p + 1, and a reader
that saw p + 1 and moved its cursor past it would never see p. Writers run in parallel
(nothing serialises appends), and the store closes the gap on the read side: every
event records its transaction id (``tx_id``), readers order on ``(tx_id, position)``
and return only events below the writers' horizon -- every write transaction of the
schema takes the writers' lock in SHARE mode at its BEGIN, and a reader returns nothing
at or above the oldest of them still open (``statements.read_horizon``). These tests
show the gap with the guard out of the way, show a reader holding back a later commit
until an earlier writer ends (while the later writer does not wait), show that only this
schema's writers hold readers back, and tail the log under eight writer threads and
eight writer processes on both backends.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import threading
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import postgres_base_url, with_search_path
from log_writers import append_round, append_rounds, marker, write_in_process

from symfonic_store import InterruptStore, StoredEvent
from symfonic_store.db.backends.base import Horizon
from symfonic_store.db.backends.postgres import PostgresBackend
from symfonic_store.db.engines import create_sync_engine
from symfonic_store.db.schema import events as events_table
from symfonic_store.db.statements import log as statements
from symfonic_store.store import lifecycle
from symfonic_store.store.append import ThreadWriter, flush

WAIT = 30.0
"""Upper bound for a join or a wait on a real event; never a delay."""


def table_positions(engine: sa.Engine) -> list[int]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.select(events_table.c.position).order_by(events_table.c.position)
            ).scalars()
        )


def table_events(engine: sa.Engine) -> list[tuple[int, str, int]]:
    """``(position, thread_id, version)`` of every row, by position."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(events_table.c.position, events_table.c.thread_id, events_table.c.version)
            .order_by(events_table.c.position)
        )
        return [(int(p), str(t), int(v)) for p, t, v in rows]


class Reader:
    """A consumer that pages by position, exactly as a downstream projector would."""

    def __init__(self, store: InterruptStore, page: int = 7) -> None:
        self.store = store
        self.page = page
        self.after = 0
        self.seen: list[int] = []
        self.order: list[tuple[str, int]] = []
        """``(thread_id, version)`` of each event seen, in the order seen."""

    def poll(self) -> list[StoredEvent]:
        """Read one page after the cursor and move the cursor past it."""
        batch = self.store.events(after=self.after, limit=self.page)
        if batch:
            self.seen.extend(e.position for e in batch)
            self.order.extend((e.thread_id, e.version) for e in batch)
            self.after = batch[-1].position
        return batch

    def drain(self) -> None:
        while self.poll():
            pass


def assert_each_event_once_in_thread_order(reader: Reader, engine: sa.Engine) -> None:
    """Every committed event seen exactly once, each thread's events in version order."""
    everything = table_events(engine)
    assert len(reader.seen) == len(set(reader.seen)), "an event was delivered twice"
    assert sorted(reader.seen) == [p for p, _, _ in everything], "the reader skipped an event"
    versions: dict[str, list[int]] = defaultdict(list)
    for thread_id, version in reader.order:
        versions[thread_id].append(version)
    for thread_id, seen in versions.items():
        assert seen == list(range(1, len(seen) + 1)), f"{thread_id} out of version order"
    # The order is stable: one read of everything gives the order the pages gave, and
    # every position seen is a cursor that resumes right after itself.
    assert [e.position for e in reader.store.events()] == reader.seen
    for i in range(0, len(reader.seen), max(1, len(reader.seen) // 10)):
        rest = [e.position for e in reader.store.events(after=reader.seen[i])]
        assert rest == reader.seen[i + 1 :]


@pytest.fixture
def pg_store(postgres_schema_url: str) -> Iterator[InterruptStore]:
    """A migrated store on a fresh PostgreSQL schema."""
    with InterruptStore(postgres_schema_url) as s:
        s.setup()
        yield s


def raw_insert(conn: sa.Connection, thread_id: str) -> int:
    """Insert one event with plain SQL, no writers' lock taken; returns its position."""
    row = {
        "thread_id": thread_id,
        "version": 1,
        "type": "route.decided",
        "interrupt_id": None,
        "run_id": None,
        "actor": None,
        "data": {"route": "finish", "interrupt_id": None, "reason": None},
        "occurred_at": datetime.now(UTC),
        "hash": "0" * 64,
    }
    return int(conn.execute(events_table.insert().returning(events_table.c.position), row).scalar_one())


def test_a_writer_outside_the_protocol_makes_a_paging_reader_miss_a_late_commit(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """Two plain inserts (no writers' lock) committing out of order make a paging reader skip one."""
    engine = sa.create_engine(postgres_schema_url)
    try:
        reader = Reader(pg_store)
        with engine.connect() as t1, engine.connect() as t2:
            tx1 = t1.begin()
            p = raw_insert(t1, "gap-t1")
            with t2.begin():
                p2 = raw_insert(t2, "gap-t2")
            assert p2 > p
            reader.drain()
            assert reader.seen == [p2]
            tx1.commit()
        reader.drain()
        assert table_positions(engine) == [p, p2]
        assert p not in reader.seen, "the gap the writers' lock exists to close"
    finally:
        engine.dispose()


def hold_mint_open(conn: sa.Connection, thread_id: str) -> sa.RootTransaction:
    """Run the store's own append path for a mint and leave its transaction open."""
    conn.execution_options(symfonic_write=True)
    tx = conn.begin()
    inner = marker()["_interrupt_pending"]
    assert isinstance(inner, dict)
    assert lifecycle.mint(conn, thread_id, inner, None) is True
    return tx


def start_mint(store: InterruptStore, thread_id: str) -> tuple[threading.Thread, threading.Event, list[str]]:
    """Mint on a real second connection in another thread; the event fires when it returns."""
    done = threading.Event()
    errors: list[str] = []

    def run() -> None:
        try:
            store.mint(thread_id, marker())
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            done.set()

    t = threading.Thread(target=run)
    t.start()
    return t, done, errors


def test_a_reader_holds_back_a_later_commit_until_the_earlier_writer_ends(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """While one append holds its transaction open, a second commits at once, yet readers see neither until the first ends."""
    holder = create_sync_engine(postgres_schema_url)  # the store's engine setup
    second = InterruptStore(postgres_schema_url)
    reader = Reader(pg_store)
    try:
        with holder.connect() as t1:
            tx1 = hold_mint_open(t1, "held-thread")
            t2, done, errors = start_mint(second, "second-thread")
            assert done.wait(timeout=WAIT), "the second append waited for the first"
            t2.join(timeout=WAIT)
            assert errors == [], errors
            assert len(table_positions(holder)) == 1  # committed: the second mint
            reader.drain()
            assert reader.seen == [], "a later commit was shown while an earlier writer was open"
            lag = pg_store.reader_lag()
            assert (lag.events, lag.writers) == (1, 1)
            assert lag.oldest_writer_seconds is not None and lag.oldest_writer_seconds >= 0
            tx1.commit()
        reader.drain()
        assert sorted(reader.seen) == table_positions(holder)
        assert [t for t, _ in reader.order] == ["held-thread", "second-thread"]
        assert pg_store.reader_lag().events == 0
    finally:
        second.close()
        holder.dispose()


def without_the_read_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers keep the (tx_id, position) order and cursor, but read past the horizon."""
    original = PostgresBackend.read_horizon

    def unguarded(self: PostgresBackend, conn: sa.Connection, *, after: int = 0) -> Horizon:
        return dataclasses.replace(original(self, conn, after=after), below=2**62)

    monkeypatch.setattr(PostgresBackend, "read_horizon", unguarded)


def test_without_the_read_guard_the_same_scenario_skips_the_held_event(
    pg_store: InterruptStore, postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the horizon taken out of the reads, the reader sees the later commit first and then skips the held event."""
    without_the_read_guard(monkeypatch)
    holder = create_sync_engine(postgres_schema_url)
    second = InterruptStore(postgres_schema_url)
    reader = Reader(pg_store)
    try:
        with holder.connect() as t1:
            tx1 = hold_mint_open(t1, "held-thread")
            t2, done, errors = start_mint(second, "second-thread")
            assert done.wait(timeout=WAIT)
            t2.join(timeout=WAIT)
            assert errors == [], errors
            reader.drain()
            assert len(reader.seen) == 1
            tx1.commit()
        reader.drain()
        everything = table_positions(holder)
        assert len(everything) == 2
        assert min(everything) not in reader.seen, "the skip the read guard prevents"
    finally:
        second.close()
        holder.dispose()


def wait_until_waiting_on_a_lock(engine: sa.Engine, app: str, done: threading.Event) -> None:
    """Return once the session named ``app`` waits on a lock (it must not finish first)."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app "
        "AND wait_event_type = 'Lock'"
    )
    for _ in range(1500):
        with engine.connect() as conn:
            if conn.execute(query, {"app": app}).scalar():
                return
        assert not done.wait(timeout=0.02), "the older transaction did not wait for the thread"
    raise AssertionError("the older transaction never waited for the thread's lock")


def test_a_thread_stays_in_version_order_when_an_older_transaction_appends_after_a_younger_one(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """A transaction that got its id first but appends to a thread after a younger one committed there is still read after it."""
    app = f"older-{uuid.uuid4().hex[:8]}"
    older_engine = create_sync_engine(
        sa.create_engine(postgres_schema_url, connect_args={"application_name": app})
    )
    younger_engine = create_sync_engine(postgres_schema_url)
    pg_store.record_route("shared", "finish")  # version 1
    pg_store.record_route("first-of-older", "finish")
    try:
        with older_engine.connect() as older, younger_engine.connect() as younger:
            older.execution_options(symfonic_write=True)
            older_tx = older.begin()
            ThreadWriter(older, "first-of-older")  # locks its row: the older id is assigned
            younger_tx = hold_mint_open(younger, "shared")  # version 2, a younger id
            done = threading.Event()
            failures: list[str] = []

            def append_behind() -> None:
                try:
                    w = ThreadWriter(older, "shared")  # waits for the younger transaction
                    w.append("route.decided", data={"route": "finish", "interrupt_id": None, "reason": None})
                    flush(older, [w])  # version 3, from the older transaction
                    older_tx.commit()
                except BaseException:
                    failures.append(traceback.format_exc())
                finally:
                    done.set()

            behind = threading.Thread(target=append_behind)
            behind.start()
            wait_until_waiting_on_a_lock(younger_engine, app, done)
            younger_tx.commit()
            behind.join(timeout=WAIT)
            assert failures == [], failures
        shared = [e.version for e in pg_store.events() if e.thread_id == "shared"]
        assert shared == [1, 2, 3], "the thread's events came out of version order"
    finally:
        older_engine.dispose()
        younger_engine.dispose()


def writers_append(
    url: str,
    writers: int,
    rounds: int,
    start: threading.Barrier,
    errors: list[str],
    committed: threading.Event | None = None,
) -> list[threading.Thread]:
    """Start ``writers`` threads, each with its own store, mixing mints and route decisions.

    ``committed`` is set after every commit, so a consumer can wait for news instead of
    spinning (a spinning reader in the same process starves the writers of the GIL while
    they hold SQLite's write lock).
    """

    def write(n: int) -> None:
        store = InterruptStore(url)
        try:
            start.wait()
            for r in range(rounds):
                append_round(store, n, r)
                if committed is not None:
                    committed.set()
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            store.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    return threads


def tail(
    store: InterruptStore,
    writing: Callable[[], bool],
    reader: Reader,
    committed: threading.Event | None = None,
) -> None:
    """Poll while the writers run (waiting for a commit when a page comes back empty),
    then drain once they have all stopped."""
    while writing():
        if not reader.poll() and committed is not None:
            committed.wait(timeout=0.05)
            committed.clear()
    reader.drain()


def test_tailing_reader_sees_every_event_exactly_once(migrated_url: str) -> None:
    """A consumer tailing events(after=p, limit=N) under 8 writer threads sees every event once, each thread in order."""
    with InterruptStore(migrated_url) as setup_store:
        setup_store.setup()
    writers, rounds = 8, 30
    errors: list[str] = []
    start = threading.Barrier(writers + 1)
    committed = threading.Event()
    threads = writers_append(migrated_url, writers, rounds, start, errors, committed)
    engine = sa.create_engine(migrated_url)
    try:
        with InterruptStore(migrated_url) as consumer_store:
            reader = Reader(consumer_store, page=5)
            start.wait()
            tail(consumer_store, lambda: any(t.is_alive() for t in threads), reader, committed)
            for t in threads:
                t.join(timeout=WAIT)
            reader.drain()
            assert errors == [], "\n".join(errors)
            assert len(reader.seen) >= writers * rounds
            assert_each_event_once_in_thread_order(reader, engine)
            if migrated_url.startswith("sqlite"):
                assert reader.seen == sorted(reader.seen), "one writer: positions commit in order"
    finally:
        engine.dispose()


def test_tailing_reader_under_eight_writer_processes_sees_every_event_once(migrated_url: str) -> None:
    """8 writer processes append from a start barrier while a consumer tails the log: every committed event seen once, each thread in order."""
    with InterruptStore(migrated_url) as setup_store:
        setup_store.setup()
    writers, rounds = 8, 40
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers + 1, timeout=120)
    procs = [
        ctx.Process(target=write_in_process, args=(migrated_url, n, rounds, barrier))
        for n in range(writers)
    ]
    for p in procs:
        p.start()
    engine = sa.create_engine(migrated_url)
    try:
        with InterruptStore(migrated_url) as consumer_store:
            reader = Reader(consumer_store, page=5)
            barrier.wait()
            # Processes do not share the GIL with the reader: it may poll without pause.
            tail(consumer_store, lambda: any(p.is_alive() for p in procs), reader)
            for p in procs:
                p.join(timeout=WAIT)
                assert p.exitcode == 0, f"a writer process failed (exit {p.exitcode})"
            reader.drain()
            assert len(reader.seen) >= writers * rounds
            assert_each_event_once_in_thread_order(reader, engine)
    finally:
        engine.dispose()
        for p in procs:
            if p.is_alive():
                p.kill()


def test_only_this_schemas_writers_hold_its_readers_back(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """An append held open in one schema, or any open transaction with an id, neither blocks nor delays another schema's store."""
    base = postgres_base_url()
    assert base is not None
    other_schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(sa.make_url(base).set(drivername="postgresql+psycopg"))
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{other_schema}"')
    other_url = with_search_path(
        sa.make_url(base).set(drivername="postgresql+psycopg").render_as_string(hide_password=False),
        other_schema,
    )
    holder = create_sync_engine(postgres_schema_url)
    bystander = sa.create_engine(postgres_schema_url)
    other = InterruptStore(other_url)
    try:
        other.setup()
        with holder.connect() as t1, bystander.connect() as t3:
            tx1 = hold_mint_open(t1, "held-thread")
            tx3 = t3.begin()  # an unrelated transaction that holds a transaction id
            t3.exec_driver_sql("CREATE TEMP TABLE bystander (x int)")
            t3.exec_driver_sql("INSERT INTO bystander VALUES (1)")
            t2, done, errors = start_mint(other, "other-thread")
            finished = done.wait(timeout=WAIT)
            t2.join(timeout=WAIT)
            seen_meanwhile = [e.thread_id for e in other.events()]
            tx1.commit()
            tx3.rollback()
        assert finished, "the other schema's append waited for this schema's open append"
        assert errors == [], errors
        assert seen_meanwhile == ["other-thread"], "another schema's open writer delayed this reader"
        assert [e.thread_id for e in pg_store.events()] == ["held-thread"]
    finally:
        other.close()
        holder.dispose()
        bystander.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{other_schema}" CASCADE')
        admin.dispose()


def test_reader_lag_is_zero_when_no_writer_is_open(store: InterruptStore) -> None:
    """With every append committed and no writer open, gap-safe readers are not behind."""
    append_rounds(store, 0, 4)
    lag = store.reader_lag()
    assert (lag.events, lag.writers, lag.oldest_writer_seconds) == (0, 0, None)
    assert len(store.events()) == 4  # two route decisions, two mints on other threads


def test_metrics_report_the_events_a_held_writer_holds_back(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """/metrics' reader-lag gauges: one event held back and one writer in flight while an append stays open; zero once it ends."""
    pytest.importorskip("prometheus_client")
    from symfonic_store.server.metrics import ServiceMetrics

    def gauges() -> dict[str, float]:
        text = ServiceMetrics(pg_store).render().decode()
        return {
            name: float(value)
            for name, _, value in (line.partition(" ") for line in text.splitlines())
            if name in ("symfonic_reader_lag_events", "symfonic_writers_in_flight", "symfonic_reader_lag_seconds")
        }

    holder = create_sync_engine(postgres_schema_url)
    second = InterruptStore(postgres_schema_url)
    try:
        with holder.connect() as t1:
            tx1 = hold_mint_open(t1, "held-thread")
            second.mint("second-thread", marker())
            held = gauges()
            assert held["symfonic_reader_lag_events"] == 1 and held["symfonic_writers_in_flight"] == 1
            assert held["symfonic_reader_lag_seconds"] >= 0
            tx1.commit()
        assert gauges() == {
            "symfonic_reader_lag_events": 0, "symfonic_writers_in_flight": 0, "symfonic_reader_lag_seconds": 0
        }
    finally:
        second.close()
        holder.dispose()


def test_a_callers_engine_keeps_its_isolation_level_and_autocommit_writes_stay_atomic(
    postgres_schema_url: str,
) -> None:
    """The store sends BEGIN itself: at the caller's isolation level, and, for its own writes, on an AUTOCOMMIT engine too (the event and its projection row in one transaction, among the writers)."""
    with InterruptStore(postgres_schema_url) as owner:
        owner.setup()
    level = sa.create_engine(postgres_schema_url, isolation_level="REPEATABLE READ")
    InterruptStore(level).close()  # prepares the engine
    with level.begin() as conn:
        assert conn.exec_driver_sql("SHOW transaction_isolation").scalar_one() == "repeatable read"
    with level.connect() as conn, conn.execution_options(isolation_level="SERIALIZABLE").begin():
        assert conn.exec_driver_sql("SHOW transaction_isolation").scalar_one() == "serializable"
    level.dispose()

    seen: dict[str, object] = {}
    original = statements.insert_events

    def spy(conn: sa.Connection, new_events: object) -> None:
        original(conn, new_events)  # type: ignore[arg-type]
        seen["status"] = conn.connection.dbapi_connection.info.transaction_status  # type: ignore[union-attr]
        seen["locks"] = conn.exec_driver_sql(
            "SELECT mode FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        ).scalars().all()

    autocommit = sa.create_engine(
        postgres_schema_url, execution_options={"symfonic_fast_path": False}
    ).execution_options(isolation_level="AUTOCOMMIT")
    with InterruptStore(autocommit) as store:
        import symfonic_store.store.append as append_module

        store.runner.heads = None  # the transactional path (the one call: test_single_append)

        real = append_module.insert_events
        append_module.insert_events = spy  # type: ignore[assignment]
        try:
            store.record_route("auto", "finish", run_id="r1")
        finally:
            append_module.insert_events = real
        assert seen["status"] == 2  # INTRANS: the projection row is still to come in it
        assert seen["locks"] == ["ShareLock"]
        assert [e.thread_id for e in store.events()] == ["auto"]
        assert store.verify().ok


def test_a_cursor_at_an_archived_event_resumes_exactly_after_it(
    pg_store: InterruptStore, postgres_schema_url: str, tmp_path: Path
) -> None:
    """The consumer's last event is archived: events(after=its position) still returns what it had not seen, though that sorts below it by position."""
    from datetime import timedelta

    from symfonic_store.services.evidence import generate_key

    key, _ = generate_key(tmp_path / "key")
    holder = create_sync_engine(postgres_schema_url)
    try:
        with holder.connect() as a:
            a.execution_options(symfonic_write=True)
            tx = a.begin()
            a.exec_driver_sql("SELECT pg_current_xact_id()")  # A's id comes first...
            pg_store.mint("B", marker())  # ...B, younger, takes the smaller position, commits
            lifecycle.record_route(a, "A", "finish", run_id="ra", reason=None, interrupt_id=None)
            tx.commit()
    finally:
        holder.dispose()
    order = [(e.thread_id, e.position) for e in pg_store.events()]
    assert [t for t, _ in order] == ["A", "B"] and order[0][1] > order[1][1]
    (seen,) = pg_store.events(after=0, limit=1)
    assert seen.thread_id == "A"
    archived = pg_store.archive(datetime.now(UTC) + timedelta(seconds=1), tmp_path / "a.jsonl", key=key)
    assert archived.threads == ["A"]  # B still waits on its interrupt
    assert [e.thread_id for e in pg_store.events(after=seen.position)] == ["B"]
