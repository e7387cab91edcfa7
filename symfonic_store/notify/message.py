"""What a subscription is told about an event: the webhook body and id (Standard
Webhooks), and the short text Apprise sends (SPEC §14). Pure: no I/O."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ..events import StoredEvent


@dataclass(frozen=True, slots=True)
class Interrupt:
    """What the notifier knows of the interrupt an event concerns (from its mint)."""

    name: str | None
    payload: Any
    minted_at: datetime | None
    tenant: str | None


def webhook_id(subscription: str, position: int) -> str:
    """``msg_`` + a hex digest of the subscription's name and the event's position: the
    same on every retry, from every process, so a receiver can drop duplicates by it."""
    digest = hashlib.sha256(f"{subscription}\x00{position}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def inbox_url(base: str | None, thread_id: str, interrupt_id: str | None) -> str | None:
    """``base/interrupts/<thread>/<id>``, each id percent-encoded; None without a base."""
    if base is None or interrupt_id is None:
        return None
    return f"{base.rstrip('/')}/interrupts/{quote(thread_id, safe='')}/{quote(interrupt_id, safe='')}"


def webhook_body(event: StoredEvent, interrupt: Interrupt | None, inbox: str | None) -> dict[str, Any]:
    """The JSON body of a webhook: ``{"type", "timestamp", "data": {...}}``."""
    decision = event.data.get("decision") if isinstance(event.data, dict) else None
    return {
        "type": event.type,
        "timestamp": event.occurred_at.isoformat(),
        "data": {
            "thread_id": event.thread_id,
            "interrupt_id": event.interrupt_id,
            "name": None if interrupt is None else interrupt.name,
            "payload": None if interrupt is None else interrupt.payload,
            "actor": event.actor,
            "decision": decision if isinstance(decision, str) else None,
            "position": event.position,
            "inbox_url": inbox_url(inbox, event.thread_id, event.interrupt_id),
        },
    }


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def short_message(
    event: StoredEvent, interrupt: Interrupt | None, inbox: str | None, *, now: datetime
) -> tuple[str, str]:
    """``(title, body)`` for Apprise: the interrupt's name, thread, age and inbox link;
    never a payload value (chat and mail are no place for them)."""
    name = (interrupt.name if interrupt is not None else None) or "(unnamed)"
    title = f"{event.type}: {name}"
    lines = [f"thread {event.thread_id}"]
    if event.interrupt_id is not None:
        lines.append(f"interrupt {event.interrupt_id}")
    since = interrupt.minted_at if interrupt is not None and interrupt.minted_at else event.occurred_at
    lines.append(f"age {_age((now - since).total_seconds())}")
    if event.actor:
        lines.append(f"by {event.actor}")
    link = inbox_url(inbox, event.thread_id, event.interrupt_id)
    if link is not None:
        lines.append(link)
    return title, "\n".join(lines)
