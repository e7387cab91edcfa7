"""The audit columns: what ``audit()`` reports of an event, copied from its data when the
event is appended, so the audit reads columns instead of decoding every mint's JSON.

They are a pure function of the event's ``type``, ``data`` and ``occurred_at``
(:func:`derive`, by the type's ``audit`` rule in :mod:`symfonic_store.event_types`): the store's own INSERT writes them on every path, migration
``0011_audit_columns`` filled them in for the events appended before it (``0014`` and
``0021`` what they added), and ``verify``
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
                           ``interrupt.expired`` ``[data["decision"]]`` (the thread-level ignore,
                                                 SPEC §13; since ``0021_ignore_audit``)
``audit_reason``           ``interrupt.expired`` ``data["reason"]``; on
                           ``…resume_rejected``  ``data["why"]``
``audit_error``            ``…resume_rejected``  ``data["error"]``
``audit_authenticated_by`` ``interrupt.resumed`` ``data["authenticated_by"]`` (since
                                                 ``0014_decision_audit``)
                           ``interrupt.expired`` the same (since ``0021_ignore_audit``)
=========================  ====================  =============================================

Every other cell is NULL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from .event_types import marker_minted_at as marker_minted_at
from .event_types import spec_of

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


def derive(type: str, data: dict[str, Any], occurred_at: datetime) -> dict[str, Any]:
    """The audit columns of an event (see the module docstring), every one of them:
    the values its type's ``audit`` rule gives (:mod:`symfonic_store.event_types`),
    NULL for the rest."""
    spec = spec_of(type)
    if spec is None or spec.audit is None:
        return dict(_NONE)
    return {**_NONE, **spec.audit(data, occurred_at)}


def copied_key(type: str) -> str | None:
    """The key of data an audit column of this type copies as JSON (see ``JSON_COPIES``)."""
    spec = spec_of(type)
    return None if spec is None else spec.audit_copy
