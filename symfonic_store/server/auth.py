"""Authentication: one mode per server, and the principal each request proves (SPEC §9).

- :class:`TokenAuth` -- bearer tokens; the file holds only their SHA-256 digests and is
  re-read when it changes, so a token is revoked by rewriting the file.
- :class:`JwtAuth` -- JWTs signed by an identity provider (RS256, ES256 or EdDSA),
  checked against one or more public keys (rotation), the issuer, the audience and
  the expiry (with a small leeway).
- :class:`TrustedHeaderAuth` -- behind an authenticating proxy: the principal is a
  header, honoured only when the connection comes from a listed proxy address.

Identity is never taken from the request body: the recorded actor of an answer is the
principal an authenticator returns here.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from starlette.requests import HTTPConnection

from ..errors import InvalidInputError
from ..validation import MAX_ID_LENGTH
from .config_file import read_config_text
from .paging import BadRequest
from .principal import Principal

log = logging.getLogger("symfonic_store.server")

LOOPBACK = ("127.0.0.0/8", "::1/128")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class SignedIn:
    """What a sign-in secret (a token, a JWT) proved: who, until when, bound to what."""

    principal: Principal
    expires_at: float | None = None
    """The credential's own end (a JWT's ``exp``); the session never outlives it."""
    binding: str | None = None
    """What the session stays tied to (a token's digest): revoking it ends the session."""


class Authenticator(Protocol):
    """One authentication mode of the service."""

    mode: ClassVar[str]
    form_sign_in: ClassVar[bool]
    """Whether people sign in on the web form (tokens, JWT) or arrive authenticated (header)."""

    def from_request(self, conn: HTTPConnection) -> Principal | None:
        """The principal the request's own credentials prove, or None."""

    def credentials_sent(self, conn: HTTPConnection) -> bool:
        """Does the request carry credentials of this mode (valid or not)?"""

    def sign_in(self, secret: str) -> SignedIn | None:
        """What a secret typed on the sign-in form proves, or None."""

    def from_session(
        self, name: str, roles: Iterable[str], binding: str | None, *, tenants: Iterable[str] = ()
    ) -> Principal | None:
        """The principal of a session signed in earlier, if its credential still holds."""


def parse_networks(values: Iterable[str], field: str = "--trusted-proxy") -> tuple[Network, ...]:
    """CIDRs (or single addresses) as networks.

    Raises:
        InvalidInputError: a value is not an address or a network.
    """
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            raise InvalidInputError(field, f"{value!r} is not an IP address or CIDR") from None
    return tuple(networks)


def _in(address: str | None, networks: Sequence[Network]) -> bool:
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def client_address(conn: HTTPConnection, proxies: Sequence[Network]) -> str:
    """The address a request came from: the peer, or -- when the peer is a listed proxy
    -- the last address in ``X-Forwarded-For`` that is not one (for per-address limits)."""
    peer = conn.client.host if conn.client else ""
    if not proxies or not _in(peer, proxies):
        return peer
    hops = [h.strip() for h in conn.headers.get("x-forwarded-for", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _in(hop, proxies):
            return hop
    return peer


def is_loopback_host(host: str) -> bool:
    """Is ``host`` (as given to ``--host``) a loopback address or ``localhost``?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bearer(conn: HTTPConnection) -> str | None:
    header = conn.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def _principal_name(value: Any) -> str | None:
    """A principal name the store can record: a non-empty string of at most 255 characters."""
    if not isinstance(value, str):
        return None
    name = value.strip()
    if not name or len(name) > MAX_ID_LENGTH or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return None
    return name


# --- bearer tokens -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    digest: str
    roles: frozenset[str]
    tenants: frozenset[str] = frozenset()


_HEX64 = re.compile(r"[0-9a-f]{64}")


def token_digest(token: str) -> str:
    """The hex SHA-256 of a token, as the tokens file holds it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_tokens(data: Any, field: str) -> dict[str, _Token]:
    """``{"<principal>": {"token_sha256": "<hex>", "roles": [...]}}``, checked."""
    if not isinstance(data, dict):
        raise InvalidInputError(field, 'must be a JSON object {"<principal>": {"token_sha256": ..., "roles": [...]}}')
    tokens: dict[str, _Token] = {}
    seen: set[str] = set()
    for name, entry in data.items():
        where = f"{field}, principal {name!r}"
        if _principal_name(name) != name:
            raise InvalidInputError(where, "must be a name of 1 to 255 printable characters")
        if not isinstance(entry, dict):
            raise InvalidInputError(where, 'must be an object {"token_sha256": "<hex>", "roles": [...]}')
        unknown = set(entry) - {"token_sha256", "roles", "tenants"}
        if unknown:
            raise InvalidInputError(where, f"has unknown key(s) {', '.join(sorted(map(repr, unknown)))}")
        digest = entry.get("token_sha256")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest.lower()):
            raise InvalidInputError(where, "'token_sha256' must be 64 hex digits (the token's SHA-256)")
        roles = entry.get("roles", [])
        if not (isinstance(roles, list) and all(isinstance(r, str) and r for r in roles)):
            raise InvalidInputError(where, "'roles' must be a list of role names")
        tenants = entry.get("tenants", [])
        if not (isinstance(tenants, list) and all(isinstance(t, str) and t for t in tenants)):
            raise InvalidInputError(where, "'tenants' must be a list of tenant names (\"*\": all)")
        if digest.lower() in seen:
            raise InvalidInputError(where, "shares its token with another principal")
        seen.add(digest.lower())
        tokens[name] = _Token(digest.lower(), frozenset(roles), frozenset(tenants))
    return tokens


class TokenAuth:
    """Bearer tokens from a JSON file of SHA-256 digests, re-read whenever it changes.

    Args:
        path: ``{"<principal>": {"token_sha256": "<hex>", "roles": ["approver"]}}``.

    A file that stops parsing after a change admits nobody until it is fixed (it fails
    closed and logs why): a half-revoked token list is not guessed at. Replace the file
    in one step (write a new file, then ``mv`` it over the old one).

    Raises:
        InvalidInputError: the file cannot be read or is malformed at start-up.
    """

    mode: ClassVar[str] = "tokens"
    form_sign_in: ClassVar[bool] = True

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._tokens: dict[str, _Token] = {}
        self._reload(strict=True)

    def _read_stamp(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)

    def _reload(self, *, strict: bool) -> None:
        stamp = self._read_stamp()
        field = f"tokens file {str(self.path)!r}"
        try:
            text = read_config_text(self.path, field)
            try:
                data = json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                raise InvalidInputError(field, "is not JSON") from None
            tokens = parse_tokens(data, field)
        except InvalidInputError as exc:
            if strict:
                raise
            log.error("%s; until it is fixed no token is accepted", exc)
            tokens = {}
        self._tokens = tokens
        self._stamp = stamp

    def _current(self) -> dict[str, _Token]:
        stamp = self._read_stamp()
        if stamp != self._stamp:
            with self._lock:
                if self._read_stamp() != self._stamp:
                    self._reload(strict=False)
        return self._tokens

    def _lookup(self, token: str) -> tuple[str, _Token] | None:
        digest = token_digest(token)
        found = None
        for name, entry in self._current().items():
            # Every entry is compared (in constant time each): the time taken says
            # nothing about which principal's digest came close.
            if hmac.compare_digest(entry.digest, digest):
                found = (name, entry)
        return found

    def credentials_sent(self, conn: HTTPConnection) -> bool:
        return "authorization" in conn.headers

    def principals(self) -> frozenset[str]:
        """The principals the file names now (none while it does not parse): who an
        interrupt may be assigned to (SPEC §15)."""
        return frozenset(self._current())

    def from_request(self, conn: HTTPConnection) -> Principal | None:
        token = _bearer(conn)
        if token is None:
            return None
        found = self._lookup(token)
        return None if found is None else Principal(found[0], found[1].roles, tenants=found[1].tenants)

    def sign_in(self, secret: str) -> SignedIn | None:
        found = self._lookup(secret.strip()) if secret.strip() else None
        if found is None:
            return None
        name, entry = found
        return SignedIn(Principal(name, entry.roles, tenants=entry.tenants), binding=entry.digest)

    def from_session(
        self, name: str, roles: Iterable[str], binding: str | None, *, tenants: Iterable[str] = ()
    ) -> Principal | None:
        # The token the session was opened with must still be the principal's: a token
        # revoked (or replaced) in the file ends the sessions it opened; roles are the
        # file's current ones.
        entry = self._current().get(name)
        if entry is None or binding is None or not hmac.compare_digest(entry.digest, binding):
            return None
        return Principal(name, entry.roles, tenants=entry.tenants)


# --- JWTs ----------------------------------------------------------------------------


def _load_key(source: str | bytes | Path) -> tuple[Any, str]:
    """A PEM public key and the one algorithm it verifies (RS256, ES256, EdDSA)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(source, bytes):
        pem, where = source, "a public key"
    elif isinstance(source, str) and source.lstrip().startswith("-----BEGIN"):
        pem, where = source.encode("ascii"), "a public key"
    else:
        where = f"public key file {str(source)!r}"
        try:
            pem = Path(source).read_bytes()
        except OSError as exc:
            raise InvalidInputError("--jwt-public-key", f"{where} cannot be read ({exc.strerror or exc})") from None
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError("--jwt-public-key", f"{where} is not a PEM public key ({exc})") from None
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < 2048:
            raise InvalidInputError("--jwt-public-key", f"{where} is an RSA key of {key.key_size} bits; use 2048 or more")
        return key, "RS256"
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name != "secp256r1":
            raise InvalidInputError("--jwt-public-key", f"{where} is on curve {key.curve.name}; ES256 needs P-256")
        return key, "ES256"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key, "EdDSA"
    raise InvalidInputError("--jwt-public-key", f"{where} is a {type(key).__name__}; use RSA, P-256 or Ed25519")


def _claim(payload: Mapping[str, Any], path: str) -> Any:
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _roles(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset(r for r in re.split(r"[\s,]+", value) if r)
    if isinstance(value, list):
        return frozenset(r for r in value if isinstance(r, str) and r)
    return frozenset()


class JwtAuth:
    """Signed JWTs: principal = ``sub``, roles = the ``roles`` claim (or ``roles_claim``).

    Args:
        public_keys: PEM public keys (bytes or text) or files holding them; several for
            a key rotation (a token verifies against any). RSA keys verify RS256, P-256
            keys ES256, Ed25519 keys EdDSA; nothing else is accepted (no ``none``, no HMAC).
        issuer: the required ``iss``.
        audience: the required ``aud``.
        roles_claim: the claim holding the roles (a list, or a space- or
            comma-separated string); dotted for a nested one (``realm_access.roles``).
        tenants_claim: the claim holding the principal's tenants (SPEC §15), read like
            the roles; None: no principal has tenants (each sees the untenanted only).
        leeway: seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.

    Raises:
        InvalidInputError: a key cannot be read or is of an unaccepted kind.
    """

    mode: ClassVar[str] = "jwt"
    form_sign_in: ClassVar[bool] = True

    def __init__(
        self,
        public_keys: Sequence[str | bytes | Path],
        *,
        issuer: str,
        audience: str,
        roles_claim: str = "roles",
        leeway: float = 30.0,
        tenants_claim: str | None = None,
    ) -> None:
        import jwt  # PyJWT: imported with the mode that needs it

        if not public_keys:
            raise InvalidInputError("--jwt-public-key", "at least one public key is needed")
        if not issuer:
            raise InvalidInputError("--jwt-issuer", "is required with --jwt-public-key")
        if not audience:
            raise InvalidInputError("--jwt-audience", "is required with --jwt-public-key")
        self._jwt = jwt
        self._keys = [_load_key(k) for k in public_keys]
        self.issuer = issuer
        self.audience = audience
        self.roles_claim = roles_claim
        self.tenants_claim = tenants_claim
        self.leeway = float(leeway)

    def verify(self, token: str) -> SignedIn | None:
        """What a JWT proves, or None (bad signature, issuer, audience, expiry, subject)."""
        if not token or len(token) > 16_384:
            return None
        for key, algorithm in self._keys:
            try:
                payload = self._jwt.decode(
                    token,
                    key=key,
                    algorithms=[algorithm],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self.leeway,
                    options={"require": ["exp", "iss", "aud", "sub"]},
                )
            except (self._jwt.InvalidSignatureError, self._jwt.InvalidAlgorithmError):
                continue  # signed by another key, or with another key's algorithm
            except self._jwt.InvalidTokenError:
                return None  # malformed, or signed by this key with claims that fail
            name = _principal_name(payload.get("sub"))
            if name is None:
                return None
            exp = payload.get("exp")
            expires = float(exp) + self.leeway if isinstance(exp, int | float) else None
            tenants = (
                frozenset() if self.tenants_claim is None
                else _roles(_claim(payload, self.tenants_claim))
            )
            principal = Principal(name, _roles(_claim(payload, self.roles_claim)), tenants=tenants)
            return SignedIn(principal, expires_at=expires)
        return None

    def credentials_sent(self, conn: HTTPConnection) -> bool:
        return "authorization" in conn.headers

    def from_request(self, conn: HTTPConnection) -> Principal | None:
        token = _bearer(conn)
        signed = None if token is None else self.verify(token)
        return None if signed is None else signed.principal

    def sign_in(self, secret: str) -> SignedIn | None:
        return self.verify(secret.strip())

    def from_session(
        self, name: str, roles: Iterable[str], binding: str | None, *, tenants: Iterable[str] = ()
    ) -> Principal | None:
        # The session never outlives the JWT it was opened with (see Sessions.issue).
        return Principal(name, frozenset(roles), tenants=frozenset(tenants))


# --- a trusted header ----------------------------------------------------------------


class TrustedHeaderAuth:
    """Behind an authenticating proxy: the principal is ``header``, from ``proxies`` only.

    Args:
        header: the header the proxy sets (``X-Forwarded-User``, say).
        roles_header: a header with the principal's roles, comma-separated.
        tenants_header: a header with the principal's tenants, comma-separated (SPEC §15).
        proxies: the addresses (CIDRs) the proxy connects from; loopback by default.
            From any other address the headers are ignored (anyone could send them).
    """

    mode: ClassVar[str] = "header"
    form_sign_in: ClassVar[bool] = False

    def __init__(
        self,
        header: str,
        *,
        roles_header: str | None = None,
        proxies: Iterable[str] = LOOPBACK,
        tenants_header: str | None = None,
    ) -> None:
        if not header or not re.fullmatch(r"[A-Za-z0-9-]+", header):
            raise InvalidInputError("--trusted-header", f"{header!r} is not a header name")
        if roles_header is not None and not re.fullmatch(r"[A-Za-z0-9-]+", roles_header):
            raise InvalidInputError("--trusted-roles-header", f"{roles_header!r} is not a header name")
        self.header = header.lower()
        self.roles_header = None if roles_header is None else roles_header.lower()
        if tenants_header is not None and not re.fullmatch(r"[A-Za-z0-9-]+", tenants_header):
            raise InvalidInputError("--trusted-tenants-header", f"{tenants_header!r} is not a header name")
        self.tenants_header = None if tenants_header is None else tenants_header.lower()
        self.proxies = parse_networks(proxies)
        if not self.proxies:
            raise InvalidInputError("--trusted-proxy", "at least one proxy address is needed")

    def from_proxy(self, conn: HTTPConnection) -> bool:
        return _in(conn.client.host if conn.client else None, self.proxies)

    def credentials_sent(self, conn: HTTPConnection) -> bool:
        return self.header in conn.headers

    def _single(self, conn: HTTPConnection, header: str | None) -> str | None:
        """The header's one value. A proxy that appends its header to the client's instead
        of replacing it would let the client's through (whichever one came first wins), so
        more than one is refused."""
        if header is None:
            return None
        values = conn.headers.getlist(header)
        if len(values) > 1:
            log.warning("refused a request from %s: it has %d %s headers",
                        conn.client.host if conn.client else "?", len(values), header)
            raise BadRequest(f"the request has more than one {header} header")
        return values[0] if values else None

    def from_request(self, conn: HTTPConnection) -> Principal | None:
        """The proxy's principal, or None (not from the proxy, or no user header).

        Raises:
            BadRequest: the user, roles or tenants header came more than once (400).
        """
        if not self.from_proxy(conn):
            return None
        name_value, roles_value, tenants_value = (
            self._single(conn, h) for h in (self.header, self.roles_header, self.tenants_header)
        )
        name = _principal_name(name_value)
        if name is None:
            return None
        roles = frozenset(r.strip() for r in (roles_value or "").split(",") if r.strip())
        tenants = frozenset(t.strip() for t in (tenants_value or "").split(",") if t.strip())
        return Principal(name, roles, tenants=tenants)

    def sign_in(self, secret: str) -> SignedIn | None:
        return None

    def from_session(
        self, name: str, roles: Iterable[str], binding: str | None, *, tenants: Iterable[str] = ()
    ) -> Principal | None:
        return None
