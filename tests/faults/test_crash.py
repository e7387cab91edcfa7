"""Crash safety: a writer killed with SIGKILL at a random moment leaves a whole store.

A child process with its own store appends in a tight loop (mints, route decisions,
resumes, expiries, sweeps) from two Python threads over a handful of LangGraph thread
ids, and prints one line per committed operation. The test reads a random number of
those lines (from a seeded RNG, so a failing run can be replayed), kills the child with
SIGKILL -- usually in the middle of the next transaction -- and checks the store: it
opens, ``verify()`` passes, no event is half-written, versions are gapless, the
projection equals a rebuild and the pure fold, and every operation the child reported as
committed is in the log. The same database takes every kill, so later children start
on a store that has already survived crashes.

The full run kills 20 children per database: ``SYMFONIC_STORE_STRESS=1``. By default
(CI) it kills 5 per database. ``SYMFONIC_STORE_CRASH_SEED`` replays a given seed.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consistency import assert_consistent

from symfonic_store import (
    EXPIRED,
    MINTED,
    RESUME_REJECTED,
    RESUMED,
    ROUTE_DECIDED,
    InterruptStore,
    SymfonicStoreError,
)
from symfonic_store.db.schema import threads as threads_table

STRESS = os.environ.get("SYMFONIC_STORE_STRESS") == "1"
KILLS = 20 if STRESS else 5
SEED = int(os.environ.get("SYMFONIC_STORE_CRASH_SEED", "20240607"))
MAX_LINES_BEFORE_KILL = 40
LINE_TIMEOUT = 60.0
"""Seconds to wait for the child's next line before declaring it hung (not a sleep)."""

THREADS_PER_WORKER = 3
WORKERS = 2
STALE_AGE = 100_000.0
SWEEP_TTL = 3600.0


# --- the child ----------------------------------------------------------------------


def _worker(store: InterruptStore, worker: int, seed: int, say: Any) -> None:
    rng = random.Random(seed * 100 + worker)
    threads = [f"crash-{worker}-{n}" for n in range(THREADS_PER_WORKER)]
    counter = 0
    while True:
        counter += 1
        thread_id = rng.choice(threads)
        pending = store.pending(thread_id)
        roll = rng.random()
        try:
            if pending is None or roll < 0.25:
                interrupt_id = f"i-{seed}-{worker}-{counter}"
                marker = {
                    "name": "approval",
                    "interrupt_id": interrupt_id,
                    "payload": {"n": counter, "text": "refund $420 to order 1181?"},
                    "tool_call_id": None,
                    "run_id": rng.choice([None, "run-a", "run-b"]),
                    "minted_at": time.time() - rng.choice([0.0, 0.0, STALE_AGE]),
                }
                store.mint(thread_id, marker, actor="agent")
                say(f"{MINTED} {thread_id} {interrupt_id} agent")
            elif roll < 0.55:
                actor = rng.choice(["alice", "bob"])
                interrupt_id = pending["interrupt_id"]
                try:
                    store.resume(thread_id, interrupt_id, {"approved": True}, actor=actor)
                    say(f"{RESUMED} {thread_id} {interrupt_id} {actor}")
                except SymfonicStoreError:
                    say(f"{RESUME_REJECTED} {thread_id} {interrupt_id} {actor}")
            elif roll < 0.75:
                store.record_route(thread_id, "interrupt", run_id=rng.choice(["run-a", "run-b"]))
                say(f"{ROUTE_DECIDED} {thread_id} - -")
            elif roll < 0.85:
                store.expire(thread_id, pending["interrupt_id"], actor="carol")
                say(f"{EXPIRED} {thread_id} {pending['interrupt_id']} carol")
            else:
                report = store.sweep(ttl_seconds=SWEEP_TTL, batch_size=2)
                for t, i, _reason in report.expired:
                    say(f"{EXPIRED} {t} {i} -")
        except SymfonicStoreError as exc:
            # A racing sibling thread or sweep resolved it first: expected, not committed.
            say(f"refused - - - {type(exc).__name__}")


def child_main(url: str, seed: int) -> None:
    """Append forever from WORKERS threads, one stdout line per committed operation."""
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    store = InterruptStore(url)
    say("ready - - -")
    workers = [
        threading.Thread(target=_worker, args=(store, w, seed, say), daemon=True)
        for w in range(WORKERS)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


# --- the parent ---------------------------------------------------------------------


def _lines(proc: subprocess.Popen[str]) -> Iterator[str]:
    """The child's stdout lines as they come; fails if it goes silent for LINE_TIMEOUT."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    try:
        while True:
            if not selector.select(timeout=LINE_TIMEOUT):
                raise AssertionError(f"the child printed nothing for {LINE_TIMEOUT}s")
            line = proc.stdout.readline()
            if not line:
                return
            yield line.rstrip("\n")
    finally:
        selector.close()


def _child_env() -> dict[str, str]:
    """This environment, with the shared helpers (tests/, one folder up) importable."""
    helpers = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _run_and_kill(url: str, child_seed: int, lines_before_kill: int) -> list[str]:
    """Start a child, read ``lines_before_kill`` committed operations, SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, __file__, url, str(child_seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent,
        env=_child_env(),
    )
    seen: list[str] = []
    try:
        lines = _lines(proc)
        for line in lines:
            seen.append(line)
            if len(seen) > lines_before_kill:  # the first line is "ready"
                break
        proc.send_signal(signal.SIGKILL)
        # Lines already in the pipe were committed before the kill too.
        seen.extend(proc.stdout.read().splitlines() if proc.stdout else [])
        proc.wait(timeout=LINE_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.stdout:
        proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, f"the child ended by itself:\n{stderr}"
    assert len(seen) > lines_before_kill, f"the child stopped early:\n{stderr}"
    return seen


def _assert_committed_operations_survived(store: InterruptStore, lines: list[str]) -> None:
    """Every operation the child reported after its commit is in the event log."""
    by_thread: dict[str, list[Any]] = {}
    for line in lines:
        kind, thread_id, interrupt_id, actor = line.split(" ")[:4]
        if kind not in (MINTED, RESUMED, RESUME_REJECTED, EXPIRED, ROUTE_DECIDED):
            continue
        if thread_id not in by_thread:
            by_thread[thread_id] = store.history(thread_id)
        found = [
            e
            for e in by_thread[thread_id]
            if e.type == kind
            and (interrupt_id == "-" or e.interrupt_id == interrupt_id)
            and (actor == "-" or e.actor == actor)
        ]
        assert found, f"committed but lost: {line}"


@pytest.mark.slow
def test_sigkilled_writers_leave_a_whole_store(migrated_url: str) -> None:
    """After each of KILLS SIGKILLs at random moments the store opens, verifies and folds."""
    rng = random.Random(SEED)
    with InterruptStore(migrated_url) as store:
        store.setup()
    total_lines = 0
    for kill in range(KILLS):
        lines_before_kill = rng.randint(1, MAX_LINES_BEFORE_KILL)
        child_seed = rng.randrange(1 << 30)
        lines = _run_and_kill(migrated_url, child_seed, lines_before_kill)
        total_lines += len(lines)
        with InterruptStore(migrated_url) as store:
            try:
                _assert_committed_operations_survived(store, lines)
                assert_consistent(store)
            except AssertionError as exc:
                raise AssertionError(
                    f"after kill {kill + 1}/{KILLS} (SYMFONIC_STORE_CRASH_SEED={SEED}, "
                    f"child seed {child_seed}, killed after {lines_before_kill} lines): {exc}"
                ) from exc
    with InterruptStore(migrated_url) as store:
        kinds = {e.type for e in store.events()}
    # The workload really exercised the paths it claims to (not just mints).
    assert {MINTED, ROUTE_DECIDED, EXPIRED} <= kinds
    assert kinds & {RESUMED, RESUME_REJECTED}
    assert total_lines > KILLS


def test_the_crash_check_catches_a_projection_that_drifted_from_the_fold(store: InterruptStore) -> None:
    """The consistency check used after each kill fails on a projection row that lies."""
    store.mint("drift", {"name": "approval", "interrupt_id": "i-1", "payload": {}})
    assert_consistent(store)
    with store.engine.begin() as conn:
        conn.execute(threads_table.update().values(pending=None, pending_interrupt_id=None))
    with pytest.raises(AssertionError):
        assert_consistent(store)


if __name__ == "__main__":
    child_main(sys.argv[1], int(sys.argv[2]))
