"""The audit columns: what ``audit()`` reports of an event, copied from its data when the
event is appended, so the audit reads columns instead of decoding every mint's JSON.

They are a pure function of the event's ``type``, ``data`` and ``occurred_at``
(:func:`derive`): the store's own INSERT writes them on every path, migration
``0011_audit_columns`` filled them in for the events appended before it, and ``verify``
recomputes them from the hashed ``data``. The hash chain does not cover them (they are not
the event, only a copy of part of it): a copy that disagrees with its event's data is
reported by ``verify``, so nobody changes "who approved what" through them unnoticed.

=========================  ====================  =============================================
column                     set on                value
=========================  ====================  =============================================
``audit_name``             ``interrupt.minted``  ``data["name"]``
``audit_payload``          ``interrupt.minted``  ``data["payload"]`` (JSON, the same text)
``audit_minted_at``        ``interrupt.minted``  the marker's ``minted_at`` as a UTC datetime,
                                                 else ``occurred_at``
``audit_native``           ``interrupt.minted``  a LangGraph interrupt (SPEC §8), not a marker
``audit_response``         ``interrupt.resumed`` ``data["response"]`` (JSON)
``audit_decisions``        ``interrupt.resumed`` ``data["decisions"]``, or ``[data["decision"]]``
``audit_reason``           ``interrupt.expired`` ``data["reason"]``; on
                           ``…resume_rejected``  ``data["why"]``
``audit_error``            ``…resume_rejected``  ``data["error"]``
``audit_authenticated_by`` ``interrupt.resumed`` ``data["authenticated_by"]`` (since
                                                 ``0014_decision_audit``)
=========================  ====================  =============================================

Every other cell is NULL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from .events import EXPIRED, MINTED, RESUME_REJECTED, RESUMED
from .native import NATIVE_SOURCE

AUDIT_COLUMNS: Final = (
    "audit_name",
    "audit_payload",
    "audit_minted_at",
    "audit_native",
    "audit_response",
    "audit_decisions",
    "audit_reason",
    "audit_error",
    "audit_authenticated_by",
)
JSON_COPIES: Final = (("audit_payload", "payload"), ("audit_response", "response"))
"""``(column, key of data)``: JSON columns holding one top-level value of the data as it
is, so the append binds the text it already encoded for the data (encoded once)."""

_NONE: Final = dict.fromkeys(AUDIT_COLUMNS)


def marker_minted_at(data: dict[str, Any], occurred_at: datetime) -> datetime:
    """The marker's ``minted_at`` (Unix seconds) as a UTC datetime, else ``occurred_at``."""
    minted_at = data.get("minted_at")
    if isinstance(minted_at, int | float) and not isinstance(minted_at, bool):
        try:
            return datetime.fromtimestamp(minted_at, UTC)
        except (OverflowError, OSError, ValueError):
            return occurred_at
    return occurred_at


def derive(type: str, data: dict[str, Any], occurred_at: datetime) -> dict[str, Any]:
    """The audit columns of an event (see the module docstring), every one of them."""
    if type == MINTED:
        return {
            **_NONE,
            "audit_name": data.get("name"),
            "audit_payload": data.get("payload"),
            "audit_minted_at": marker_minted_at(data, occurred_at),
            "audit_native": data.get("source") == NATIVE_SOURCE,
        }
    if type == RESUMED:
        if "decisions" in data:
            found = data["decisions"]
            decisions: list[Any] | None = list(found) if isinstance(found, list) else None
        elif "decision" in data:
            decisions = [data["decision"]]
        else:
            decisions = None
        authenticated_by = data.get("authenticated_by")
        return {
            **_NONE,
            "audit_response": data.get("response"),
            "audit_decisions": decisions,
            "audit_authenticated_by": authenticated_by if isinstance(authenticated_by, str) else None,
        }
    if type == EXPIRED:
        return {**_NONE, "audit_reason": data.get("reason")}
    if type == RESUME_REJECTED:
        return {**_NONE, "audit_reason": data.get("why"), "audit_error": data.get("error")}
    return dict(_NONE)
