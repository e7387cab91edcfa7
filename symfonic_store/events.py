"""The event model: the stored event and its tamper-evidence hash (the event types are
declared in :mod:`symfonic_store.event_types`, and their names re-exported here).

Event ``type`` strings and the keys of ``data`` are public: auditors read the event
table directly with SQL.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from json.encoder import c_make_encoder  # type: ignore[attr-defined]
from typing import Any, Final

from .event_types import ASSIGNED as ASSIGNED
from .event_types import ESCALATED as ESCALATED
from .event_types import EXPIRED as EXPIRED
from .event_types import MINTED as MINTED
from .event_types import REMINDED as REMINDED
from .event_types import RESUME_REJECTED as RESUME_REJECTED
from .event_types import RESUMED as RESUMED
from .event_types import ROUTE_DECIDED as ROUTE_DECIDED
from .event_types import VOTED as VOTED
from .event_types import built_in_types

EVENT_TYPES: Final = tuple(t.name for t in built_in_types())
"""The built-in event types (declared in :mod:`symfonic_store.event_types`)."""
ENDINGS: Final = tuple(t.name for t in built_in_types() if t.ending)
"""The terminal event types: an interrupt has at most one of them (invariant I3)."""

EXPIRY_REASONS: Final = ("ttl", "run_id", "superseded", "cancelled")
DETECTORS: Final = ("router", "sweep", "resume", "mint", "api", "gateway", "checkpointer")
REJECTION_WHYS: Final = (
    "unknown", "already_resolved", "expired", "not_allowed", "in_progress", "not_taken"
)
ASSIGN_NOT_ALLOWED: Final = "assign_not_allowed"
"""The ``why`` of a refused assignment (SPEC §15): ``interrupt.resume_rejected`` with data
``{why, assign, error}`` (no ``response``), which is not an answer attempt."""


def refused_assignment(data: Mapping[str, Any]) -> bool:
    """Is this ``interrupt.resume_rejected`` data a refused assignment, not a refused answer?

    ``why: "assign_not_allowed"``; or the shape releases before it recorded one in: ``why:
    "not_allowed"`` with a ``response`` of exactly ``{"assign": "<to>"}`` (a refused answer
    of that very shape reads as an assignment too: nothing else tells them apart).
    """
    why = data.get("why")
    if why == ASSIGN_NOT_ALLOWED:
        return True
    response = data.get("response")
    return (
        why == "not_allowed"
        and isinstance(response, dict)
        and set(response) == {"assign"}
        and isinstance(response["assign"], str)
    )


GENESIS_HASH: Final = "0" * 64
"""The "previous hash" of a thread's first event."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row of the event table, as read back (the columns of the table, by name)."""

    position: int
    # Deliberately NewEvent's fields again: a shared base would move ``position`` from
    # first place in this public class's constructor.
    thread_id: str
    version: int
    type: str
    interrupt_id: str | None
    run_id: str | None
    actor: str | None
    data: dict[str, Any]
    occurred_at: datetime
    hash: str

    def as_dict(self) -> dict[str, Any]:
        """The event as JSON-ready values (``occurred_at`` as ISO 8601 UTC)."""
        return {
            "position": self.position,
            **_fields(self),
            "occurred_at": self.occurred_at.isoformat(),
            "hash": self.hash,
        }


@dataclass(slots=True)
class NewEvent:
    """An event about to be appended: everything but the position the database assigns."""

    # Deliberately StoredEvent's fields again (see there).
    thread_id: str
    version: int
    type: str
    interrupt_id: str | None
    run_id: str | None
    actor: str | None
    data: dict[str, Any]
    occurred_at: datetime
    hash: str = field(default="")
    data_json: str = field(default="")
    """``data`` as canonical JSON, encoded once by :func:`seal`: the hash covers exactly
    this text, and the row stores it (on executors that take encoded JSON)."""
    encoded: Mapping[str, str] = field(default_factory=dict)
    """Canonical JSON of some of ``data``'s top-level values, spliced into ``data_json``
    by :func:`seal`: the audit columns that copy them bind the same text."""
    tenant: str | None = field(default=None)
    """The tenant of a mint (SPEC §15): its own column, outside the hashed data."""

    def row(self) -> dict[str, Any]:
        return {
            **_fields(self), "occurred_at": self.occurred_at, "hash": self.hash,
            "tenant": self.tenant,
        }


def _fields(event: StoredEvent | NewEvent) -> dict[str, Any]:
    """What a stored and a new event both carry, between the position and the time."""
    return {
        "thread_id": event.thread_id,
        "version": event.version,
        "type": event.type,
        "interrupt_id": event.interrupt_id,
        "run_id": event.run_id,
        "actor": event.actor,
        "data": event.data,
    }


_string = json.encoder.encode_basestring  # the escaping canonical_json gives a str
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


_ENCODERS = threading.local()


def _c_encoder() -> Any:
    """This thread's C encoder of ``_CANONICAL``'s settings, made once (``JSONEncoder``
    makes one per call), and its circular-reference markers."""
    markers: dict[int, Any] = {}
    encoder = c_make_encoder(
        markers, _CANONICAL.default, _string, None, ":", ",", True, False, False
    )
    _ENCODERS.made = made = (encoder, markers)
    return made


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces, no NaN/Infinity."""
    if c_make_encoder is None:  # pragma: no cover - CPython has the C encoder
        return _CANONICAL.encode(value)
    if type(value) is str:
        return _string(value)
    try:
        encoder, markers = _ENCODERS.made
    except AttributeError:
        encoder, markers = _c_encoder()
    try:
        return "".join(encoder(value, 0))
    except BaseException:
        markers.clear()  # left behind by the failed pass: they would mean cycles later
        raise


def _text(value: str | None) -> str:
    """``canonical_json(value)`` of a text item of an event's head, or of None."""
    if value is None:
        return "null"
    if type(value) is not str:
        return canonical_json(value)
    return _string(value)


_STAND_IN = f"\x00symfonic-encoded-{uuid.uuid4().hex}\x00"
_STAND_IN_JSON = canonical_json(_STAND_IN)


def canonical_json_with(data: dict[str, Any], encoded: Mapping[str, str]) -> str:
    """``canonical_json(data)``, where the values of some top-level keys are already
    encoded (``encoded[key]`` is ``canonical_json(data[key])``): those are spliced in,
    not encoded again. A payload is encoded once, for its size check, its hash and its row.
    """
    if not encoded:
        return canonical_json(data)
    stand_in = dict(data)
    for key in encoded:
        stand_in[key] = _STAND_IN
    parts = canonical_json(stand_in).split(_STAND_IN_JSON)
    if len(parts) != len(encoded) + 1:  # the stand-in's text inside some other value
        return canonical_json(data)
    keys = sorted(encoded)  # sorted keys: the stand-ins appear in key order
    out = [parts[0]]
    for key, rest in zip(keys, parts[1:], strict=True):
        out.append(encoded[key])
        out.append(rest)
    return "".join(out)


def event_hash(
    prev_hash: str,
    *,
    thread_id: str,
    version: int,
    type: str,
    interrupt_id: str | None,
    run_id: str | None,
    actor: str | None,
    data: dict[str, Any],
    occurred_at: datetime,
) -> str:
    """SHA-256 over the event's content and the previous event's hash on its thread.

    The position is left out on purpose: the database assigns it after the hash is
    computed, and the per-thread version already fixes the event's place in its chain.
    """
    body = canonical_json(
        [
            prev_hash,
            thread_id,
            version,
            type,
            interrupt_id,
            run_id,
            actor,
            data,
            occurred_at.isoformat(),
        ]
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def seal(event: NewEvent, prev_hash: str, encoded: Mapping[str, str] | None = None) -> NewEvent:
    """Fill in ``event.data_json`` and ``event.hash`` (see :func:`event_hash`); returns the event.

    The data is encoded once (``encoded``: values of its top-level keys already encoded,
    see :func:`canonical_json_with`), and the hashed body is assembled around that text:
    the same bytes as :func:`event_hash` encodes, without encoding the data twice.
    """
    encoded = event.encoded = encoded or {}
    data_json = event.data_json = canonical_json_with(event.data, encoded)
    version = event.version
    if type(version) is int:
        # The head's items are text, None and one int: their canonical JSON is each one's
        # own (the encoder's string escaping, ``null``, the digits), joined as it joins them.
        head = ",".join(
            (
                _text(prev_hash), _text(event.thread_id), str(version), _text(event.type),
                _text(event.interrupt_id), _text(event.run_id), _text(event.actor),
            )
        )
        # An ISO 8601 time is digits and punctuation: nothing in it to escape.
        body = f"[{head},{data_json},\"{event.occurred_at.isoformat()}\"]"
    else:  # pragma: no cover - versions are ints; kept exact for anything else
        head = canonical_json(
            [
                prev_hash, event.thread_id, version, event.type, event.interrupt_id,
                event.run_id, event.actor,
            ]
        )
        body = f"{head[:-1]},{data_json},{canonical_json(event.occurred_at.isoformat())}]"
    event.hash = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return event


def stored_hash_is_valid(event: StoredEvent, prev_hash: str) -> bool:
    """Does the stored hash match the stored content and the previous link?"""
    return event.hash == event_hash(
        prev_hash,
        thread_id=event.thread_id,
        version=event.version,
        type=event.type,
        interrupt_id=event.interrupt_id,
        run_id=event.run_id,
        actor=event.actor,
        data=event.data,
        occurred_at=event.occurred_at,
    )
