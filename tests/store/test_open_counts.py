"""The open-interrupt counts the writes keep (SPEC §17, migration 0026): triggers on the
projection append ``+1``/``-1`` rows, a compaction moves them into totals by source and
tenant. They always equal what the projection holds -- after every kind of write, a
rebuild, compactions racing writers and one another -- and PostgreSQL writers minting in
open transactions never wait for one another on them."""

from __future__ import annotations

import threading
import traceback
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
import sqlalchemy as sa
from audit_log import rich_log
from factories import marker

from symfonic_store import InterruptStore
from symfonic_store.db.engines import create_sync_engine
from symfonic_store.db.statements.tenants import Scope
from symfonic_store.services import metric_counts
from symfonic_store.store import lifecycle
from symfonic_store.store.plan import Op

SCOPES: list[Scope] = [None, frozenset({"acme"}), frozenset({"globex", None}), frozenset()]


def _counted(store: InterruptStore, scope: Scope) -> dict[str, int]:
    snap: metric_counts.Snapshot = store.runner.run(Op(partial(metric_counts.snapshot, scope=scope), write=False))
    return {k: v for k, v in snap.open.items() if v}


def _projected(store: InterruptStore, scope: Scope) -> dict[str, int]:
    """The open interrupts of ``scope`` as ``list_pending`` reads them from the projection."""
    tenants = None if scope is None else list(scope)
    found = Counter(str(p.get("source") or "marker") for p in store.list_pending(tenants=tenants))
    return dict(found)


def _compact(store: InterruptStore) -> int:
    moved: int = store.runner.run(Op(metric_counts.compact, write=True, appends=False))
    return moved


def _assert_counts_follow(store: InterruptStore) -> None:
    for scope in SCOPES:
        assert _counted(store, scope) == _projected(store, scope), scope


def _tenant_log(store: InterruptStore) -> None:
    """Interrupts of two tenants and of none, opened, answered, superseded and expired."""
    rich_log(store)
    for n, tenant in enumerate(("acme", "acme", "globex", None)):
        store.mint(f"t-ten{n}", marker(f"a-{n}"), tenant=tenant)
    store.mint("t-ten0", marker("a-0b"), tenant="globex")  # supersedes acme's by globex's
    store.resume("t-ten1", "a-1", {"approved": True}, actor="ann")
    store.record_waiting(
        "t-nat", [{"interrupt_id": "x" * 32, "value": {"q": 1}, "task_id": "k", "checkpoint_id": "c",
                   "checkpoint_ns": "", "breakpoint": False}], graph="g", tenant="acme",
    )


def test_the_counts_equal_the_projection_before_and_after_compaction_and_a_rebuild(
    store: InterruptStore,
) -> None:
    """After every kind of write, the counts of each scope equal ``list_pending``'s; still after
    the deltas are compacted, after more writes, and after ``rebuild_projection`` (which
    recounts from the projection and drops the deltas)."""
    _tenant_log(store)
    _assert_counts_follow(store)
    assert _compact(store) > 0
    _assert_counts_follow(store)
    store.expire("t-ten2", "a-2", actor="bob")
    store.claim("t-nat", "x" * 32, {"ok": True}, actor="carol")
    store.confirm("t-nat", "x" * 32)
    _assert_counts_follow(store)
    store.rebuild_projection()
    assert _compact(store) == 0  # nothing left to move: the rebuild recounted
    _assert_counts_follow(store)


def _run_all(jobs: list[Callable[[], None]]) -> None:
    errors: list[str] = []

    def run(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_compactions_racing_writers_and_each_other_lose_and_double_count_nothing(
    store: InterruptStore,
) -> None:
    """Four writers on connections of their own mint and answer markers and LangGraph
    interrupts while two compactors compact over and over: once all is done, the totals plus
    the deltas left equal the projection, for every scope; one last compaction changes nothing."""
    writers_done = threading.Event()
    rounds = 12

    def writer(w: int) -> None:
        tenant = ("acme", "globex", None, "acme")[w]
        for r in range(rounds):
            thread = f"race-{w}-{r}"
            store.mint(thread, marker(f"m-{r}"), tenant=tenant)
            store.record_waiting(
                f"{thread}-n", [{"interrupt_id": f"{w:02d}{r:030d}", "value": {"r": r}, "task_id": "k",
                                 "checkpoint_id": "c", "checkpoint_ns": "", "breakpoint": False}],
                tenant=tenant,
            )
            if r % 3 == 0:
                store.resume(thread, f"m-{r}", {"approved": True}, actor="ann")
            elif r % 3 == 1:
                store.expire(thread, f"m-{r}", actor="bob")

    def compactor() -> None:
        while not writers_done.is_set():
            _compact(store)

    writer_jobs: list[Callable[[], None]] = [partial(writer, w) for w in range(4)]

    def writers() -> None:
        try:
            _run_all(writer_jobs)
        finally:
            writers_done.set()

    _run_all([writers, compactor, compactor])
    _assert_counts_follow(store)
    _compact(store)
    _assert_counts_follow(store)
    assert _projected(store, None) == {"marker": 4 * rounds // 3, "langgraph": 4 * rounds}


def _hold_mint_open(conn: sa.Connection, thread_id: str) -> sa.RootTransaction:
    """Run the store's own append path for a mint and leave its transaction open."""
    conn.execution_options(symfonic_write=True)
    tx = conn.begin()
    inner = marker()["_interrupt_pending"]
    assert isinstance(inner, dict)
    assert lifecycle.mint(conn, thread_id, inner, None) is True
    return tx


def test_postgres_writers_minting_in_open_transactions_do_not_wait_for_each_other(
    store: InterruptStore, migrated_url: str
) -> None:
    """Two connections each mint (the append path: projection row, trigger, delta row) and
    stay open: the second's mint and commit go through while the first still holds its
    transaction (a lock between them would fail it on ``lock_timeout``); then both count."""
    if not migrated_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer at a time by design")
    engine = create_sync_engine(migrated_url)
    try:
        with engine.connect() as first, engine.connect() as second:
            held = _hold_mint_open(first, "hold-1")
            second.exec_driver_sql("SET lock_timeout = '5s'")  # for the session
            second.commit()
            other = _hold_mint_open(second, "hold-2")
            other.commit()  # while the first is still open
            assert _counted(store, None) == {"marker": 1}  # the first's delta is not visible yet
            held.commit()
        assert _counted(store, None) == {"marker": 2}
        _compact(store)
        assert _counted(store, None) == {"marker": 2}
    finally:
        engine.dispose()


def test_an_archive_takes_the_deltas_in_before_their_mints_leave_the_log(
    store: InterruptStore, tmp_path: Path
) -> None:
    """An acme interrupt opened (and compacted), then answered, and its thread archived with
    no scrape between: the archive compacts the answer's delta while the mint still names
    its tenant, so acme's count goes back to 0 and no other tenant's moves."""
    store.mint("t-old", marker("i-old"), tenant="acme")
    store.mint("t-open", marker("i-open"), tenant="globex")
    _compact(store)
    store.resume("t-old", "i-old", {"approved": True}, actor="ann")
    result = store.archive(datetime.now(UTC) + timedelta(seconds=1), tmp_path / "a.jsonl")
    assert result.threads == ["t-old"]
    assert _counted(store, frozenset({"acme"})) == {}
    assert _counted(store, frozenset({None})) == {}
    assert _counted(store, frozenset({"globex"})) == {"marker": 1}
    _assert_counts_follow(store)
