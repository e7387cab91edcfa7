"""What a principal may see of a thread's log (SPEC §15).

A principal with tenants sees the events of its tenants' interrupts; events of no
interrupt are shown to ``"*"`` principals only. A thread's interrupts need not share a
tenant (a graph may be run for another tenant later on the same thread), so an event a
principal may see can still name an interrupt it may not: a superseded marker's expiry
names the marker that superseded it (``superseded_by``), and a replayed state holds the
marker pending at that moment. Both are taken out of what the principal is shown --
the reference dropped with the event's actor (who minted the other interrupt), the
pending marker shown as none -- and so are the thread's open interrupts of other
tenants, so another tenant's interrupt stays indistinguishable from one that does not
exist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..events import EXPIRED
from ..protocol import PENDING_KEY

if TYPE_CHECKING:
    from ..events import StoredEvent
    from ..services.audit import AuditRecord
    from .principal import Principal

REFERENCES = ("superseded_by",)
"""Keys of an event's data naming another interrupt of the same thread."""

Key = tuple[str, str]


def _references(event: StoredEvent) -> Iterable[Key]:
    for name in REFERENCES:
        value = event.data.get(name)
        if isinstance(value, str):
            yield (event.thread_id, value)


def _pending_key(thread_id: str, state: dict[str, Any]) -> Key | None:
    marker = state.get(PENDING_KEY)
    value = marker.get("interrupt_id") if isinstance(marker, dict) else None
    return (thread_id, value) if isinstance(value, str) else None


def _seer(store: Any, principal: Principal, keys: set[Key]) -> Callable[[Key], bool]:
    """May ``principal`` see the interrupt of a key? (Never minted: no.)"""
    tenants = store.interrupt_tenants(keys) if keys else {}
    return lambda key: key in tenants and principal.sees(tenants[key])


def _shown(event: StoredEvent, sees: Callable[[Key], bool]) -> StoredEvent | None:
    if event.interrupt_id is None or not sees((event.thread_id, event.interrupt_id)):
        return None
    hidden = {
        name for name in REFERENCES
        if isinstance(value := event.data.get(name), str) and not sees((event.thread_id, value))
    }
    if not hidden:
        return event
    # The actor of such an event is who caused it there -- the hidden interrupt's requester.
    return dataclasses.replace(
        event, actor=None, data={k: v for k, v in event.data.items() if k not in hidden}
    )


def visible_events(store: Any, principal: Principal, events: Sequence[StoredEvent]) -> list[StoredEvent]:
    """The events ``principal`` may see, each without references to interrupts it may not."""
    if principal.scope is None:
        return list(events)
    keys = {(e.thread_id, e.interrupt_id) for e in events if e.interrupt_id is not None}
    keys.update(key for e in events for key in _references(e))
    sees = _seer(store, principal, keys)
    return [shown for e in events if (shown := _shown(e, sees)) is not None]


def visible_open(
    store: Any, principal: Principal, thread_id: str, opened: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The thread's open interrupts (each with ``interrupt_id``) ``principal`` may see."""
    if principal.scope is None or not opened:
        return list(opened)
    sees = _seer(store, principal, {(thread_id, str(o["interrupt_id"])) for o in opened})
    return [o for o in opened if sees((thread_id, str(o["interrupt_id"])))]


def visible_steps(
    store: Any, principal: Principal, steps: Sequence[tuple[StoredEvent, dict[str, Any]]]
) -> list[tuple[StoredEvent, dict[str, Any]]]:
    """A replay's ``(event, state)`` steps ``principal`` may see; a state's pending marker
    of an interrupt it may not see is shown as none."""
    if principal.scope is None:
        return list(steps)
    keys = {(e.thread_id, e.interrupt_id) for e, _ in steps if e.interrupt_id is not None}
    keys.update(key for e, _ in steps for key in _references(e))
    keys.update(key for e, s in steps if (key := _pending_key(e.thread_id, s)) is not None)
    sees = _seer(store, principal, keys)
    out = []
    for event, state in steps:
        shown = _shown(event, sees)
        if shown is None:
            continue
        pending = _pending_key(event.thread_id, state)
        out.append((shown, state if pending is None or sees(pending) else {**state, PENDING_KEY: None}))
    return out


def visible_records(
    store: Any, principal: Principal, records: Sequence[AuditRecord], actor: str | None = None
) -> list[AuditRecord]:
    """Audit records of ``principal``'s tenants' interrupts (the store scoped them): one
    superseded by another tenant's mint loses its ``actor``, that mint's requester -- and,
    when the records were filtered by ``actor``, its place among them (the filter would
    confirm the hidden name)."""
    suspects = {r.thread_id for r in records if r.reason == "superseded" and r.actor is not None}
    if principal.scope is None or not suspects:
        return list(records)
    refs = {
        (e.thread_id, e.interrupt_id): key
        for thread_id in sorted(suspects)
        for e in store.history(thread_id)
        if e.type == EXPIRED and e.interrupt_id is not None
        for key in _references(e)
    }
    sees = _seer(store, principal, set(refs.values()))
    shown = [
        dataclasses.replace(r, actor=None)
        if (key := refs.get((r.thread_id, r.interrupt_id))) is not None and not sees(key)
        else r
        for r in records
    ]
    return shown if actor is None else [r for r in shown if r.actor == actor]
