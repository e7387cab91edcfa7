"""Pages of the API and the inbox: a cursor is the last shown item's key, encoded
opaquely; a limit is a whole number up to :data:`MAX_PAGE`."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

DEFAULT_PAGE = 50
MAX_PAGE = 1000


class BadRequest(Exception):
    """A query parameter or body the API cannot use (400)."""


def encode_cursor(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode().rstrip("=")


NOT_A_CURSOR = "after: not a cursor this API handed out (use the 'next' of a page)"


def decode_cursor(cursor: str, size: int, shape: tuple[type, ...] | None = None) -> list[Any]:
    """The key a cursor encodes: a list of ``size`` values (of the types of ``shape``,
    when given: a forged key of other types is refused here, not compared later).

    Raises:
        BadRequest: it is not a cursor of this shape.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise BadRequest(NOT_A_CURSOR) from None
    if not isinstance(key, list) or len(key) != size:
        raise BadRequest(NOT_A_CURSOR)
    # bool is an int to isinstance: a key holds none, so it is refused by its exact type.
    if shape is not None and not all(
        type(value) is kind for value, kind in zip(key, shape, strict=True)
    ):
        raise BadRequest(NOT_A_CURSOR)
    return key


def page_limit(value: str | None, default: int = DEFAULT_PAGE) -> int:
    if value is None or value == "":
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
        raise BadRequest(f"limit: must be a whole number from 1 to {MAX_PAGE}")
    return int(value)
