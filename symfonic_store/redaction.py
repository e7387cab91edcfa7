"""What a reader kept to some tenants is shown of the log (SPEC §15).

One rule for every such reader: the approval service's principals with tenants and the
notifier's subscriptions with ``tenants``. A reader's *scope* is the set of tenants whose
interrupts it may see (``None`` in it: the interrupts minted without a tenant), or None:
every interrupt, and the events of no interrupt too.

A thread's interrupts need not share a tenant (a graph may be run for another tenant later
on the same thread), so an event a reader may see can still name an interrupt it may not:
a superseded marker's expiry names the marker that superseded it (``superseded_by``), and
its actor is who minted that marker; a replayed state holds the marker pending at that
moment. Both are taken out of what the reader is shown -- the reference dropped with the
event's actor, the pending marker shown as none -- and so are the thread's open interrupts
of other tenants, so another tenant's interrupt stays indistinguishable from one that does
not exist.

An event shown with its actor or data taken out is a :class:`RedactedEvent`: it carries no
``hash`` and no ``version``. The hash covers what was taken out (recomputing
:func:`~symfonic_store.events.event_hash` with a guessed actor would confirm the guess),
and the version counts the thread's events the reader is not shown.

The store is read through two of its methods, ``interrupt_tenants`` and ``history``; no
I/O happens here otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .events import StoredEvent
from .protocol import PENDING_KEY

__all__ = [
    "REFERENCES", "RedactedEvent", "Scope", "redact", "visible_events", "visible_open",
    "visible_steps",
]

REFERENCES = ("superseded_by",)
"""Keys of an event's data naming another interrupt of the same thread."""

Key = tuple[str, str]
Scope = frozenset[str | None] | None
"""The tenants a reader may see (``None`` among them: the untenanted interrupts), or None: all."""


@dataclasses.dataclass(frozen=True, slots=True)
class RedactedEvent(StoredEvent):
    """An event shown to a scoped reader with its actor or data taken out.

    Its ``hash`` is empty and its ``version`` 0, and :meth:`as_dict` has neither: both
    would tell what was taken out (the hash confirms a guessed value, the version counts
    the events not shown).
    """

    def as_dict(self) -> dict[str, Any]:
        shown = StoredEvent.as_dict(self)
        del shown["version"], shown["hash"]
        return shown


def _references(event: StoredEvent) -> Iterable[Key]:
    for name in REFERENCES:
        value = event.data.get(name)
        if isinstance(value, str):
            yield (event.thread_id, value)


def _pending_key(thread_id: str, state: dict[str, Any]) -> Key | None:
    marker = state.get(PENDING_KEY)
    value = marker.get("interrupt_id") if isinstance(marker, dict) else None
    return (thread_id, value) if isinstance(value, str) else None


def _seer(store: Any, scope: frozenset[str | None], keys: set[Key]) -> Callable[[Key], bool]:
    """May a reader of ``scope`` see the interrupt of a key? (Never minted: no.)"""
    tenants = store.interrupt_tenants(keys) if keys else {}
    return lambda key: key in tenants and tenants[key] in scope


def _stripped(event: StoredEvent, sees: Callable[[Key], bool]) -> StoredEvent:
    hidden = {
        name for name in REFERENCES
        if isinstance(value := event.data.get(name), str) and not sees((event.thread_id, value))
    }
    if not hidden:
        return event
    # The actor of such an event is who caused it there -- the hidden interrupt's requester.
    return RedactedEvent(
        position=event.position, thread_id=event.thread_id, version=0, type=event.type,
        interrupt_id=event.interrupt_id, run_id=event.run_id, actor=None,
        data={k: v for k, v in event.data.items() if k not in hidden},
        occurred_at=event.occurred_at, hash="",
    )


def _shown(event: StoredEvent, sees: Callable[[Key], bool]) -> StoredEvent | None:
    if event.interrupt_id is None or not sees((event.thread_id, event.interrupt_id)):
        return None
    return _stripped(event, sees)


def redact(store: Any, scope: Scope, event: StoredEvent) -> StoredEvent:
    """``event`` as a reader of ``scope`` is shown it, taken to concern an interrupt it
    may see (the notifier matched the subscription first): without references to
    interrupts it may not see, and then without actor, hash and version."""
    if scope is None:
        return event
    refs = set(_references(event))
    return _stripped(event, _seer(store, scope, refs)) if refs else event


def visible_events(store: Any, scope: Scope, events: Sequence[StoredEvent]) -> list[StoredEvent]:
    """The events a reader of ``scope`` may see, each without references to interrupts it
    may not."""
    if scope is None:
        return list(events)
    keys = {(e.thread_id, e.interrupt_id) for e in events if e.interrupt_id is not None}
    keys.update(key for e in events for key in _references(e))
    sees = _seer(store, scope, keys)
    return [shown for e in events if (shown := _shown(e, sees)) is not None]


def visible_open(
    store: Any, scope: Scope, thread_id: str, opened: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The thread's open interrupts (each with ``interrupt_id``) a reader of ``scope`` may see."""
    if scope is None or not opened:
        return list(opened)
    sees = _seer(store, scope, {(thread_id, str(o["interrupt_id"])) for o in opened})
    return [o for o in opened if sees((thread_id, str(o["interrupt_id"])))]


def visible_steps(
    store: Any, scope: Scope, steps: Sequence[tuple[StoredEvent, dict[str, Any]]]
) -> list[tuple[StoredEvent, dict[str, Any]]]:
    """A replay's ``(event, state)`` steps a reader of ``scope`` may see; a state's pending
    marker of an interrupt it may not see is shown as none."""
    if scope is None:
        return list(steps)
    keys = {(e.thread_id, e.interrupt_id) for e, _ in steps if e.interrupt_id is not None}
    keys.update(key for e, _ in steps for key in _references(e))
    keys.update(key for e, s in steps if (key := _pending_key(e.thread_id, s)) is not None)
    sees = _seer(store, scope, keys)
    out = []
    for event, state in steps:
        shown = _shown(event, sees)
        if shown is None:
            continue
        pending = _pending_key(event.thread_id, state)
        out.append((shown, state if pending is None or sees(pending) else {**state, PENDING_KEY: None}))
    return out
