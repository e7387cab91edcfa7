"""Markers and mints for the tests, built in one place.

A module that wants its own defaults binds them with ``functools.partial`` (a name, a
payload, a fixed interrupt id) instead of writing its own builder, so what a marker
holds is decided here and a change of its shape is one edit.

- :func:`marker`: the whole ``{"_interrupt_pending": ...}`` update a tool returns, made by
  ``build_interrupt_marker`` (stamped by the clock, frozen or not).
- :func:`pending`: the marker inside that update, the dict ``store.pending`` answers.
- :func:`plain_marker`: a marker dict written by hand, as a caller without the helper
  would (``minted_at`` chosen, ``age`` seconds back, or left out).
- :func:`mint`: mints a :func:`marker` on a thread and returns its inner dict.
"""

from __future__ import annotations

import time
from typing import Any

from symfonic_store import build_interrupt_marker, new_interrupt_id

NAME = "approval_required"
SEED_PAYLOAD: dict[str, Any] = {"amount": 420}
"""The seed's payload: what a marker carries when a test does not say."""

_UNSET: Any = object()


def marker(
    interrupt_id: str | None = None,
    *,
    name: str = NAME,
    run_id: str | None = None,
    payload: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A whole update; its payload is ``payload``, else the keyword ``fields`` (maybe none).

    Without an ``interrupt_id`` a new one is drawn."""
    return build_interrupt_marker(
        name=name,
        interrupt_id=interrupt_id if interrupt_id is not None else new_interrupt_id(),
        payload=dict(payload) if payload is not None else fields,
        run_id=run_id,
    )


def pending(interrupt_id: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """The marker inside :func:`marker`'s update (same arguments)."""
    return dict(marker(interrupt_id, **kwargs)["_interrupt_pending"])


def plain_marker(
    interrupt_id: str,
    *,
    name: str = NAME,
    payload: dict[str, Any] | None = None,
    age: float | None = 0.0,
    **fields: Any,
) -> dict[str, Any]:
    """A marker dict written by hand: the seed's keys, minted ``age`` seconds ago (no
    ``minted_at`` nor ``tool_call_id``/``run_id`` when ``age`` is None); ``fields`` override."""
    built: dict[str, Any] = {
        "name": name,
        "interrupt_id": interrupt_id,
        "payload": dict(SEED_PAYLOAD if payload is None else payload),
    }
    if age is not None:
        built.update(tool_call_id=None, run_id=None, minted_at=time.time() - age)
    built.update(fields)
    return built


def mint(
    store: Any,
    thread_id: str,
    interrupt_id: str | None = None,
    *,
    name: str = NAME,
    payload: dict[str, Any] | None = None,
    run_id: str | None = None,
    actor: Any = _UNSET,
) -> dict[str, Any]:
    """Mint a marker (the seed's payload unless given) on ``thread_id``; its inner dict.

    ``actor`` is passed only when given, so the store's own default stays in force."""
    update = marker(
        interrupt_id, name=name, run_id=run_id,
        payload=dict(SEED_PAYLOAD) if payload is None else payload,
    )
    if actor is _UNSET:
        store.mint(thread_id, update)
    else:
        store.mint(thread_id, update, actor=actor)
    return dict(update["_interrupt_pending"])
