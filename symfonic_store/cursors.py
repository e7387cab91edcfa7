"""Cursors of the Python API's pages (SPEC §17): an item's place in an index, opaque to
callers (base64url of a small JSON key), handed back as ``after`` to read on from it.

A cursor names its read (``"audit"`` or ``"pending"``), so one read's cursor given to
the other is refused rather than misread.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from . import validation
from .errors import InvalidInputError

AUDIT = "audit"
PENDING = "pending"

AUDIT_SHAPE: tuple[type, ...] = (str, str, int)
"""An audit key: the record's thread and interrupt (whose mint's place in the log the
read looks up by its unique index), and its action index (-1: the interrupt's one
record)."""

BIGINT = 1 << 63
"""A key's integers fit a 64-bit column (the database's bound)."""

PENDING_SHAPE: tuple[type, ...] = (float, int, str, str)
"""A pending key: the time the list is ordered by, the item's kind (0: a seed marker,
1: an open LangGraph interrupt), its thread and its interrupt id."""


def encode(read: str, key: list[Any]) -> str:
    """The cursor of ``key`` in ``read``'s order."""
    raw = json.dumps([read, *key], separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: Any, read: str, shape: tuple[type, ...]) -> list[Any]:
    """The key a cursor of ``read`` encodes (values of the types of ``shape``).

    Raises:
        InvalidInputError: (a ValueError) ``cursor`` is not a cursor this read handed out.
    """
    problem = InvalidInputError("after", f"not a cursor of {read}() (pass an item's cursor as it was given)")
    if not isinstance(cursor, str) or not cursor or len(cursor) > 4096:
        raise problem
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise problem from None
    if not isinstance(key, list) or len(key) != len(shape) + 1 or key[0] != read:
        raise problem
    values: list[Any] = []
    # bool is an int to isinstance: a key holds none, so types are compared exactly; an
    # integral time may come back from JSON as an int.
    for value, kind in zip(key[1:], shape, strict=True):
        try:
            read_as: Any = float(value) if kind is float and type(value) is int else value
        except OverflowError:
            raise problem from None
        if type(read_as) is not kind or (isinstance(read_as, float) and not math.isfinite(read_as)):
            raise problem
        if isinstance(read_as, int) and not -BIGINT <= read_as < BIGINT:
            raise problem  # no database column holds it
        if kind is str:
            try:  # what an id may be: no NUL, encodable, at most 255 characters
                validation.text_id(read_as, "after")
            except InvalidInputError:
                raise problem from None
        values.append(read_as)
    return values
