"""Sweeps racing in separate processes remind of and escalate each interrupt once (SPEC §14).

Each sweeper is a real process (``spawn``) with its own store and connections on the same
database; they start together at a barrier and sweep in small batches, so their pages
overlap. The interrupts were minted hours back (their ``minted_at`` says so), so no clock
is moved and nothing sleeps. Afterwards every interrupt has exactly one reminder and one
escalation, the reports of the sweepers list each once between them, and nothing ended.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from typing import Any

import factories
import sqlalchemy as sa

from symfonic_store import ESCALATED, REMINDED, InterruptStore
from symfonic_store.db.schema import open_interrupts

POLICY = {"*": {"remind_after": 60, "escalate_after": 600, "escalate_to": ["lead"]}}
SWEEPERS = 3
INTERRUPTS = 120


def sweeper(url: str, barrier: Any, batch_size: int, out: Any) -> None:
    """One process: wait for the others, sweep once, send back what it recorded."""
    with InterruptStore(url) as store:
        store.state("warm-up")  # connect before the start line
        barrier.wait(timeout=60)
        report = store.sweep(policy=POLICY, batch_size=batch_size)
        out.put(([(t, i) for t, i, _ in report.reminded], [(t, i) for t, i, _, _ in report.escalated]))


def test_sweeps_in_separate_processes_record_each_reminder_and_escalation_once(
    store: InterruptStore, migrated_url: str
) -> None:
    """Three processes sweep 120 old interrupts (markers and LangGraph ones) at once: each
    interrupt ends up with one reminder and one escalation, each reported by one sweeper."""
    expected: set[tuple[str, str]] = set()
    for k in range(INTERRUPTS // 2):
        store.mint(f"m-{k:03d}", factories.plain_marker(f"i-{k:03d}", age=3600))
        expected.add((f"m-{k:03d}", f"i-{k:03d}"))
    hours_back = time.time() - 3600
    for k in range(INTERRUPTS // 2):
        interrupt_id = f"{k:032d}"
        store.record_waiting(
            f"n-{k:03d}",
            [{"interrupt_id": interrupt_id, "value": {"name": "wire"}, "task_id": "t",
              "checkpoint_id": "cp", "checkpoint_ns": "", "breakpoint": False}],
        )
        expected.add((f"n-{k:03d}", interrupt_id))
    # The LangGraph interrupts were just recorded: their rows say when, so age them there
    # (the projection's minted_at; the events keep theirs).
    with store.engine.begin() as conn:
        conn.execute(sa.update(open_interrupts).values(minted_at=sa.bindparam("back")), {"back": hours_back})

    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(SWEEPERS)
    out = context.Queue()
    processes = [
        context.Process(target=sweeper, args=(migrated_url, barrier, 7 + k, out))
        for k in range(SWEEPERS)
    ]
    for p in processes:
        p.start()
    results = [out.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0

    reminded = [key for r, _ in results for key in r]
    escalated = [key for _, e in results for key in e]
    assert Counter(reminded) == Counter(dict.fromkeys(expected, 1))
    assert Counter(escalated) == Counter(dict.fromkeys(expected, 1))
    recorded = Counter(
        (e.type, e.thread_id, e.interrupt_id) for e in store.events() if e.type in (REMINDED, ESCALATED)
    )
    assert set(recorded.values()) == {1}
    assert {(t, i) for kind, t, i in recorded if kind == REMINDED} == expected
    assert {(t, i) for kind, t, i in recorded if kind == ESCALATED} == expected
    assert len(store.list_pending()) == INTERRUPTS  # nothing ended
    assert store.verify().ok
