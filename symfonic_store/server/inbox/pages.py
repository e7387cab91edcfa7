"""The inbox's pages: sign in and out, the open interrupts, one interrupt, a thread.

Every page is rendered by Jinja2 with autoescaping on: payloads are hostile input and
every string of them reaches the page as text. Forms carry the interrupt's digest and
a CSRF token; the session cookie is ``HttpOnly`` and ``SameSite=Strict``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ...errors import InvalidInputError
from ...event_types import spec_of
from .. import tenancy
from ..approvals import assignment_of
from ..auth import client_address
from ..limits import BodyTooLarge, read_body
from ..paging import BadRequest, page_limit
from ..principal import Principal
from ..sessions import NONCE_COOKIE, SESSION_COOKIE, Sessions
from ..web import Problem, Service, principal, query, raw_ids, service
from . import edits
from .visible_html import revealed, visible

HERE = Path(__file__).parent
STATIC = HERE / "static"
ANSWERS = ("approve", "reject", "answer", "edit")
REJECTED = "rejected in the approval inbox"
FORM_FIELDS = 200
INBOX_PAGE = 500
"""Open interrupts on one page of the inbox; a **Next page** link reads on from its last."""
"""The most fields a form may send (an edit form has one per argument of each tool call)."""


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["seg"] = segment
    env.filters["pretty"] = pretty
    env.filters["age"] = age
    env.filters["when"] = when
    env.filters["visible"] = visible
    env.filters["revealed"] = revealed
    return env


def segment(value: Any) -> str:
    """An id as one path segment: every ``/``, ``?``, ``#`` and ``%`` percent-encoded."""
    return quote(str(value), safe="")


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            rest = s % size
            small = {"d": ("h", 3600), "h": ("m", 60), "m": ("s", 1)}[unit]
            return f"{s // size}{unit} {rest // small[1]}{small[0]}" if rest >= small[1] else f"{s // size}{unit}"
    return f"{s}s"


def when(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "" if value is None else str(value)


# --- what the timeline says ------------------------------------------------------------


class _Data(dict[str, Any]):
    """An event's data for a summary template: a missing key reads ``None``."""

    def __missing__(self, key: str) -> None:
        return None


def describe(event: dict[str, Any]) -> dict[str, Any]:
    """One line of a timeline: when, who, what, and the details (as its type declares)."""
    data = event.get("data") or {}
    kind = event["type"]
    actor = event.get("actor")
    detail: Any = None
    spec = spec_of(kind)
    if spec is None:
        what, tone = kind, "route"
    elif spec.describe is not None:
        what, tone = spec.describe(data)
    else:
        what, tone = (spec.summary.format_map(_Data(data)) if spec.summary else kind), spec.label
    for key in spec.detail if spec is not None else ():
        detail = data.get(key)
        if detail:
            break
    return {
        "at": event.get("occurred_at"),
        "who": actor,
        "what": what,
        "tone": tone,
        "type": kind,
        "interrupt_id": event.get("interrupt_id"),
        "detail": detail,
        "position": event.get("position"),
    }


# --- rendering -------------------------------------------------------------------------


def _nonce(request: Request) -> tuple[str, bool]:
    value = request.cookies.get(NONCE_COOKIE)
    if value and 20 <= len(value) <= 100:
        return value, False
    return Sessions.new_nonce(), True


def _cookie(response: Response, request: Request, name: str, value: str, max_age: int | None) -> None:
    svc = service(request)
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=str(request.scope.get("root_path") or "") + "/",
        httponly=True,
        samesite="strict",
        secure=svc.secure_cookies or request.url.scheme == "https",
    )


def render(
    request: Request,
    template: str,
    *,
    who: Principal | None,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    svc = service(request)
    nonce, fresh = _nonce(request)
    root = str(request.scope.get("root_path") or "")
    page = svc.templates.get_template(template).render(
        who=who,
        root=root,
        csrf=svc.sessions.csrf_token(nonce, None if who is None else who.name),
        sign_out=who is not None and svc.auth.form_sign_in,
        **context,
    )
    response = HTMLResponse(page, status_code=status)
    if fresh:
        _cookie(response, request, NONCE_COOKIE, nonce, None)
    return response


def redirect(request: Request, path: str) -> RedirectResponse:
    """303 to ``path`` under the app's root path (a POST's answer: the next GET)."""
    return RedirectResponse(str(request.scope.get("root_path") or "") + path, status_code=303)


def _signed_in(request: Request) -> Principal | None:
    return principal(request, session=True)


def signed_in_or_refused(request: Request) -> Principal | Response:
    who = _signed_in(request)
    if who is not None:
        return who
    svc = service(request)
    if svc.auth.form_sign_in:
        return redirect(request, "/signin")
    return render(
        request, "error.html", who=None, status=401,
        title="Not signed in",
        message="This inbox trusts the authenticating proxy in front of it to say who you are, "
        "and this request did not come through it.",
    )


async def _form(request: Request) -> dict[str, str]:
    svc = service(request)
    try:
        body = await read_body(request, svc.body_limit)
    except BodyTooLarge as exc:
        raise Problem(413, str(exc)) from None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise Problem(400, "the form could not be read") from None
    return dict(pairs)


def _csrf(request: Request, form: dict[str, str], who: Principal | None) -> None:
    svc = service(request)
    if not svc.sessions.csrf_ok(request.cookies.get(NONCE_COOKIE), None if who is None else who.name, form.get("csrf")):
        raise Problem(403, "the form's CSRF token is missing or stale: reload the page and try again")


# --- pages -----------------------------------------------------------------------------


async def index(request: Request) -> Response:
    who = signed_in_or_refused(request)
    if isinstance(who, Response):
        return who
    svc = service(request)
    # The stream's starting point first, then the page: an event in between is after
    # the cursor, so it refreshes the page instead of being missed.
    after = await svc.lanes.run(svc.metrics.tail.catch_up, 0.5)
    assigned_to = query(request, "assigned_to")  # a principal or role:<name> (SPEC §17)
    try:  # ?after=: a page's cursor, the API's and list_pending()'s alike (SPEC §17)
        limit = page_limit(query(request, "limit"), default=INBOX_PAGE)
        page = await svc.lanes.run(svc.approvals.inbox, limit=limit, after=query(request, "after"),
                                   scope=who.scope, assigned_to=assigned_to)
    except (BadRequest, InvalidInputError) as exc:
        return render(request, "error.html", who=who, status=400, title="Not a page of the inbox", message=str(exc))
    # Escalated interrupts first, marked (SPEC §14); the API's order stays oldest first.
    items = await svc.lanes.run(svc.approvals.escalated_first, page["items"])
    kept = {} if query(request, "limit") is None else {"limit": str(limit)}
    if assigned_to is not None:
        kept["assigned_to"] = assigned_to
    next_url = None if page["next"] is None else "?" + urlencode({**kept, "after": page["next"]})
    return render(request, "inbox.html", who=who, title="Inbox", items=items,
                  more=page["next"] is not None, next_url=next_url, after=after,
                  assigned_to=assigned_to)


async def sign_in_page(request: Request) -> Response:
    svc = service(request)
    if not svc.auth.form_sign_in:
        return redirect(request, "/")
    return render(request, "signin.html", who=None, title="Sign in", error=None,
                  mode=svc.auth.mode)


async def sign_in(request: Request) -> Response:
    svc = service(request)
    if not svc.auth.form_sign_in:
        raise Problem(404, "this server has no sign-in form: its proxy signs people in")
    address = client_address(request, svc.proxies)
    if svc.limiters is not None:
        wait = svc.limiters.sign_in.retry_after(address)
        if wait is not None:
            response = render(
                request, "signin.html", who=None, status=429, title="Sign in", mode=svc.auth.mode,
                error=f"Too many failed sign-ins from this address; try again in {wait} s.",
            )
            response.headers["Retry-After"] = str(wait)
            return response
    form = await _form(request)
    _csrf(request, form, None)
    signed = svc.auth.sign_in(form.get("token", ""))
    if signed is None:
        if svc.limiters is not None:
            svc.limiters.sign_in.hit(address)
        return render(request, "signin.html", who=None, status=401, title="Sign in", mode=svc.auth.mode,
                      error="That token was not accepted.")
    value, max_age = svc.sessions.issue(signed)
    signed_in = redirect(request, "/")
    _cookie(signed_in, request, SESSION_COOKIE, value, max_age)
    return signed_in


async def sign_out(request: Request) -> Response:
    who = _signed_in(request)
    form = await _form(request)
    _csrf(request, form, who)
    response = redirect(request, "/signin")
    root = str(request.scope.get("root_path") or "")
    response.delete_cookie(SESSION_COOKIE, path=root + "/", httponly=True, samesite="strict")
    return response


async def interrupt_page(request: Request) -> Response:
    ids = raw_ids(request, ("interrupts",))
    if len(ids) == 3 and ids[2] == "answer" and request.method == "POST":
        return await _answer(request, ids[0], ids[1])
    if len(ids) == 3 and ids[2] == "assign" and request.method == "POST":
        return await _assign(request, ids[0], ids[1])
    if len(ids) != 2 or request.method not in ("GET", "HEAD"):
        raise Problem(404, "not found")
    who = signed_in_or_refused(request)
    if isinstance(who, Response):
        return who
    return await _show(request, who, ids[0], ids[1])


async def _show(
    request: Request,
    who: Principal,
    thread_id: str,
    interrupt_id: str,
    *,
    status: int = 200,
    error: str | None = None,
    draft: str | None = None,
    edited: dict[str, str] | None = None,
) -> Response:
    svc = service(request)
    after = await svc.lanes.run(svc.metrics.tail.catch_up, 0.5)
    view = await svc.lanes.run(svc.approvals.interrupt, thread_id, interrupt_id, who)
    if view is None:
        return render(request, "error.html", who=who, status=404, title="Unknown interrupt",
                      message=f"There is no interrupt {interrupt_id!r} on thread {thread_id!r}.")
    waiting = []
    if view["status"] != "pending":
        opened = await svc.lanes.run(svc.store.open_interrupts, thread_id)
        # another tenant's, on the same thread, stays unseen
        waiting = await svc.lanes.run(tenancy.visible_open, svc.store, who, thread_id, opened)
    # Asked of the rules that refuse an answer or an assignment, so the page never offers
    # a button whose click would only be refused and recorded. Looking writes nothing.
    forbidden = unassignable = None
    if view["status"] == "pending":
        forbidden = svc.approvals.refusal(
            who, view.get("name"), view.get("requested_by"), escalated=view.get("escalated_to") is not None
        ) or svc.approvals.assigned_refusal(who, view.get("assigned_to"))
        unassignable = svc.approvals.assign_refusal(
            who, view.get("name"), view.get("requested_by"), assignment_of(view.get("assigned_to")))
    return render(
        request, "interrupt.html", who=who, status=status, title=view.get("name") or "Interrupt",
        iv=view, timeline=[describe(e) for e in view["events"]], error=error,
        done=request.query_params.get("done") == "1" and error is None,
        draft=draft if draft is not None else "", waiting=waiting, after=after,
        forbidden=forbidden, unassignable=unassignable, edit=edits.edit_form(view.get("payload")), edited=edited or {},
    )


async def _posted(request: Request) -> tuple[Service, Principal, dict[str, str]]:
    """A form posted by a signed-in person, its CSRF token checked (401 / 403 otherwise)."""
    who = _signed_in(request)
    if who is None:
        raise Problem(401, "sign in first")
    form = await _form(request)
    _csrf(request, form, who)
    return service(request), who, form


async def _answer(request: Request, thread_id: str, interrupt_id: str) -> Response:
    svc, who, form = await _posted(request)
    if svc.limiters is not None:
        wait = svc.limiters.answers.hit(who.name)
        if wait is not None:
            svc.metrics.answered(429)
            return await _show(request, who, thread_id, interrupt_id, status=429,
                               error=f"Too many answers: try again in {wait} s.")
    kind = form.get("decision", "")
    if kind not in ANSWERS:
        raise Problem(400, "decision: must be approve, reject or answer")
    if kind == "answer":
        text = form.get("response", "")
        try:
            response = json.loads(text) if text.strip() else None
        except (ValueError, RecursionError):
            return await _show(request, who, thread_id, interrupt_id, status=400, draft=text,
                               error="The answer is not JSON (a string needs quotes: \"yes\").")
    elif kind == "edit":
        record = await svc.lanes.run(_record, svc, thread_id, interrupt_id)
        try:
            response = edits.edit_answer((record or {}).get("payload"), form, reject_message=REJECTED)
        except edits.BadEdit as exc:
            return await _show(request, who, thread_id, interrupt_id, status=400, error=str(exc),
                               edited=edits.drafts(form))
    else:
        response = await svc.lanes.run(svc.approvals.decision, thread_id, interrupt_id, kind == "approve")
    result = await svc.lanes.write(
        svc.approvals.answer, who, thread_id, interrupt_id, response, form.get("digest", "")
    )
    svc.metrics.answered(result.status)
    if result.status == 200:
        return redirect(request, f"/interrupts/{segment(thread_id)}/{segment(interrupt_id)}?done=1")
    return await _show(request, who, thread_id, interrupt_id, status=result.status,
                       error=str(result.body.get("error")),
                       draft=form.get("response") if kind == "answer" else None,
                       edited=edits.drafts(form) if kind == "edit" else None)


async def _assign(request: Request, thread_id: str, interrupt_id: str) -> Response:
    """The inbox's assignment form (SPEC §15): a principal or ``role:<name>`` (trimmed, as
    the API's, by the store's rule); it counts against the answers' rate limit."""
    svc, who, form = await _posted(request)
    if svc.limiters is not None:
        wait = svc.limiters.answers.hit(who.name)
        if wait is not None:
            return await _show(request, who, thread_id, interrupt_id, status=429,
                               error=f"Too many answers and assignments: try again in {wait} s.")
    result = await svc.lanes.write(svc.approvals.assign, who, thread_id, interrupt_id, form.get("to", ""))
    if result.status == 200:
        return redirect(request, f"/interrupts/{segment(thread_id)}/{segment(interrupt_id)}")
    return await _show(request, who, thread_id, interrupt_id, status=result.status,
                       error=str(result.body.get("error")))


def _record(svc: Service, thread_id: str, interrupt_id: str) -> dict[str, Any] | None:
    """The interrupt's mint, or None for an id no interrupt can have."""
    try:
        found: dict[str, Any] | None = svc.store.interrupt_record(thread_id, interrupt_id)
    except InvalidInputError:
        return None
    return found


async def thread_page(request: Request) -> Response:
    ids = raw_ids(request, ("threads",))
    if len(ids) != 1:
        raise Problem(404, "not found")
    who = signed_in_or_refused(request)
    if isinstance(who, Response):
        return who
    svc = service(request)
    thread_id = ids[0]

    def load() -> list[dict[str, Any]]:
        try:
            history = svc.store.history(thread_id)
            return [e.as_dict() for e in svc.approvals.visible_events(who, history)]
        except InvalidInputError:
            return []  # an id no thread can have

    after = await svc.lanes.run(svc.metrics.tail.catch_up, 0.5)
    history = await svc.lanes.run(load)
    if not history:
        return render(request, "error.html", who=who, status=404, title="Unknown thread",
                      message=f"Thread {thread_id!r} has no events.")
    shown = {e["interrupt_id"] for e in history}
    opened = {
        o["interrupt_id"] for o in await svc.lanes.run(svc.store.open_interrupts, thread_id)
    } & shown
    return render(request, "thread.html", who=who, title=f"Thread {thread_id}", thread_id=thread_id,
                  timeline=[describe(e) for e in history], opened=opened, after=after)
