"""Replay a thread: each event with the state right after it, as of a position or a time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..events import StoredEvent
from ..projection import ThreadState, apply


def replay_events(
    thread_id: str, events: Iterable[StoredEvent]
) -> Iterator[tuple[StoredEvent, dict[str, Any]]]:
    """Fold the thread's events one by one, yielding ``(event, state_after_event)``."""
    state = ThreadState(thread_id)
    for event in events:
        apply(state, event)
        yield event, state.as_state()
