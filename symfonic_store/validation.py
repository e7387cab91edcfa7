"""Input validation for every public entry point: fail early, name the field, write nothing."""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import InvalidInputError, InvalidMarkerError, PayloadTooLargeError
from .events import EXPIRY_REASONS, canonical_json
from .protocol import MARKER_KEYS, PENDING_KEY, ROUTES

MAX_ID_LENGTH = 255
DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576
MAX_SQL_INT = 2**63 - 1
"""The largest whole number the database compares (SQL BIGINT): positions and limits."""
MAX_JSON_DEPTH = 100
"""How deeply a payload or response may nest; deeper values are refused, not stored."""


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlevel = 3


def shown(value: Any) -> str:
    """A short, safe repr for messages: a 1 MB string or a 10,000-deep list stays short."""
    return _REPR.repr(value)


AUTHENTICATED_BY = ("service:tokens", "service:jwt", "service:trusted-header", "agent-server")
"""How an answering actor can have been established (SPEC §12); None: a caller named it."""


def authenticated_by(value: Any) -> str | None:
    """One of :data:`AUTHENTICATED_BY`, or None.

    Raises:
        InvalidInputError: any other value (the audit's word for how the actor was
            authenticated is never free text).
    """
    if value is None or value in AUTHENTICATED_BY:
        return value  # type: ignore[no-any-return]
    raise InvalidInputError("authenticated_by", f"must be one of {', '.join(AUTHENTICATED_BY)} or None, got {value!r}")


def text_id(value: Any, field: str, *, optional: bool = False) -> str | None:
    """A thread id, interrupt id or actor: a non-empty string of at most 255 characters."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}")
    if value == "":
        raise InvalidInputError(field, "must not be empty")
    return _bounded_text(value, field)


def required_id(value: Any, field: str) -> str:
    checked = text_id(value, field)
    assert checked is not None
    return checked


def answer_ids(thread_id: Any, interrupt_id: Any, actor: Any) -> tuple[str, str, str]:
    """The thread id, interrupt id and actor of an answer, checked in that order."""
    return (
        required_id(thread_id, "thread_id"),
        required_id(interrupt_id, "interrupt_id"),
        required_id(actor, "actor"),
    )


def config_thread_id(config: Mapping[str, Any] | None, needed: str) -> str:
    """The thread id of a LangGraph run's config; ``needed`` says who needs it and how to give it."""
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidInputError('config["configurable"]["thread_id"]', needed)
    return str(thread_id)


def thread_ids(value: Any, field: str = "thread_ids") -> tuple[str, ...] | None:
    """None (every thread), or a list, tuple or set of thread ids: sorted, without repeats.

    One string is refused rather than read as a sequence of one-letter thread ids.
    """
    if value is None:
        return None
    if not isinstance(value, list | tuple | set | frozenset):
        raise InvalidInputError(
            field, f"must be None or a list, tuple or set of thread ids, got {shown(value)}"
        )
    return tuple(sorted({required_id(t, f"{field} item") for t in value}))


def run_id(value: Any, field: str = "run_id") -> str | None:
    """A run id: None, or a string of at most 255 characters like the other ids.

    Bounded because it is stored beside the payload on every event, outside
    ``max_payload_bytes``: unbounded, it would be a way around that limit.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string or None, got {type(value).__name__}")
    return _bounded_text(value, field)


def _bounded_text(value: str, field: str) -> str:
    """``value`` if it is at most MAX_ID_LENGTH characters and storable."""
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInputError(
            field, f"is {len(value)} characters long; at most {MAX_ID_LENGTH} are allowed"
        )
    _check_storable_text(value, field)
    return value


def _check_storable_text(value: str, field: str) -> None:
    if "\x00" in value:
        raise InvalidInputError(field, "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(field, "is not valid Unicode text (lone surrogate)") from None


def ttl(value: Any, field: str = "ttl_seconds") -> float | None:
    """A TTL in seconds: None, or a finite number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(field, f"must be a number of seconds, got {shown(value)}")
    if not is_finite_number(value) or value < 0:
        raise InvalidInputError(field, f"must be a finite number of seconds >= 0, got {shown(value)}")
    return value


def is_finite_number(value: int | float) -> bool:
    """Finite, and (for an int) small enough to become a float: 10**400 is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def positive_int(value: Any, field: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SQL_INT:
        raise InvalidInputError(
            field, f"must be a whole number from 1 to {MAX_SQL_INT}, got {shown(value)}"
        )
    return value


def non_negative_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SQL_INT:
        raise InvalidInputError(
            field, f"must be a whole number from 0 to {MAX_SQL_INT}, got {shown(value)}"
        )
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Does JSON ``value`` nest deeper than ``limit`` containers? (iterative: no recursion)"""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _walk_plain(value: Any, limit: int) -> tuple[bool, bool, int]:
    """One iterative walk of ``value``: ``(plain, too_deep, spaces)``.

    ``plain``: made only of the types JSON reads back as (dicts with str keys, lists,
    str, int, float, bool, None), so the value needs no round trip to look as it will
    read back. ``spaces``: the bytes ``json.dumps``' default separators (", " and ": ")
    add to the compact canonical form, so the size limit keeps its meaning.
    """
    spaces = 0
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        kind = type(item)
        if kind is dict:
            if depth > limit:
                return True, True, spaces
            n = len(item)
            spaces += 2 * n - 1 if n else 0
            for key, child in item.items():
                if type(key) is not str:
                    return False, False, spaces
                if type(child) in _SCALARS:
                    continue
                push((child, depth + 1))
        elif kind is list:
            if depth > limit:
                return True, True, spaces
            n = len(item)
            spaces += n - 1 if n else 0
            for child in item:
                if type(child) in _SCALARS:
                    continue
                push((child, depth + 1))
        elif kind not in _SCALARS:
            return False, False, spaces
    return True, False, spaces


def json_value(
    value: Any, field: str, *, max_bytes: int | None, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """The value as it will read back from the database: plain JSON, within the size limit."""
    return json_encoded(value, field, max_bytes=max_bytes, max_depth=max_depth)[0]


def json_encoded(
    value: Any, field: str, *, max_bytes: int | None, max_depth: int = MAX_JSON_DEPTH
) -> tuple[Any, str]:
    """:func:`json_value`, and the value's canonical JSON (what the event's hash covers),
    encoded once here and reused for the hash and the row.

    The size limit counts the bytes of ``json.dumps(value, ensure_ascii=False)``.
    """
    try:
        canonical = canonical_json(value)
    except RecursionError:
        raise InvalidInputError(field, "is nested too deeply to store as JSON") from None
    except (TypeError, ValueError):
        canonical = None  # not JSON, or keys that do not sort: the general path decides
    if canonical is not None:
        plain, too_deep, spaces = _walk_plain(value, max_depth)
        if plain:
            try:
                size = len(canonical.encode("utf-8")) + spaces
            except UnicodeEncodeError:
                raise InvalidInputError(field, "contains text that is not valid Unicode") from None
            _check_size(field, size, max_bytes)
            if too_deep:
                raise InvalidInputError(field, f"is nested more than {max_depth} levels deep; flatten it")
            return value, canonical
    loaded = _round_trip(value, field, max_bytes=max_bytes, max_depth=max_depth)
    return loaded, canonical_json(loaded)


def _check_size(field: str, size: int, max_bytes: int | None) -> None:
    if max_bytes is not None and size > max_bytes:
        raise PayloadTooLargeError(
            field,
            f"is {size} bytes as JSON; the store's limit is {max_bytes} "
            "(raise max_payload_bytes if this is intended)",
        )


def _round_trip(value: Any, field: str, *, max_bytes: int | None, max_depth: int) -> Any:
    """A value that is not plain JSON (tuples, non-str keys, subclasses): encoded and read
    back, so it is stored, hashed and returned exactly as it will read back."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(field, f"is not JSON-serialisable ({exc})") from None
    except RecursionError:
        raise InvalidInputError(field, "is nested too deeply to store as JSON") from None
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(field, "contains text that is not valid Unicode") from None
    _check_size(field, len(encoded), max_bytes)
    loaded = json.loads(text)
    # Copies, hashes and projections of a stored value recurse; a bound keeps them safe.
    if _depth_exceeds(loaded, max_depth):
        raise InvalidInputError(field, f"is nested more than {max_depth} levels deep; flatten it")
    return loaded


def marker(value: Any, *, max_bytes: int | None) -> dict[str, Any]:
    """The seed-shaped marker from a marker dict or a whole ``{"_interrupt_pending": ...}``.

    Keeps exactly the seed's keys; ``payload`` defaults to ``{}`` and the optional keys to
    None. A ``minted_at`` that is not a number is kept as given (the TTL does not apply).
    """
    return marker_encoded(value, max_bytes=max_bytes)[0]


def marker_encoded(value: Any, *, max_bytes: int | None) -> tuple[dict[str, Any], dict[str, str]]:
    """:func:`marker`, and the canonical JSON of its payload (see :func:`json_encoded`)."""
    if isinstance(value, dict) and PENDING_KEY in value and "interrupt_id" not in value:
        value = value[PENDING_KEY]
    if not isinstance(value, dict):
        raise InvalidMarkerError("marker", f"must be a dict, got {type(value).__name__}")
    for key in ("name", "interrupt_id"):
        if key not in value:
            raise InvalidMarkerError(f"marker.{key}", "is missing")
    name = value["name"]
    if not isinstance(name, str) or not name:
        raise InvalidMarkerError("marker.name", "must be a non-empty string")
    _check_storable_text(name, "marker.name")
    try:
        interrupt_id = required_id(value["interrupt_id"], "marker.interrupt_id")
    except InvalidInputError as exc:
        raise InvalidMarkerError(exc.field, exc.problem) from None
    tool_call_id = value.get("tool_call_id")
    if tool_call_id is not None and not isinstance(tool_call_id, str):
        raise InvalidMarkerError("marker.tool_call_id", "must be a string or None")
    try:
        marker_run = run_id(value.get("run_id"), "marker.run_id")
    except InvalidInputError as exc:
        raise InvalidMarkerError(exc.field, exc.problem) from None
    minted_at = value.get("minted_at")
    if isinstance(minted_at, int | float) and not is_finite_number(minted_at):
        raise InvalidMarkerError("marker.minted_at", "must be a finite number")
    payload, payload_json = json_encoded(
        value.get("payload", {}), "marker.payload", max_bytes=max_bytes
    )
    # The marker as a whole must be JSON too: minted_at is kept as given (a date string,
    # say), and text must be valid Unicode to be hashed and stored.
    minted_at = _marker_json(minted_at)
    tool_call_id = _marker_json(tool_call_id)
    shaped = {
        "name": str(name),
        "interrupt_id": str(interrupt_id),
        "payload": payload,
        "tool_call_id": tool_call_id,
        "run_id": None if marker_run is None else str(marker_run),
        "minted_at": minted_at,
    }
    assert list(shaped) == list(MARKER_KEYS)
    return shaped, {"payload": payload_json}


def _marker_json(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError("marker", "contains text that is not valid Unicode") from None
        return value
    if kind in _SCALARS:
        return value
    return json_value(value, "marker", max_bytes=None)


def route(value: Any) -> str:
    if value not in ROUTES:
        raise InvalidInputError("route", f"must be one of {', '.join(ROUTES)}; got {shown(value)}")
    return str(value)


def route_reason(value: Any) -> str | None:
    if value not in (None, "ttl", "run_id"):
        raise InvalidInputError("reason", f"must be None, 'ttl' or 'run_id'; got {shown(value)}")
    return value  # type: ignore[no-any-return]


def expiry_reason(value: Any) -> str:
    if value not in EXPIRY_REASONS:
        raise InvalidInputError(
            "reason", f"must be one of {', '.join(EXPIRY_REASONS)}; got {shown(value)}"
        )
    return str(value)


def as_of(value: Any, field: str = "until") -> int | datetime | None:
    """A replay bound: a global position (int >= 0) or a datetime (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            # Beyond year 1..9999 once in UTC: the bound is before or after everything.
            offset = value.utcoffset()
            later = offset is not None and offset < timedelta(0)
            return (datetime.max if later else datetime.min).replace(tzinfo=UTC)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SQL_INT:
        raise InvalidInputError(
            field, f"must be an event position (0 to {MAX_SQL_INT}) or a datetime; got {shown(value)}"
        )
    return value


def moment(value: Any, field: str) -> datetime | None:
    """An audit bound: a datetime, or an ISO 8601 string (no offset means UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInputError(
                field, f"is not an ISO 8601 date or time (e.g. 2026-11-29T12:00:00Z): {shown(value)}"
            ) from None
    if not isinstance(value, datetime):
        raise InvalidInputError(field, f"must be a datetime or an ISO 8601 string; got {shown(value)}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
