"""The JSON API (SPEC §9): the inbox, one interrupt, answers, the audit, the log and its
Server-Sent Events tail, ``/healthz`` and ``/metrics``.

Errors are ``{"error": "<message>"}``. Ids in paths are percent-encoded and read from
the raw path (:func:`~symfonic_store.server.web.raw_ids`), so any thread id works. Reads
accept the browser session too (the inbox's live updates use it); an answer needs the
request's own credentials -- a bearer token, a JWT or the trusted header -- so a page
on another site can never make a browser answer through the API.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .. import validation
from ..errors import DatabaseError, InvalidInputError
from ..services.audit import audit_csv
from . import tenancy
from .limits import BodyTooLarge, read_body
from .paging import BadRequest, page_limit
from .principal import Principal
from .unavailable import RETRY_AFTER_SECONDS, is_unavailable, unavailable
from .web import Problem, principal, query, raw_ids, service

BODY_KEYS = {"response", "digest"}
STREAM_PAGE = 500
HEARTBEAT_SECONDS = 15.0
RECHECK_SECONDS = 30.0
HEALTH_THREAD = "symfonic-store/healthz"

log = logging.getLogger("symfonic_store.server")


def _unauthorized(request: Request) -> Problem:
    svc = service(request)
    if svc.auth.mode == "header":
        hint = "this server trusts only its authenticating proxy to say who you are"
    else:
        hint = "send Authorization: Bearer <token>"
    return Problem(
        401,
        f"authentication required: {hint}",
        headers={"WWW-Authenticate": 'Bearer realm="symfonic-store"'} if svc.auth.mode != "header" else {},
    )


def require(request: Request, *, session: bool) -> Principal:
    """The request's principal, or a 401 problem (nothing is read or written for it)."""
    found = principal(request, session=session)
    if found is None:
        raise _unauthorized(request)
    return found


def _bad(exc: Exception) -> Problem:
    return Problem(400, str(exc))


def _seconds(request: Request, name: str) -> float | None:
    text = query(request, name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise Problem(400, f"{name}: must be a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise Problem(400, f"{name}: must be a finite number of seconds >= 0")
    return value


def _position(text: str | None, name: str) -> int:
    if text is None:
        return 0
    if not text.isdigit() or int(text) > validation.MAX_SQL_INT:
        raise Problem(400, f"{name}: must be an event position (a whole number >= 0)")
    return int(text)


# --- the inbox -------------------------------------------------------------------------


async def list_interrupts(request: Request) -> Response:
    who = require(request, session=True)
    svc = service(request)
    try:
        page = await svc.lanes.run(
            svc.approvals.inbox,
            thread=query(request, "thread"),
            name=query(request, "name"),
            older_than=_seconds(request, "older_than"),
            limit=page_limit(query(request, "limit")),
            after=query(request, "after"),
            scope=who.scope,
            assigned_to=query(request, "assigned_to"),
        )
    except (BadRequest, InvalidInputError) as exc:
        raise _bad(exc) from None
    return JSONResponse(page)


async def interrupt_route(request: Request) -> Response:
    ids = raw_ids(request, ("api", "interrupts"))
    if len(ids) == 2 and request.method in ("GET", "HEAD"):
        return await _show(request, ids[0], ids[1])
    if len(ids) == 3 and ids[2] == "answer":
        if request.method != "POST":
            raise Problem(405, "answer with POST", headers={"Allow": "POST"})
        return await _answer(request, ids[0], ids[1])
    if len(ids) == 3 and ids[2] == "assign":
        if request.method != "POST":
            raise Problem(405, "assign with POST", headers={"Allow": "POST"})
        return await _assign(request, ids[0], ids[1])
    if len(ids) == 2:
        raise Problem(405, "an interrupt is read with GET", headers={"Allow": "GET"})
    raise Problem(404, "not found: /api/interrupts/{thread_id}/{interrupt_id}[/answer|/assign]")


async def _assign(request: Request, thread_id: str, interrupt_id: str) -> Response:
    """``POST .../assign {"to": "bob" | "role:finance"}`` (SPEC §15)."""
    svc = service(request)
    who = require(request, session=False)
    if svc.limiters is not None:  # an assignment counts against the answers' limit
        wait = svc.limiters.answers.hit(who.name)
        if wait is not None:
            raise Problem(
                429,
                f"too many answers and assignments from {who.name!r}: at most "
                f"{svc.limiters.answers.limit} a minute; try again in {wait} s (nothing was written)",
                headers={"Retry-After": str(wait)},
            )
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise Problem(415, "send the assignment as Content-Type: application/json")
    try:
        raw = await read_body(request, svc.body_limit)
    except BodyTooLarge as exc:
        raise Problem(413, f"{exc}: the store's payload limit") from None
    body = parse_json(raw)
    if not isinstance(body, dict) or set(body) != {"to"}:
        raise Problem(400, 'the body must be {"to": "<principal>"} or {"to": "role:<name>"}')
    result = await svc.lanes.write(svc.approvals.assign, who, thread_id, interrupt_id, body["to"])
    return JSONResponse(result.body, status_code=result.status)


async def _show(request: Request, thread_id: str, interrupt_id: str) -> Response:
    who = require(request, session=True)
    svc = service(request)
    view = await svc.lanes.run(svc.approvals.interrupt, thread_id, interrupt_id, who)
    if view is None:
        raise Problem(404, f"interrupt {interrupt_id!r} on thread {thread_id!r} is unknown")
    return JSONResponse(view)


def parse_json(body: bytes) -> Any:
    """Strict JSON (no NaN or Infinity), as a 400 problem when it is not."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    try:
        return json.loads(body.decode("utf-8"), parse_constant=no_constant)
    except UnicodeDecodeError:
        raise Problem(400, "the body is not UTF-8") from None
    except RecursionError:
        raise Problem(400, "the body is nested too deeply") from None
    except ValueError as exc:
        raise Problem(400, f"the body is not JSON ({exc})") from None


async def _answer(request: Request, thread_id: str, interrupt_id: str) -> Response:
    svc = service(request)
    who = require(request, session=False)
    if svc.limiters is not None:
        wait = svc.limiters.answers.hit(who.name)
        if wait is not None:
            svc.metrics.answered(429)
            raise Problem(
                429,
                f"too many answers from {who.name!r}: at most {svc.limiters.answers.limit} a "
                f"minute; try again in {wait} s",
                headers={"Retry-After": str(wait)},
            )
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        # A page on another site can POST text/plain or a form without asking; JSON it
        # cannot send without a CORS preflight, which this API never grants. Behind a
        # proxy that adds the identity header to every request, that is what keeps a
        # forged cross-site POST from answering.
        raise Problem(415, "send the answer as Content-Type: application/json")
    try:
        raw = await read_body(request, svc.body_limit)
    except BodyTooLarge as exc:
        svc.metrics.answered(413)
        raise Problem(413, f"{exc}: the store's payload limit") from None
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise Problem(400, 'the body must be a JSON object {"response": ..., "digest": "..."}')
    if "actor" in body:
        raise Problem(
            400,
            "the body names an actor: the actor recorded is always the authenticated "
            f"principal ({who.name!r}); remove 'actor'",
        )
    unknown = set(body) - BODY_KEYS
    if unknown:
        raise Problem(400, f"unknown key(s) in the body: {', '.join(sorted(map(repr, unknown)))}; "
                      "send {\"response\": ..., \"digest\": \"...\"}")
    digest = body.get("digest")
    if not isinstance(digest, str) or not digest:
        raise Problem(400, "digest: required -- the digest of the interrupt as it was shown "
                      "(GET /api/interrupts lists it)")
    result = await svc.lanes.write(
        svc.approvals.answer, who, thread_id, interrupt_id, body.get("response"), digest
    )
    svc.metrics.answered(result.status)
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if result.status == 503 else None
    return JSONResponse(result.body, status_code=result.status, headers=headers)


# --- the audit, a thread, the log ---------------------------------------------------


async def audit(request: Request) -> Response:
    who = require(request, session=True)
    svc = service(request)
    output = query(request, "format") or "json"
    if output not in ("json", "csv"):
        raise Problem(400, "format: must be json or csv")
    try:
        limit = page_limit(query(request, "limit"), default=100)
        records = await svc.lanes.run(
            svc.store.audit,
            thread_id=query(request, "thread"),
            actor=query(request, "actor"),
            since=query(request, "since"),
            until=query(request, "until"),
            decision=query(request, "decision"),
            tenants=who.scope,
            limit=limit + 1,
            after=query(request, "after"),
        )
        page, cursor = tenancy.audit_page(records, limit=limit)
    except (BadRequest, InvalidInputError) as exc:
        raise _bad(exc) from None
    if output == "csv":
        headers = {"X-Next-Cursor": cursor} if cursor else {}
        return Response(audit_csv(page), media_type="text/csv; charset=utf-8", headers=headers)
    return JSONResponse({"items": [r.as_dict() for r in page], "next": cursor})


async def thread_events(request: Request) -> Response:
    ids = raw_ids(request, ("api", "threads"))
    if len(ids) != 2 or ids[1] != "events":
        raise Problem(404, "not found: /api/threads/{thread_id}/events")
    who = require(request, session=True)
    svc = service(request)
    store = svc.store

    def replay() -> list[dict[str, Any]]:
        steps = tenancy.visible_steps(store, who, list(store.replay(ids[0])))
        return [{"event": e.as_dict(), "state": s} for e, s in steps]

    try:
        steps = await svc.lanes.run(replay)
    except InvalidInputError:
        steps = []
    if not steps:
        raise Problem(404, f"thread {ids[0]!r} has no events")
    return JSONResponse(steps)


async def events(request: Request) -> Response:
    who = require(request, session=True)
    after = _position(query(request, "after"), "after")
    limit = page_limit(query(request, "limit"), default=100)
    svc = service(request)
    page = await svc.lanes.run(svc.store.events, after=after, limit=limit)
    shown = await svc.lanes.run(svc.approvals.visible_events, who, page)
    # ``next`` is the last position read, shown or not: the reader's cursor moves past
    # the events it may not see (SPEC §15).
    return JSONResponse(
        {"items": [e.as_dict() for e in shown], "next": page[-1].position if page else after}
    )


async def stream(request: Request) -> Response:
    """The log as Server-Sent Events, from ``Last-Event-ID`` (when sent) or ``after``.

    The first page is read before the response starts, so a database that cannot answer
    gets its 503 (SPEC §12). When it goes away later, the stream ends -- the response
    finishes cleanly -- and the client reconnects with ``Last-Event-ID``, from where it was.
    """
    who = require(request, session=True)
    svc = service(request)
    resumed = request.headers.get("last-event-id")
    start = _position(resumed.strip() if resumed else query(request, "after"),
                      "Last-Event-ID" if resumed else "after")
    first = await svc.lanes.run(svc.store.events, after=start, limit=STREAM_PAGE)

    async def tail() -> AsyncIterator[str]:
        reader = who
        cursor, page = start, first
        quiet_since = checked = time.monotonic()
        yield "retry: 2000\n\n"
        while True:
            if page:
                # Asked again before each page it shows: a principal's tenants changed
                # in the tokens file apply to an open stream too; revoked, it ends.
                current = principal(request, session=True)
                if current is None:
                    return
                reader = current
            shown = await svc.lanes.run(svc.approvals.visible_events, reader, page)
            for event in shown:
                data = json.dumps(event.as_dict(), ensure_ascii=False, separators=(",", ":"))
                yield f"id: {event.position}\ndata: {data}\n\n"
            if page:
                # The store's cursor (I11): the last event seen, whatever order it reads in.
                cursor = page[-1].position
                quiet_since = time.monotonic()
            if len(page) < STREAM_PAGE:
                now = time.monotonic()
                if now - checked > RECHECK_SECONDS:
                    # A revoked token or an ended session ends the stream too.
                    if principal(request, session=True) is None:
                        return
                    checked = now
                if now - quiet_since > HEARTBEAT_SECONDS:
                    yield ": still here\n\n"
                    quiet_since = now
                await asyncio.sleep(svc.poll_interval)
            try:
                page = await svc.lanes.run(svc.store.events, after=cursor, limit=STREAM_PAGE)
            except DatabaseError as exc:
                if not is_unavailable(exc):
                    raise
                log.warning("an event stream ended at position %d: the database is not "
                            "available (%s)", cursor, exc)
                return

    return StreamingResponse(
        tail(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


# --- health and metrics ------------------------------------------------------------------


async def healthz(request: Request) -> Response:
    svc = service(request)
    store = svc.store

    def ping() -> None:
        # One projection row read: the database answers and the schema is the release's.
        store.pending(HEALTH_THREAD)

    try:
        await svc.lanes.run(ping)
    except DatabaseError as exc:
        # Readiness, not liveness: this process is fine, its database is not. A balancer
        # sends the request elsewhere; restarting the process would not bring it back.
        problem = unavailable(exc)
        return JSONResponse({"ok": False, "error": "the store is not available"}, status_code=503,
                            headers=problem.headers)
    except Exception as exc:  # the schema is not migrated, or newer than this release
        # Unauthenticated: the details go to the log, not to whoever asks.
        log.error("health check failed: %s", exc)
        return JSONResponse({"ok": False, "error": "the store is not available"}, status_code=503)
    return JSONResponse({"ok": True})


async def metrics(request: Request) -> Response:
    who = require(request, session=True)
    svc = service(request)
    text = await svc.lanes.run(svc.metrics.render, who.scope)
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")
