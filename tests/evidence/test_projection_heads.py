"""Events removed from the end of a thread are found (SPEC §10, first bullet).

The attacker has the table owner's rights: drops (SQLite) or disables (PostgreSQL) the
append-only triggers and deletes a thread's last events with plain SQL. What is left of
the hash chain still holds, so the chain alone cannot tell; the projection's head (the
``symfonic_threads`` row's ``version`` and ``last_hash``) still names the removed last
event, and that is what ``verify`` checks and ``rebuild_projection`` refuses to erase.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli

from symfonic_store import (
    AsyncInterruptStore,
    InterruptStore,
    ProjectionMismatchError,
    SymfonicStoreError,
    build_interrupt_marker,
)
from symfonic_store.events import event_hash

IID = "i-refund000001"


def refund(store: InterruptStore, thread_id: str) -> None:
    """A refund approved by alice: five events, the approval at version 4."""
    store.record_route(thread_id, "continue", run_id="r1")
    store.mint(thread_id, build_interrupt_marker(
        name="approval_required", interrupt_id=IID, payload={"amount": 420}, run_id="r1"))
    store.record_route(thread_id, "interrupt", run_id="r1")
    store.resume(thread_id, IID, {"approved": True}, actor="alice")
    store.record_route(thread_id, "continue", run_id="r1")


def disable_append_only(store: InterruptStore) -> None:
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER symfonic_events_no_update")
            conn.exec_driver_sql("DROP TRIGGER symfonic_events_no_delete")
        else:
            conn.exec_driver_sql("ALTER TABLE symfonic_events DISABLE TRIGGER ALL")


def delete_from(store: InterruptStore, thread_id: str, version: int) -> None:
    """``DELETE ... WHERE version >= version`` on one thread, as the attacker would."""
    with store.engine.begin() as conn:
        conn.execute(
            sa.text("DELETE FROM symfonic_events WHERE thread_id = :t AND version >= :v"),
            {"t": thread_id, "v": version},
        )


def projection_row(store: InterruptStore, thread_id: str) -> Any:
    with store.engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT * FROM symfonic_threads WHERE thread_id = :t"), {"t": thread_id}
        ).one_or_none()


@pytest.fixture
def tampered(store: InterruptStore) -> InterruptStore:
    """Alice's approval on ``t-refund`` and the route after it deleted; ``t-other`` untouched."""
    refund(store, "t-refund")
    refund(store, "t-other")
    assert store.verify().ok
    disable_append_only(store)
    delete_from(store, "t-refund", 4)
    return store


def test_verify_names_the_thread_whose_last_events_were_deleted(
    tampered: InterruptStore, migrated_url: str
) -> None:
    """verify reports the removed tail (thread, projection version, last event's position) in the report, its text and the CLI."""
    last_left = tampered.history("t-refund")[-1]
    assert last_left.version == 3

    report = tampered.verify()
    assert not report.ok
    (link,) = report.broken
    assert (link.thread_id, link.version, link.position, link.kind) == (
        "t-refund", 5, last_left.position, "head"
    )
    text = str(report)
    assert "'t-refund'" in text and "version 5" in text and "version 3" in text
    assert f"position {last_left.position}" in text
    assert not tampered.verify(thread_id="t-refund").ok
    assert tampered.verify(thread_id="t-other").broken == []  # (the triggers are reported)

    line = assert_clean_error(run_cli("verify", db=migrated_url), 1)
    assert "t-refund" in line and "version 5" in line and "t-other" not in line


def test_rebuild_refuses_a_head_the_events_no_longer_reach_unless_forced(
    tampered: InterruptStore, migrated_url: str
) -> None:
    """rebuild_projection and `projection rebuild` refuse (exit 1, saying what to do), and the approved interrupt is not approvable again until --force."""
    before = projection_row(tampered, "t-refund")
    with pytest.raises(ProjectionMismatchError) as caught:
        tampered.rebuild_projection()
    assert isinstance(caught.value, SymfonicStoreError)
    assert "t-refund" in str(caught.value) and "force" in str(caught.value)
    assert projection_row(tampered, "t-refund") == before  # nothing was rebuilt

    refused = run_cli("projection", "rebuild", db=migrated_url)
    line = assert_clean_error(refused, 1)
    assert "t-refund" in line and "--force" in line and "verify" in line
    assert projection_row(tampered, "t-refund") == before

    # The log now says the refund is pending, but the projection still holds the approval:
    # a second approval, at the front door or on the node's path, is refused unwritten.
    assert [(r.outcome, r.actor) for r in tampered.audit(thread_id="t-refund")] == [("pending", None)]
    events_before = tampered.events()
    with pytest.raises(ProjectionMismatchError):
        tampered.resume("t-refund", IID, {"approved": True}, actor="bob")
    pending = tampered.history("t-refund")[1].data
    with pytest.raises(ProjectionMismatchError):
        tampered.admit_node_resume("t-refund", pending, {"approved": True}, actor="bob")
    assert tampered.events() == events_before
    assert assert_clean_error(
        run_cli("resume", "t-refund", IID, "--actor", "bob", db=migrated_url), 1
    )
    assert tampered.events() == events_before

    forced = run_cli("projection", "rebuild", "--force", db=migrated_url)
    assert forced.returncode == 0, forced.stderr
    # Forced, the projection is the fold of what is left: the evidence is gone and the
    # refund is open again. That is what --force accepts.
    assert tampered.pending("t-refund")["interrupt_id"] == IID  # type: ignore[index]
    assert tampered.verify().broken == []  # only the disabled triggers are left to report
    tampered.resume("t-refund", IID, {"approved": True}, actor="bob")


def test_a_projection_row_whose_events_are_all_gone_is_reported_and_kept(
    tampered: InterruptStore,
) -> None:
    """A thread whose every event was deleted is named by verify, and rebuild refuses to drop its head."""
    delete_from(tampered, "t-other", 1)
    report = tampered.verify()
    problems = {b.thread_id: b for b in report.broken}
    assert set(problems) == {"t-refund", "t-other"}
    gone = problems["t-other"]
    assert (gone.version, gone.position, gone.kind) == (5, None, "head")
    assert "no events" in str(gone)
    assert not tampered.verify(thread_id="t-other").ok
    with pytest.raises(ProjectionMismatchError) as caught:
        tampered.rebuild_projection()
    assert "t-other" in str(caught.value)
    assert tampered.rebuild_projection(force=True) == 3
    assert projection_row(tampered, "t-other") is None


def test_a_rewritten_last_event_with_a_recomputed_hash_is_reported(store: InterruptStore) -> None:
    """Replacing the last event (hash chain recomputed) leaves the projection's last hash behind: verify and rebuild see it."""
    refund(store, "t-refund")
    last = store.history("t-refund")[-1]
    previous = store.history("t-refund")[-2]
    disable_append_only(store)
    forged = {"route": "finish", "interrupt_id": None, "reason": None}
    forged_hash = event_hash(
        previous.hash, thread_id=last.thread_id, version=last.version, type=last.type,
        interrupt_id=last.interrupt_id, run_id=last.run_id, actor=last.actor, data=forged,
        occurred_at=last.occurred_at,
    )
    events = sa.table("symfonic_events", sa.column("position"), sa.column("data", sa.JSON),
                      sa.column("hash"))
    with store.engine.begin() as conn:
        conn.execute(sa.update(events).where(events.c.position == last.position)
                     .values(data=forged, hash=forged_hash))

    report = store.verify()
    (link,) = report.broken
    assert (link.thread_id, link.version, link.position, link.kind) == (
        "t-refund", 5, last.position, "head"
    )
    assert "hash" in link.problem
    with pytest.raises(ProjectionMismatchError):
        store.rebuild_projection()


def test_events_the_projection_does_not_know_are_reported_and_rebuild_repairs_them(
    store: InterruptStore,
) -> None:
    """A projection row deleted or rolled back behind the events is reported; a rebuild (not refused) restores it."""
    refund(store, "t-gone")
    refund(store, "t-behind")
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM symfonic_threads WHERE thread_id = 't-gone'")
    behind = store.history("t-behind")[2]
    with store.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE symfonic_threads SET version = :v, last_hash = :h WHERE thread_id = :t"),
            {"v": behind.version, "h": behind.hash, "t": "t-behind"},
        )
    problems = {b.thread_id: b for b in store.verify().broken}
    assert set(problems) == {"t-gone", "t-behind"}
    assert "no projection row" in problems["t-gone"].problem
    assert problems["t-behind"].version == 3
    assert store.rebuild_projection() == 10
    assert store.verify().ok


def test_verify_beside_concurrent_writers_names_only_the_removed_tail(
    tampered: InterruptStore,
) -> None:
    """While other connections keep appending, every verify names the tampered thread and no thread that is merely being written."""
    start = threading.Barrier(3)
    failures: list[BaseException] = []

    def write(thread_id: str) -> None:
        try:
            start.wait()
            for _ in range(60):
                tampered.record_route(thread_id, "continue", run_id="r1")
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    writers = [threading.Thread(target=write, args=(f"w-{n}",)) for n in range(2)]
    for w in writers:
        w.start()
    start.wait()
    seen = []
    while any(w.is_alive() for w in writers) or not seen:
        seen.append(sorted((b.thread_id, b.kind) for b in tampered.verify().broken))
    for w in writers:
        w.join()
    assert not failures, failures
    assert all(broken == [("t-refund", "head")] for broken in seen), seen
    assert len(tampered.history("w-0")) == len(tampered.history("w-1")) == 60


def test_verify_of_a_thread_with_no_events_is_not_ok(store: InterruptStore, migrated_url: str) -> None:
    """store.verify(thread_id=T) and `verify --thread T` on a thread with no events report it (exit 1, naming T)."""
    refund(store, "t-refund")
    report = store.verify(thread_id="t-typo")
    assert not report.ok
    assert [(b.thread_id, b.kind) for b in report.broken] == [("t-typo", "no_events")]
    assert "'t-typo'" in str(report)
    line = assert_clean_error(run_cli("verify", "--thread", "t-typo", db=migrated_url), 1)
    assert "t-typo" in line
    assert run_cli("verify", "--thread", "t-refund", db=migrated_url).returncode == 0


async def test_the_async_store_checks_heads_and_refuses_rebuild_alike(
    astore: AsyncInterruptStore, migrated_url: str
) -> None:
    """The asyncio store's verify and rebuild_projection(force=...) behave like the sync store's."""
    sync = InterruptStore(migrated_url)
    try:
        refund(sync, "t-refund")
        disable_append_only(sync)
        delete_from(sync, "t-refund", 4)
    finally:
        sync.close()
    report = await astore.verify()
    assert [(b.thread_id, b.version) for b in report.broken] == [("t-refund", 5)]
    assert not (await astore.verify(thread_id="t-typo")).ok
    with pytest.raises(ProjectionMismatchError):
        await astore.rebuild_projection()
    assert await astore.rebuild_projection(force=True) == 3
    assert (await astore.verify()).broken == []
