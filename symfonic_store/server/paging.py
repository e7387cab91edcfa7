"""Pages of the API and the inbox: a cursor is the last shown item's key, encoded
opaquely; a limit is a whole number up to :data:`MAX_PAGE`."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..services.audit import AuditRecord

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


AUDIT_KEY_SHAPE = (str, str, str, int)
"""The types of an audit key's values (:func:`audit_key`)."""


def audit_key(record: AuditRecord) -> list[Any]:
    """A record's place in the audit's order; a cursor is the last shown record's key."""
    return [record.minted_at.isoformat(), record.thread_id, record.interrupt_id,
            -1 if record.action_index is None else record.action_index]


def audit_page_of(
    records: Sequence[AuditRecord], *, after: str | None, limit: int
) -> tuple[list[AuditRecord], str | None]:
    """One page of ``records`` after the cursor ``after``, and the next page's cursor
    (``GET /api/audit`` and the inbox's audit page: a cursor of one pages the other).

    Raises:
        BadRequest: ``after`` is not a cursor of this list.
    """
    keyed = sorted(((audit_key(r), r) for r in records), key=lambda pair: tuple(pair[0]))
    if after is not None:
        bound = tuple(decode_cursor(after, 4, AUDIT_KEY_SHAPE))
        keyed = [(k, r) for k, r in keyed if tuple(k) > bound]
    shown = keyed[:limit]
    return [r for _, r in shown], encode_cursor(shown[-1][0]) if len(keyed) > limit else None


def page_limit(value: str | None, default: int = DEFAULT_PAGE) -> int:
    if value is None or value == "":
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
        raise BadRequest(f"limit: must be a whole number from 1 to {MAX_PAGE}")
    return int(value)
