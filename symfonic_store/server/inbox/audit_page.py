"""The audit page beside the inbox: the §3 audit records, filtered and paged.

It reads what ``GET /api/audit`` reads, with the same filters (thread, actor, decision,
since, until), the same order and the same cursors, and it is signed in like the inbox.
Every value is rendered by the autoescaping templates: payloads and answers are text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidInputError
from ...services.audit import AuditRecord
from ..approvals import BadRequest, decode_cursor, encode_cursor, page_limit
from ..web import query, service
from .pages import _need, render

FILTERS = ("thread", "actor", "decision", "since", "until")
DEFAULT_PAGE = 100


def audit_key(record: AuditRecord) -> list[Any]:
    """A record's place in the audit's order; a cursor is the last shown record's key
    (the API's: a cursor from ``/api/audit`` pages this list too)."""
    return [record.minted_at.isoformat(), record.thread_id, record.interrupt_id,
            -1 if record.action_index is None else record.action_index]


def with_decision(records: Iterable[AuditRecord], decision: str | None) -> list[AuditRecord]:
    """The records whose reported decision is exactly ``decision`` (all when None)."""
    # lead: switch to store.audit(decision=...)
    if decision is None:
        return list(records)
    return [r for r in records if r.decision == decision]


def requested_by(record: AuditRecord) -> str | None:
    """Who asked (the mint's actor)."""
    # lead: switch to record.requested_by
    value = getattr(record, "requested_by", None)
    return None if value is None else str(value)


def page_of(
    records: Sequence[AuditRecord], *, after: str | None, limit: int
) -> tuple[list[AuditRecord], str | None]:
    """One page of ``records`` after the cursor ``after``, and the next page's cursor.

    Raises:
        BadRequest: ``after`` is not a cursor of this list.
    """
    keyed = sorted(((audit_key(r), r) for r in records), key=lambda pair: tuple(pair[0]))
    if after is not None:
        bound = tuple(decode_cursor(after, 4))
        keyed = [(k, r) for k, r in keyed if tuple(k) > bound]
    shown = keyed[:limit]
    return [r for _, r in shown], encode_cursor(shown[-1][0]) if len(keyed) > limit else None


async def audit_page(request: Request) -> Response:
    who = _need(request)
    if isinstance(who, Response):
        return who
    svc = service(request)
    chosen = {name: query(request, name) for name in FILTERS}
    try:
        limit = page_limit(query(request, "limit"), default=DEFAULT_PAGE)
        records = await run_in_threadpool(
            svc.store.audit,
            thread_id=chosen["thread"],
            actor=chosen["actor"],
            since=chosen["since"],
            until=chosen["until"],
        )
        records = with_decision(records, chosen["decision"])
        shown, cursor = page_of(records, after=query(request, "after"), limit=limit)
    except (BadRequest, InvalidInputError) as exc:
        return render(request, "audit.html", who=who, status=400, title="Audit", filters=chosen,
                      rows=[], next_url=None, error=str(exc), paged=False)
    kept = {k: v for k, v in chosen.items() if v is not None}
    if query(request, "limit") is not None:
        kept["limit"] = str(limit)
    next_url = None if cursor is None else "?" + urlencode({**kept, "after": cursor})
    rows = [{"record": r, "requested_by": requested_by(r)} for r in shown]
    return render(request, "audit.html", who=who, title="Audit", filters=chosen, rows=rows,
                  next_url=next_url, error=None, paged=query(request, "after") is not None)
