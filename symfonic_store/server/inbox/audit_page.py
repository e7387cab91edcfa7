"""The audit page beside the inbox: the §3 audit records, filtered and paged.

It reads what ``GET /api/audit`` reads, with the same filters (thread, actor, decision,
since, until), the same order and the same cursors, and it is signed in like the inbox.
Every value is rendered by the autoescaping templates: payloads and answers are text.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidInputError
from .. import tenancy
from ..paging import BadRequest, page_limit
from ..web import query, service
from .pages import render, signed_in_or_refused

FILTERS = ("thread", "actor", "decision", "since", "until")
DEFAULT_PAGE = 100


async def audit_page(request: Request) -> Response:
    who = signed_in_or_refused(request)
    if isinstance(who, Response):
        return who
    svc = service(request)
    chosen = {name: query(request, name) for name in FILTERS}
    try:
        limit = page_limit(query(request, "limit"), default=DEFAULT_PAGE)
        records = await svc.lanes.run(
            svc.store.audit,
            thread_id=chosen["thread"],
            actor=chosen["actor"],
            since=chosen["since"],
            until=chosen["until"],
            decision=chosen["decision"],
            tenants=who.scope,
            limit=limit + 1,
            after=query(request, "after"),
        )
        shown, cursor = tenancy.audit_page(records, limit=limit)
    except (BadRequest, InvalidInputError) as exc:
        return render(request, "audit.html", who=who, status=400, title="Audit", filters=chosen,
                      rows=[], next_url=None, error=str(exc), paged=False)
    kept = {k: v for k, v in chosen.items() if v is not None}
    if query(request, "limit") is not None:
        kept["limit"] = str(limit)
    next_url = None if cursor is None else "?" + urlencode({**kept, "after": cursor})
    rows = [{"record": r, "requested_by": r.requested_by} for r in shown]
    return render(request, "audit.html", who=who, title="Audit", filters=chosen, rows=rows,
                  next_url=next_url, error=None, paged=query(request, "after") is not None)
