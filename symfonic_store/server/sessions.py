"""Browser sessions and CSRF tokens for the web inbox.

A session is a cookie signed with the server's secret (itsdangerous: HMAC-SHA1 over
the timestamped value; nothing but the signature is trusted) holding the principal,
its roles, the end of the session and what it is bound to (a token's digest). It is
``HttpOnly`` and ``SameSite=Strict``, lives at most ``lifetime`` seconds and never
longer than the credential it was opened with (a JWT's ``exp``).

Every form carries a CSRF token: an HMAC of a random per-browser nonce (its own
``HttpOnly``, ``SameSite=Strict`` cookie) and the principal's name, so a token taken
from one browser, or from before a sign-in, does not work in another.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from .auth import SignedIn

SESSION_COOKIE = "symfonic_session"
NONCE_COOKIE = "symfonic_csrf"
DEFAULT_LIFETIME = 8 * 3600.0


@dataclass(frozen=True, slots=True)
class Session:
    """A session as its cookie says, after the signature and the lifetime were checked."""

    name: str
    roles: tuple[str, ...]
    expires_at: float
    binding: str | None
    tenants: tuple[str, ...] = ()


class Sessions:
    """Issue and read session cookies; make and check CSRF tokens.

    Args:
        secret: the server's secret (32 random bytes or more); with several replicas,
            the same secret on each.
        lifetime: the longest a session lasts, in seconds.
    """

    def __init__(self, secret: bytes, *, lifetime: float = DEFAULT_LIFETIME) -> None:
        if len(secret) < 16:
            raise ValueError("the session secret must be at least 16 bytes")
        self._secret = secret
        self.lifetime = float(lifetime)
        self._serializer = URLSafeTimedSerializer(secret, salt="symfonic-store.session")

    def issue(self, signed: SignedIn) -> tuple[str, int]:
        """The cookie value of a new session, and its max age in seconds."""
        now = time.time()
        ends = now + self.lifetime
        if signed.expires_at is not None:
            ends = min(ends, signed.expires_at)
        value = self._serializer.dumps(
            {
                "p": signed.principal.name,
                "r": sorted(signed.principal.roles),
                "e": ends,
                "b": signed.binding,
                "n": sorted(signed.principal.tenants),
            }
        )
        return value, max(0, int(ends - now))

    def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie, or None: unsigned, tampered, too old or ended."""
        if not cookie or len(cookie) > 8192:
            return None
        try:
            data: Any = self._serializer.loads(cookie, max_age=int(self.lifetime) + 1)
        except BadSignature:  # SignatureExpired is one too
            return None
        if not isinstance(data, dict):
            return None
        name, roles, ends, binding = data.get("p"), data.get("r"), data.get("e"), data.get("b")
        if not isinstance(name, str) or not isinstance(roles, list):
            return None
        if not isinstance(ends, int | float) or ends <= time.time():
            return None
        tenants = data.get("n")
        return Session(
            name, tuple(str(r) for r in roles), float(ends),
            binding if isinstance(binding, str) else None,
            tuple(str(t) for t in tenants) if isinstance(tenants, list) else (),
        )

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(32)

    def csrf_token(self, nonce: str, principal: str | None) -> str:
        """The CSRF token for forms of this browser (``nonce``) and principal (None: signed out)."""
        message = f"csrf\x00{nonce}\x00{principal or ''}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def csrf_ok(self, nonce: str | None, principal: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.csrf_token(nonce, principal), token)
