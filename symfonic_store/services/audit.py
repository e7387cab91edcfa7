"""The audit: one record per interrupt -- who asked, who answered what, and when."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

from sqlalchemy.engine import Connection

from .. import native
from ..db.statements.audit import audit_rows
from ..decisions import builtin, reported
from ..events import RESUMED

AUDIT_FIELDS = (
    "thread_id",
    "interrupt_id",
    "name",
    "payload",
    "minted_at",
    "outcome",
    "reason",
    "actor",
    "response",
    "resolved_at",
    "attempts",
    "decision",
    "action",
    "action_index",
    "requested_by",
    "decision_source",
    "authenticated_by",
)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One interrupt's life in one line. Times are timezone-aware UTC."""

    thread_id: str
    interrupt_id: str
    name: str
    payload: Any
    minted_at: datetime
    outcome: str
    """``pending``, ``resumed`` or ``expired``."""
    reason: str | None
    actor: str | None
    """Who resumed it (or who cancelled it); None for a sweep or router expiry."""
    response: dict[str, Any] | None
    resolved_at: datetime | None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """The refused answers (``interrupt.resume_rejected``), in the order they happened:
    ``{"actor", "why", "error", "at"}``, ``error`` None unless the refusal names one,
    ``at`` a timezone-aware UTC datetime."""
    decision: str | None = None
    """What the answer decided (SPEC §12): ``approve``/``reject``/``edit``/``respond``
    (HITL middleware, breakpoints, ``{"approved": bool}``), ``accept``/``edit``/
    ``response``/``ignore`` (Agent Inbox), a word of the store's decisions function,
    else None. A breakpoint's ``approved``/``rejected`` of earlier releases reads as
    ``approve``/``reject``."""
    action: Any = None
    """For a batched HITL request: the action request this record is about."""
    action_index: int | None = None
    """For a batched HITL request: the action request's index (records share the id)."""
    requested_by: str | None = None
    """The mint's actor: who (or what) asked."""
    decision_source: str | None = None
    """``recorded`` (in the answer's hashed data), ``derived`` (the answer recorded none:
    the built-in rules applied at read time), or None (no decision)."""
    authenticated_by: str | None = None
    """How the answering actor was established: ``service:tokens``, ``service:jwt``,
    ``service:trusted-header``, ``agent-server``; None when a caller of the Python API
    or the CLI asserted it."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: datetimes as ISO 8601 UTC."""
        return {
            "thread_id": self.thread_id,
            "interrupt_id": self.interrupt_id,
            "name": self.name,
            "payload": self.payload,
            "minted_at": self.minted_at.isoformat(),
            "outcome": self.outcome,
            "reason": self.reason,
            "actor": self.actor,
            "response": self.response,
            "resolved_at": None if self.resolved_at is None else self.resolved_at.isoformat(),
            "attempts": [{**a, "at": a["at"].isoformat()} for a in self.attempts],
            "decision": self.decision,
            "action": self.action,
            "action_index": self.action_index,
            "requested_by": self.requested_by,
            "decision_source": self.decision_source,
            "authenticated_by": self.authenticated_by,
        }

    def as_csv_row(self) -> list[str]:
        """Spreadsheet-ready cells: dicts JSON-encoded, None as empty."""
        cells = []
        for value in self.as_dict().values():
            if value is None:
                cells.append("")
            elif isinstance(value, dict | list):
                cells.append(json.dumps(value, ensure_ascii=False, sort_keys=True))
            else:
                cells.append(str(value))
        return cells


_MINTED_AT = attrgetter("minted_at")


def _decided(
    stored: list[Any] | None,
    index: int,
    payload: Any,
    response: Any,
    interrupt_id: str,
    derived: list[list[str | None]],
) -> tuple[str | None, str | None]:
    """``(decision, decision_source)`` of an answer's ``index``-th decision."""
    word = stored[index] if stored is not None and index < len(stored) else None
    if isinstance(word, str):
        return reported(word), "recorded"
    if not derived:  # once per answer, and only for one that recorded no decision
        derived.append(builtin(payload, response, breakpoint=native.is_breakpoint(interrupt_id)))
    found = derived[0][index] if index < len(derived[0]) else None
    return (found, "derived") if found is not None else (None, None)


def audit(
    conn: Connection,
    *,
    thread_id: str | None,
    actor: str | None,
    since: datetime | None,
    until: datetime | None,
    decision: str | None = None,
) -> list[AuditRecord]:
    """One record per interrupt from the audit columns (SPEC §3 ``audit``), oldest mint
    first; ``since``/``until`` bound ``minted_at``; ``decision`` keeps the records whose
    reported decision is exactly that."""
    # One more statement for every record's refused answers, grouped here: a query per
    # record would cost a round trip per interrupt (bench/audit.py: 10,000 of them).
    rows, attempt_rows = audit_rows(conn, thread_id=thread_id, actor=actor)
    attempts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t_id, i_id, a_actor, a_why, a_error, a_at in attempt_rows:
        attempts.setdefault((t_id, i_id), []).append(
            {"actor": a_actor, "why": a_why, "error": a_error, "at": a_at}
        )
    # Every value comes from the audit columns (symfonic_store/audit_columns.py), written
    # at append time: no mint's or ending's JSON data is decoded here.
    records: list[AuditRecord] = []
    append = records.append
    for (
        _position, t_id, i_id, name, payload, minted_at, native_mint,
        end_type, end_actor, end_reason, end_response, end_decisions, end_at,
        requested_by, authenticated_by,
    ) in rows:
        if since is not None and minted_at < since:
            continue
        if until is not None and minted_at > until:
            continue
        if end_type is None:
            outcome, reason, response = "pending", None, None
        elif end_type == RESUMED:
            outcome, reason, response = "resumed", None, end_response
        else:
            outcome, reason, response = "expired", end_reason, None
        tried = attempts.get((t_id, i_id)) if attempts else None
        derived: list[list[str | None]] = []
        stored = end_decisions if isinstance(end_decisions, list) else None
        requests = native.action_requests(payload) if native_mint else None
        for index, action in enumerate(requests) if requests else ((0, None),):
            if end_type == RESUMED:
                word, source = _decided(stored, index, payload, response, i_id, derived)
            else:
                word, source = None, None
            if decision is not None and word != decision:
                continue
            append(AuditRecord(
                t_id, i_id, name, payload, minted_at, outcome, reason, end_actor, response,
                end_at, [] if tried is None else tried, word,
                action if requests else None, index if requests else None,
                requested_by, source, authenticated_by,
            ))
    # Stable: rows come in position order, so records minted at the same time keep it.
    records.sort(key=_MINTED_AT)
    return records
