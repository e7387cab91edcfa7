"""HTTP plumbing the API and the inbox share: the service's parts, problems, raw path ids,
and the principal of a request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.requests import HTTPConnection, Request

from .approvals import Approvals
from .auth import Authenticator, Network
from .lanes import Lanes
from .limits import RateLimits, SlidingWindow
from .metrics import ServiceMetrics
from .principal import AUTHENTICATED_BY, Principal
from .sessions import SESSION_COOKIE, Sessions


class Problem(Exception):
    """An HTTP error: the API answers ``{"error": message, **extra}``, the inbox a page."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.message = message
        self.extra = extra or {}
        self.headers = headers or {}
        super().__init__(message)


@dataclass
class Limiters:
    """The rate limits in force (None when ``--rate-limit off``)."""

    sign_in: SlidingWindow
    answers: SlidingWindow

    @classmethod
    def of(cls, limits: RateLimits | None) -> Limiters | None:
        if limits is None:
            return None
        return cls(SlidingWindow(limits.sign_in_failures), SlidingWindow(limits.answers))


@dataclass
class Service:
    """Everything a request handler needs, kept on ``app.state.service``."""

    approvals: Approvals
    auth: Authenticator
    sessions: Sessions
    metrics: ServiceMetrics
    limiters: Limiters | None
    body_limit: int
    proxies: Sequence[Network] = ()
    secure_cookies: bool = False
    poll_interval: float = 0.5
    templates: Any = field(default=None)
    lanes: Lanes = field(default_factory=Lanes)
    """The worker threads the store's calls run in (:mod:`.lanes`)."""

    @property
    def store(self) -> Any:
        return self.approvals.store


def service(conn: HTTPConnection) -> Service:
    svc: Service = conn.app.state.service
    return svc


def principal(conn: HTTPConnection, *, session: bool) -> Principal | None:
    """The request's principal: its own credentials (a bearer token, a JWT, the trusted
    header), else -- where ``session`` -- the browser session's. Credentials that were
    sent but fail never fall back to the session."""
    svc = service(conn)
    found = svc.auth.from_request(conn)
    if found is None and not (
        svc.auth.credentials_sent(conn) or not session or not svc.auth.form_sign_in
    ):
        opened = svc.sessions.read(conn.cookies.get(SESSION_COOKIE))
        if opened is not None:
            found = svc.auth.from_session(
                opened.name, opened.roles, opened.binding, tenants=opened.tenants
            )
    if found is None:
        return None
    # A session was opened with this mode's credentials: the same mode established it.
    return replace(found, authenticated_by=AUTHENTICATED_BY.get(svc.auth.mode))


def app_path(conn: HTTPConnection) -> bytes:
    """The request path as sent (still percent-encoded), below the app's root path."""
    raw: bytes = conn.scope.get("raw_path") or conn.scope["path"].encode("utf-8")
    raw = raw.split(b"?", 1)[0]
    root = str(conn.scope.get("root_path") or "").encode("utf-8")
    if root and raw.startswith(root + b"/"):
        raw = raw[len(root) :]
    return raw


def raw_ids(conn: HTTPConnection, prefix: Sequence[str]) -> list[str]:
    """The path's segments after ``prefix``, each percent-decoded on its own.

    Routing on the decoded path would cut a thread id holding ``%2F`` in two; ids are
    therefore taken from the raw path, segment by segment (SPEC §9).

    Raises:
        Problem: the path is not under ``prefix``, or a segment is not UTF-8 (404).
    """
    segments = app_path(conn).split(b"/")[1:]
    head = [s.encode() for s in prefix]
    if segments[: len(head)] != head:
        raise Problem(404, "not found")
    try:
        return [unquote_to_bytes(s).decode("utf-8") for s in segments[len(head) :]]
    except UnicodeDecodeError:
        raise Problem(404, "not found: a path segment is not UTF-8") from None


def query(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    return None if value is None or value == "" else value
