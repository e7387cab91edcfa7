"""The audit: one record per interrupt -- who asked, who answered what, and when."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection

from ..db.statements import audit_attempts_query, audit_query
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


def _minted_at(marker: dict[str, Any], recorded: datetime) -> datetime:
    minted_at = marker.get("minted_at")
    if isinstance(minted_at, int | float) and not isinstance(minted_at, bool):
        try:
            return datetime.fromtimestamp(minted_at, UTC)
        except (OverflowError, OSError, ValueError):
            return recorded
    return recorded


def audit(
    conn: Connection,
    *,
    thread_id: str | None,
    actor: str | None,
    since: datetime | None,
    until: datetime | None,
) -> list[AuditRecord]:
    # One more statement for every record's refused answers, grouped here: a query per
    # record would cost a round trip per interrupt (bench/audit.py: 10,000 of them).
    attempts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t_id, i_id, a_actor, a_data, a_at in conn.execute(
        audit_attempts_query(thread_id=thread_id, actor=actor)
    ):
        attempts.setdefault((t_id, i_id), []).append(
            {"actor": a_actor, "why": a_data.get("why"), "error": a_data.get("error"), "at": a_at}
        )
    records: list[tuple[datetime, int, AuditRecord]] = []
    for row in conn.execute(audit_query(thread_id=thread_id, actor=actor)):
        (position, t_id, i_id, marker, recorded, end_type, end_actor, end_data, end_at) = row
        minted_at = _minted_at(marker, recorded)
        if since is not None and minted_at < since:
            continue
        if until is not None and minted_at > until:
            continue
        if end_type is None:
            outcome, reason, response = "pending", None, None
        elif end_type == RESUMED:
            outcome, reason, response = "resumed", None, end_data.get("response")
        else:
            outcome, reason, response = "expired", end_data.get("reason"), None
        record = AuditRecord(
            thread_id=t_id,
            interrupt_id=i_id,
            name=marker.get("name"),
            payload=marker.get("payload"),
            minted_at=minted_at,
            outcome=outcome,
            reason=reason,
            actor=end_actor,
            response=response,
            resolved_at=end_at,
            attempts=attempts.get((t_id, i_id), []),
        )
        records.append((minted_at, position, record))
    records.sort(key=lambda item: (item[0], item[1]))
    return [record for _, _, record in records]
