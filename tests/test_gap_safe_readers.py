"""Gap-safe readers (I11): a consumer paging ``events(after=p)`` never skips an event.

On PostgreSQL a sequence hands out positions at insert time, not at commit time: a
transaction that took position p may commit after one that took p + 1, and a reader
that saw p + 1 and moved its cursor past it would never see p. The store closes that
gap by allocating positions under a transaction-scoped advisory lock
(``statements.lock_positions``, taken in ``append.flush``), so appends commit in
position order. These tests show the gap with the lock out of the way, show a second
writer waiting on the lock, and tail the log under eight concurrent writers on both
backends.
"""

from __future__ import annotations

import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from conftest import postgres_base_url, with_search_path

from symfonic_store import (
    InterruptStore,
    StoredEvent,
    build_interrupt_marker,
    new_interrupt_id,
)
from symfonic_store import append as append_module
from symfonic_store.db.schema import events as events_table
from symfonic_store.store import lifecycle

WAIT = 30.0
"""Upper bound for a join or a wait on a real event; never a delay."""


def table_positions(engine: sa.Engine) -> list[int]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.select(events_table.c.position).order_by(events_table.c.position)
            ).scalars()
        )


def marker(run_id: str | None = None) -> dict[str, object]:
    return build_interrupt_marker(
        name="approval_required",
        interrupt_id=new_interrupt_id(),
        payload={"amount": 420},
        run_id=run_id,
    )


class Reader:
    """A consumer that pages by position, exactly as a downstream projector would."""

    def __init__(self, store: InterruptStore, page: int = 7) -> None:
        self.store = store
        self.page = page
        self.after = 0
        self.seen: list[int] = []

    def poll(self) -> list[StoredEvent]:
        """Read one page after the cursor and move the cursor past it."""
        batch = self.store.events(after=self.after, limit=self.page)
        if batch:
            self.seen.extend(e.position for e in batch)
            self.after = batch[-1].position
        return batch

    def drain(self) -> None:
        while self.poll():
            pass


@pytest.fixture
def pg_store(postgres_schema_url: str) -> Iterator[InterruptStore]:
    """A migrated store on a fresh PostgreSQL schema."""
    with InterruptStore(postgres_schema_url) as s:
        s.setup()
        yield s


def named_engine(url: str, name: str) -> sa.Engine:
    """An engine whose sessions show ``name`` in pg_stat_activity."""
    return sa.create_engine(url, connect_args={"application_name": name})


def raw_insert(conn: sa.Connection, thread_id: str) -> int:
    """Insert one event with plain SQL, no lock taken; returns the position it got."""
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


def test_without_a_lock_a_paging_reader_misses_a_late_commit(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """Two plain inserts committing out of position order make a paging reader skip one."""
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
        assert p not in reader.seen, "the gap this store's lock exists to close"
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


def wait_for_advisory_wait(engine: sa.Engine, app: str, done: threading.Event) -> bool:
    """True once the session named ``app`` waits on an advisory lock; False if it finished."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app "
        "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    )
    for _ in range(1500):
        with engine.connect() as conn:
            if conn.execute(query, {"app": app}).scalar():
                return True
        if done.wait(timeout=0.02):
            return False
    raise AssertionError("the second writer neither finished nor waited on the lock")


def test_store_append_waits_for_the_earlier_position_to_commit(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """While one append holds its transaction open, a second append blocks; the reader skips nothing."""
    app = f"gap-{uuid.uuid4().hex[:8]}"
    holder = sa.create_engine(postgres_schema_url)
    second_engine = named_engine(postgres_schema_url, app)
    second = InterruptStore(second_engine)
    reader = Reader(pg_store)
    try:
        with holder.connect() as t1:
            tx1 = hold_mint_open(t1, "held-thread")
            t2, done, errors = start_mint(second, "second-thread")
            assert wait_for_advisory_wait(holder, app, done), "T2 committed while T1 was open"
            assert not done.is_set()
            reader.drain()
            assert reader.seen == []
            tx1.commit()
        t2.join(timeout=WAIT)
        assert not t2.is_alive() and errors == [], errors
        reader.drain()
        assert reader.seen == table_positions(holder)
        assert len(reader.seen) == 2
        assert [e.thread_id for e in pg_store.events()] == ["held-thread", "second-thread"]
    finally:
        second.close()
        second_engine.dispose()
        holder.dispose()


def test_store_append_without_the_lock_shows_the_gap(
    pg_store: InterruptStore, postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the position lock taken out, the same scenario lets the reader skip the held event."""
    monkeypatch.setattr(append_module, "lock_positions", lambda conn: None)
    holder = sa.create_engine(postgres_schema_url)
    second = InterruptStore(postgres_schema_url)
    reader = Reader(pg_store)
    try:
        with holder.connect() as t1:
            tx1 = hold_mint_open(t1, "held-thread")
            t2, done, errors = start_mint(second, "second-thread")
            assert done.wait(timeout=WAIT), "without the lock the second append does not wait"
            t2.join(timeout=WAIT)
            assert errors == [], errors
            reader.drain()
            assert len(reader.seen) == 1
            tx1.commit()
        reader.drain()
        everything = table_positions(holder)
        assert len(everything) == 2
        assert reader.seen != everything
        assert min(everything) not in reader.seen
    finally:
        second.close()
        holder.dispose()


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
                thread_id = f"tail-{n}-{r % 3}"
                if r % 2:
                    store.mint(thread_id, marker(run_id=f"run-{n}"))  # may supersede: 2 events
                else:
                    store.record_route(thread_id, "finish", run_id=f"run-{n}-{r}")
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


def test_tailing_reader_sees_every_event_exactly_once(db_url: str) -> None:
    """A consumer tailing events(after=p, limit=N) under 8 concurrent writers sees every event once, in order."""
    with InterruptStore(db_url) as setup_store:
        setup_store.setup()
    writers, rounds = 8, 30
    errors: list[str] = []
    start = threading.Barrier(writers + 1)
    committed = threading.Event()
    threads = writers_append(db_url, writers, rounds, start, errors, committed)
    engine = sa.create_engine(db_url)
    with InterruptStore(db_url) as consumer_store:
        reader = Reader(consumer_store, page=5)
        start.wait()
        tail(consumer_store, lambda: any(t.is_alive() for t in threads), reader, committed)
        for t in threads:
            t.join(timeout=WAIT)
        reader.drain()
        assert errors == [], "\n".join(errors)
        everything = table_positions(engine)
        engine.dispose()
        assert len(everything) >= writers * rounds
        assert len(reader.seen) == len(set(reader.seen)), "an event was delivered twice"
        assert reader.seen == sorted(reader.seen)
        assert reader.seen == everything, "the reader skipped a committed event"


def test_stores_in_different_schemas_do_not_queue_on_each_other(
    pg_store: InterruptStore, postgres_schema_url: str
) -> None:
    """The position lock is per schema: an append held open in one schema does not block another schema's append."""
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
    holder = sa.create_engine(postgres_schema_url)
    other = InterruptStore(other_url)
    try:
        other.setup()
        with holder.connect() as t1:
            tx1 = hold_mint_open(t1, "held-thread")
            t2, done, errors = start_mint(other, "other-thread")
            finished = done.wait(timeout=WAIT)
            tx1.commit()
        t2.join(timeout=WAIT)
        assert finished, "the other schema's append waited for this schema's open append"
        assert errors == [], errors
        assert [e.thread_id for e in other.events()] == ["other-thread"]
        assert [e.thread_id for e in pg_store.events()] == ["held-thread"]
    finally:
        other.close()
        holder.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{other_schema}" CASCADE')
        admin.dispose()
