"""Input validation for every public entry point: fail early, name the field, write nothing."""

from __future__ import annotations

import json
import math
import reprlib
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import InvalidInputError, InvalidMarkerError, PayloadTooLargeError
from .events import EXPIRY_REASONS
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


def text_id(value: Any, field: str, *, optional: bool = False) -> str | None:
    """A thread id, interrupt id or actor: a non-empty string of at most 255 characters."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}")
    if value == "":
        raise InvalidInputError(field, "must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInputError(
            field, f"is {len(value)} characters long; at most {MAX_ID_LENGTH} are allowed"
        )
    _check_storable_text(value, field)
    return value


def required_id(value: Any, field: str) -> str:
    checked = text_id(value, field)
    assert checked is not None
    return checked


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


def json_value(
    value: Any, field: str, *, max_bytes: int | None, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """The value as it will read back from the database: plain JSON, within the size limit."""
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
    if max_bytes is not None and len(encoded) > max_bytes:
        raise PayloadTooLargeError(
            field,
            f"is {len(encoded)} bytes as JSON; the store's limit is {max_bytes} "
            "(raise max_payload_bytes if this is intended)",
        )
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
    shaped = {
        "name": name,
        "interrupt_id": interrupt_id,
        "payload": value.get("payload", {}),
        "tool_call_id": tool_call_id,
        "run_id": marker_run,
        "minted_at": minted_at,
    }
    shaped["payload"] = json_value(shaped["payload"], "marker.payload", max_bytes=max_bytes)
    shaped = json_value(shaped, "marker", max_bytes=None, max_depth=MAX_JSON_DEPTH + 1)
    assert list(shaped) == list(MARKER_KEYS)
    return dict(shaped)


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
