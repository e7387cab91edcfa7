"""``create_app``: the approval service as an ASGI application (Starlette).

The store is synchronous: every store and gateway call runs in a worker thread, never
on the event loop, a bounded number at a time in arrival order (:mod:`.lanes`). The
synchronous store is the one a ``--graph`` module's graph and checkpointer work with (a
graph compiled with ``SqliteSaver``/``PostgresSaver`` is answered through
``gateway.answer``), and one store object then serves both the seed markers and the
gateways.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..db.backends import backend_of
from ..errors import DatabaseError, InvalidInputError
from . import api
from .approvals import Approvals
from .auth import Authenticator, Network, TokenAuth
from .inbox import audit_page, pages
from .lanes import Lanes, default_threads
from .limits import RateLimits
from .metrics import ServiceMetrics
from .paging import BadRequest
from .policy import Policy
from .sessions import DEFAULT_LIFETIME, Sessions
from .unavailable import is_unavailable, unavailable
from .web import Limiters, Problem, Service, app_path, principal

if TYPE_CHECKING:
    from ..agent_server_client import ServedGraphs
    from ..langgraph.gateway import InterruptGateway
    from ..store import InterruptStore

log = logging.getLogger("symfonic_store.server")

DEFAULT_BODY_LIMIT = 1_048_576
DEFAULT_RATE_LIMITS = RateLimits()

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class SecurityHeaders:
    """Adds the security headers to every response (no inline script, no framing)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope.get("path", "").startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() not in dict(SECURITY_HEADERS)]
                headers.extend(SECURITY_HEADERS)
                if not static and not any(h[0].lower() == b"cache-control" for h in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def _is_api(request: Request) -> bool:
    path = app_path(request)
    return path.startswith(b"/api/") or path in (b"/metrics", b"/healthz")


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    if _is_api(request):
        return JSONResponse({"error": exc.message, **exc.extra}, status_code=exc.status, headers=exc.headers)
    try:
        who = principal(request, session=True)
    except BadRequest:  # the request's identity headers are what was refused
        who = None
    titles = {400: "Bad request", 401: "Not signed in", 403: "Not allowed", 404: "Not found",
              405: "Not allowed here", 413: "Too large", 429: "Too many requests",
              503: "Not available right now"}
    response = pages.render(request, "error.html", who=who, status=exc.status,
                            title=titles.get(exc.status, "Error"), message=exc.message)
    response.headers.update(exc.headers)
    return response


async def _bad_request(request: Request, exc: Exception) -> Response:
    return await _problem(request, Problem(400, str(exc)))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return await _problem(request, Problem(exc.status_code, str(exc.detail), headers=dict(exc.headers or {})))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    # Starlette re-raises after this answer and uvicorn then drops the connection: say
    # so, or a keep-alive client sends its next request into a closing socket.
    return await _problem(request, Problem(
        500, f"unexpected {type(exc).__name__}: see the server log", headers={"Connection": "close"}
    ))


async def _database(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DatabaseError)
    if not is_unavailable(exc):  # a refused write: no retry helps, so not a 503
        return await _unexpected(request, exc)
    return await _problem(request, unavailable(exc))


def create_app(
    store: InterruptStore,
    *,
    graphs: Iterable[Any] = (),
    auth: Authenticator,
    policy: Policy | Mapping[str, Any] | None = None,
    session_secret: bytes | None = None,
    session_lifetime: float = DEFAULT_LIFETIME,
    rate_limits: RateLimits | None = DEFAULT_RATE_LIMITS,
    trusted_proxies: Iterable[Network] = (),
    secure_cookies: bool = False,
    poll_interval: float = 0.5,
    served: ServedGraphs | None = None,
    store_threads: int | None = None,
) -> Starlette:
    """The approval service on ``store``: the JSON API, the web inbox, health and metrics.

    Args:
        store: an :class:`~symfonic_store.InterruptStore` (migrated).
        graphs: compiled LangGraph graphs (or :class:`~symfonic_store.InterruptGateway`
            objects): a LangGraph interrupt is answered through the gateway of the graph
            whose ``name`` its mint recorded.
        auth: the one authentication mode: :class:`TokenAuth`, :class:`JwtAuth` or
            :class:`TrustedHeaderAuth`.
        policy: who may answer what (:class:`Policy`, or its JSON value); None: any
            authenticated principal. The store's ``approvers=`` applies after it.
        session_secret: signs the inbox's session cookies and CSRF tokens; random per
            process when None (sessions then end with the process, and replicas do not
            share them).
        session_lifetime: the longest a browser session lasts, in seconds.
        rate_limits: failed sign-ins per address and answers per principal, per minute;
            None for no limits.
        trusted_proxies: proxies whose ``X-Forwarded-For`` names the client address
            (for the per-address limit); the trusted-header mode has its own list.
        secure_cookies: mark cookies ``Secure`` even when the request came over plain
            HTTP (behind a proxy that terminates TLS).
        poll_interval: how often, in seconds, the event stream looks for new events.
        served: the Agent Server whose graphs' interrupts the service answers through
            ``langgraph-sdk`` (``--langgraph-url``, SPEC §13), or None.
        store_threads: reads of the store running at once, and answers running at once
            (one on SQLite), each in a worker thread on a pooled connection; further
            requests wait their turn on the event loop (:mod:`.lanes`). None: 2 on
            SQLite, 6 on PostgreSQL. Twice this should stay within the engine's pool
            (5 plus 10 overflow by default).

    Raises:
        InvalidInputError: a bad policy, two graphs of one name, or something that is
            not a graph.
    """
    from ..store import InterruptStore

    if not isinstance(store, InterruptStore):
        raise InvalidInputError(
            "store", f"must be an InterruptStore (the service calls it from worker threads), got {type(store).__name__}"
        )
    gateways: dict[str, InterruptGateway] = {}
    graphs = list(graphs)
    if graphs:
        from ..langgraph.gateway import InterruptGateway

        for graph in graphs:
            gate = graph if isinstance(graph, InterruptGateway) else InterruptGateway(graph, store)
            if gate.name in gateways:
                raise InvalidInputError(
                    "graphs", f"two graphs are named {gate.name!r}: a mint records the graph by "
                    "name, so each served graph needs its own (StateGraph(...).compile(name=...))"
                )
            gateways[gate.name] = gate
    rules = policy if isinstance(policy, Policy) or policy is None else Policy.from_dict(policy)
    limit = store.max_payload_bytes or DEFAULT_BODY_LIMIT
    svc = Service(
        approvals=Approvals(store, gateways=gateways, policy=rules, served=served,
                            principals=auth.principals if isinstance(auth, TokenAuth) else None),
        auth=auth,
        sessions=Sessions(session_secret or secrets.token_bytes(32), lifetime=session_lifetime),
        metrics=ServiceMetrics(store),
        limiters=Limiters.of(rate_limits),
        body_limit=limit,
        proxies=tuple(trusted_proxies) or tuple(getattr(auth, "proxies", ())),
        secure_cookies=secure_cookies,
        poll_interval=poll_interval,
        templates=pages.environment(),
        lanes=Lanes(
            threads=store_threads or default_threads(backend_of(store.engine)),
            one_writer=backend_of(store.engine).single_writer,
        ),
    )
    routes = [
        Route("/healthz", api.healthz, methods=["GET", "HEAD"]),
        Route("/metrics", api.metrics, methods=["GET"]),
        Route("/api/interrupts", api.list_interrupts, methods=["GET"]),
        Route("/api/interrupts/{rest:path}", api.interrupt_route, methods=["GET", "HEAD", "POST"]),
        Route("/api/audit", api.audit, methods=["GET"]),
        Route("/api/threads/{rest:path}", api.thread_events, methods=["GET"]),
        Route("/api/events", api.events, methods=["GET"]),
        Route("/api/events/stream", api.stream, methods=["GET"]),
        Route("/", pages.index, methods=["GET", "HEAD"]),
        Route("/signin", pages.sign_in_page, methods=["GET", "HEAD"]),
        Route("/signin", pages.sign_in, methods=["POST"]),
        Route("/signout", pages.sign_out, methods=["POST"]),
        Route("/interrupts/{rest:path}", pages.interrupt_page, methods=["GET", "HEAD", "POST"]),
        Route("/threads/{rest:path}", pages.thread_page, methods=["GET", "HEAD"]),
        Route("/audit", audit_page.audit_page, methods=["GET", "HEAD"]),
        Mount("/static", app=StaticFiles(directory=str(pages.STATIC)), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            Problem: _problem,
            BadRequest: _bad_request,
            HTTPException: _http_error,
            DatabaseError: _database,
            Exception: _unexpected,
        },
    )
    app.state.service = svc
    app.add_middleware(SecurityHeaders)
    return app
