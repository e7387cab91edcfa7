"""Writes that wait for a step's checkpoint: one transaction for a step and its events.

A graph compiled with ``store.checkpointer()`` keeps its checkpoints in the store's own
database, so what a step records (the router's decision, a mint) can commit in the
very transaction that saves the step (the checkpointer's ``put_writes`` or ``put``),
instead of in one of its own. The marker node and router hand their writes over with
:func:`deferring`; while it is active, both runners give every write step of a plan to
the collector (:func:`defer`) instead of running it, and the call returns None.

:class:`StepWrites` holds the collected writes of each running task until the
checkpointer takes them into the transaction of that task's writes (``put_writes``) or
of the checkpoint its step produced (``put``), whichever LangGraph saves first: both
say the step happened. A write whose transaction fails is dropped with it, so the
audit never holds what LangGraph did not save.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .plan import Op

Sink = Callable[[Op[Any]], None]

_SINK: ContextVar[Sink | None] = ContextVar("symfonic_store_deferred_writes", default=None)


# The context-variable idiom of projection_gaps.watching(), deliberately: a helper would be longer
# than the two.
@contextmanager
def deferring(sink: Sink) -> Iterator[None]:
    """Hand the write steps of the store calls made inside to ``sink`` instead of running them."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def defer(step: Any) -> bool:
    """Give ``step`` to the active collector when it is a write; True when it was taken.

    Only writes are taken: a read (or a user callback) runs as usual, so a plan that
    reads before it writes still sees the database.
    """
    sink = _SINK.get()
    if sink is None or not isinstance(step, Op) or not step.write:
        return False
    sink(step)
    return True


@dataclass(frozen=True, slots=True)
class Step:
    """Where a task's writes belong: its thread, namespace, the checkpoint it ran from."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None
    """The checkpoint the task's step started from (None when LangGraph did not say)."""
    task_id: str


@dataclass(frozen=True, slots=True)
class _Waiting:
    step: Step
    op: Op[Any]


class StepWrites:
    """The deferred writes of running tasks, per thread, in the order they were made.

    A task's writes are taken by the task's own ``put_writes`` (with what older steps
    still left waiting), or by the ``put`` of a checkpoint newer than the one the task
    ran from -- the checkpoint its step produced -- whichever LangGraph saves first.
    Checkpoint ids grow with time (uuid6), so "older step" is a string comparison.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[_Waiting]] = {}
        self._in_flight: dict[str, int] = {}
        """Per thread: transactions that took writes and have not ended yet."""

    def sink(self, step: Step) -> Sink:
        """A collector for one task's writes."""

        def keep(op: Op[Any]) -> None:
            with self._lock:
                self._waiting.setdefault(step.thread_id, []).append(_Waiting(step, op))

        return keep

    def _take(
        self, thread_id: str, taken: Callable[[Step], bool], dropped: Callable[[Step], bool] | None = None
    ) -> list[Op[Any]]:
        with self._lock:
            waiting = self._waiting.get(thread_id)
            if not waiting:
                return []
            ops = [w.op for w in waiting if taken(w.step)]
            kept = [w for w in waiting if not taken(w.step) and not (dropped and dropped(w.step))]
            if kept:
                self._waiting[thread_id] = kept
            else:
                del self._waiting[thread_id]
            if ops:
                self._in_flight[thread_id] = self._in_flight.get(thread_id, 0) + 1
            return ops

    def landed(self, thread_ids: list[str]) -> None:
        """The transactions that took writes of ``thread_ids`` ended (committed or not).

        Until then the thread counts as busy (:meth:`has`): another step transaction of
        the thread -- the task's ``put_writes`` whose records a ``put`` took -- must wait
        for that one's COMMIT, or it could save the task's writes while the records die
        with the other transaction (a process killed before that COMMIT).
        """
        with self._lock:
            for thread_id in thread_ids:
                left = self._in_flight.get(thread_id, 0) - 1
                if left > 0:
                    self._in_flight[thread_id] = left
                else:
                    self._in_flight.pop(thread_id, None)

    def for_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None, task_id: str
    ) -> list[Op[Any]]:
        """What commits with a task's writes: its own, and those of older steps still waiting."""

        def taken(step: Step) -> bool:
            if step.task_id == task_id:
                return True
            return (
                step.checkpoint_ns == checkpoint_ns
                and step.checkpoint_id is not None
                and checkpoint_id is not None
                and step.checkpoint_id < checkpoint_id
            )

        return self._take(thread_id, taken)

    def for_checkpoint(
        self, thread_id: str, checkpoint_ns: str, replaced: str | None, checkpoint_id: str
    ) -> list[Op[Any]]:
        """What commits with a new checkpoint: the writes of the steps that led to it.

        Those are the steps that started from the checkpoint it replaces (``replaced``)
        or later; with ``durability="exit"`` LangGraph saves only the last checkpoint of
        a run, so that is every step of the run. LangGraph saves checkpoints one after
        the other, so what started before ``replaced`` and is still here was abandoned
        (its step's saves failed): it is dropped, never recorded.
        """

        def started(step: Step) -> bool:
            return step.checkpoint_ns == checkpoint_ns and step.checkpoint_id is not None

        def taken(step: Step) -> bool:
            if step.checkpoint_ns != checkpoint_ns:
                return False
            if step.checkpoint_id is None:
                return True
            return (replaced is None or step.checkpoint_id >= replaced) and step.checkpoint_id < checkpoint_id

        def abandoned(step: Step) -> bool:
            return started(step) and replaced is not None and step.checkpoint_id < replaced  # type: ignore[operator]

        return self._take(thread_id, taken, abandoned)

    def has(self, thread_id: str) -> bool:
        """Is anything of the thread waiting, or in a transaction not ended yet? (A hint:
        read without the lock; it turns true before a write could be missed, since a
        task defers its writes before LangGraph saves them.)"""
        return thread_id in self._waiting or thread_id in self._in_flight

    def __len__(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._waiting.values())


__all__ = ["Step", "StepWrites", "defer", "deferring"]
