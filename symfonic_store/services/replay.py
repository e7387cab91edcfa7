"""Replay a thread: each event with the state right after it, as of a position or a time."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..events import StoredEvent
from ..projection import ThreadState, apply


class Replay:
    """The fold of one thread's events, one event at a time (pages may come in turns)."""

    __slots__ = ("state",)

    def __init__(self, thread_id: str) -> None:
        self.state = ThreadState(thread_id)

    def steps(self, events: Iterable[StoredEvent]) -> list[tuple[StoredEvent, dict[str, Any]]]:
        """``(event, state_after_event)`` for each of ``events``, in order."""
        out = []
        for event in events:
            apply(self.state, event)
            out.append((event, self.state.as_state()))
        return out
