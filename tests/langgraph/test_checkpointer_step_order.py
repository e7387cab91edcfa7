"""A task's records and its writes never commit apart, whichever of its step's saves takes them.

LangGraph saves a task's writes (``put_writes``) and the checkpoint its step produced
(``put``) from background threads, in either order. The store's checkpointer commits the
task's deferred records (a router's ``route.decided``, a mint) in whichever of the two
takes them first. The other one must not commit while that transaction is still open:
had the process died before that COMMIT, the task's writes would be saved and its
records gone (seen as a rare disagreement in tests/faults/test_checkpointer_crash.py under
load).
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from symfonic_store import InterruptStore
from symfonic_store.db.backends.postgres import STEPS_LOCK_KEY
from symfonic_store.langgraph import saver_sql

WAIT = 30.0
"""The longest a test waits for a condition it polls (never a delay)."""

_WAITING_FOR_THE_THREAD = sa.text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
    "AND classid::text::bigint = :key "
    "AND objid::text::bigint = (hashtext(:t)::bigint & 4294967295)"
)


def _checkpoint(checkpoint_id: str) -> dict[str, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = checkpoint_id
    return dict(checkpoint)


def _config(thread_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _until(done: Any) -> bool:
    deadline = datetime.now(UTC).timestamp() + WAIT
    while datetime.now(UTC).timestamp() < deadline:
        if done():
            return True
    return False


def test_a_tasks_writes_wait_for_the_checkpoint_that_took_its_router_record(
    migrated_url: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``put`` that took a task's route decision holds that task's ``put_writes`` until it commits: the writes never save without the record."""
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    store = InterruptStore(migrated_url)
    store.setup()
    saver = store.checkpointer()
    first, second = str(uuid6()), str(uuid6())
    saver.put(_config(thread_id, None), _checkpoint(first), {"source": "input", "step": -1}, {})

    task = {"configurable": {
        "thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": first,
        "__pregel_task_id": "task-a", "checkpoint_map": {"": first},
    }}
    with saver.defer_writes(task):
        assert store.record_router_decision(thread_id, {}, "finish") is None  # deferred

    inside, release = threading.Event(), threading.Event()
    real_call = saver_sql.SaverSql.call

    def held_put(self: Any, conn: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        result = real_call(self, conn, method, *args, **kwargs)
        if method == "put" and threading.current_thread().name == "put":
            inside.set()  # the record is taken, the transaction still open
            assert release.wait(WAIT)
        return result

    monkeypatch.setattr(saver_sql.SaverSql, "call", held_put)
    failures: list[BaseException] = []
    writes_done = threading.Event()

    def put() -> None:
        try:
            saver.put(_config(thread_id, first), _checkpoint(second), {"source": "loop", "step": 0}, {})
        except BaseException as e:  # reported below
            failures.append(e)

    def put_writes() -> None:
        try:
            saver.put_writes(task, [("answer", "done")], "task-a")
        except BaseException as e:
            failures.append(e)
        finally:
            writes_done.set()

    checkpoint_thread = threading.Thread(target=put, name="put")
    checkpoint_thread.start()
    assert inside.wait(WAIT), "the checkpoint's put never ran"
    writes_thread = threading.Thread(target=put_writes, name="put_writes")
    writes_thread.start()
    try:
        if backend == "postgresql":
            with store.engine.connect() as watch:
                waiting = _until(lambda: writes_done.is_set() or watch.execute(
                    _WAITING_FOR_THE_THREAD, {"key": STEPS_LOCK_KEY, "t": thread_id}
                ).scalar_one() > 0)
                assert waiting and not writes_done.is_set(), (
                    "the task's writes committed while the transaction holding its record was open"
                )
        # SQLite: both transactions begin IMMEDIATE, so the writes wait for the database.
    finally:
        release.set()
        checkpoint_thread.join(WAIT)
        writes_thread.join(WAIT)
    assert not failures, failures
    events = [e.type for e in store.history(thread_id)]
    assert events.count("route.decided") == 1
    assert saver.get_tuple(_config(thread_id, second)) is not None
    ran_from = saver.get_tuple(_config(thread_id, first))  # the task's writes are its step's
    assert ran_from is not None
    assert [tuple(w) for w in ran_from.pending_writes or []] == [("task-a", "answer", "done")]
    store.close()
