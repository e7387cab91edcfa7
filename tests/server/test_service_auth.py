"""Who the approval service says you are: tokens, JWTs and a trusted header, each against a
real server process on SQLite and PostgreSQL; sessions, CSRF, rate limits and headers.

Rate limits count per client address, so tests that sign in connect from loopback
addresses of their own (127.0.0.N), as distinct clients would.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from service_rig import (
    BACKENDS,
    Served,
    answer_path,
    digest_of,
    mint,
    serve,
    served_database,
    write_json,
    write_tokens,
)

from symfonic_store import InterruptStore
from symfonic_store.events import MINTED, RESUME_REJECTED, RESUMED


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per backend for the whole module."""
    yield from served_database(request, tmp_path_factory)

PRINCIPALS = {
    "alice": ("alice-token", ["approver"]),
    "bob": ("bob-token", ["approver"]),
    "carol": ("carol-token", []),
}


def thread(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def from_address(server: Served, address: str, **kwargs: Any) -> httpx.Client:
    """A client whose connections come from ``address`` (a loopback address of its own)."""
    return server.client(transport=httpx.HTTPTransport(local_address=address), **kwargs)


def csrf_of(page: httpx.Response) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert match, page.text
    return match.group(1)


def sign_in(client: httpx.Client, token: str) -> httpx.Response:
    form = client.get("/signin")
    return client.post("/signin", data={"token": token, "csrf": csrf_of(form)})


# --- bearer tokens ----------------------------------------------------------------------


@dataclass
class TokenSite:
    server: Served
    store: InterruptStore
    tokens: Path


@pytest.fixture(scope="module")
def tokens_site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenSite]:
    folder = tmp_path_factory.mktemp("tokens")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    store = InterruptStore(served_db)
    with serve(served_db, "--tokens", str(tokens), "--sign-in-limit", "3", "--answer-limit", "3") as server:
        yield TokenSite(server, store, tokens)
    store.close()


def test_a_token_is_revoked_by_rewriting_the_file_without_a_restart(tokens_site: TokenSite) -> None:
    """Remove a principal from the tokens file: its next request is 401, and a new token works at once."""
    site = tokens_site
    t = thread("revoke")
    i = mint(site.store, t)
    with site.server.client("carol-token") as carol:
        assert carol.get("/api/interrupts").status_code == 200
        write_tokens(site.tokens, {k: v for k, v in PRINCIPALS.items() if k != "carol"} | {"dave": ("dave-token", [])})
        assert carol.get("/api/interrupts").status_code == 401
        refused = carol.post(answer_path(t, i), json={"response": {}, "digest": digest_of(site.store, t, i)})
        assert refused.status_code == 401
    with site.server.client("dave-token") as dave:
        assert dave.get("/api/interrupts").status_code == 200
    write_tokens(site.tokens, PRINCIPALS)
    assert [e.type for e in site.store.history(t)] == [MINTED]


def test_bad_api_credentials_are_401_never_429(tokens_site: TokenSite) -> None:
    """Forty requests with a wrong token are each 401: the sign-in limit does not apply to the API."""
    with tokens_site.server.client("wrong-token") as client:
        codes = {client.get("/api/interrupts").status_code for _ in range(40)}
    assert codes == {401}


def test_failed_sign_ins_are_limited_per_address_then_429(tokens_site: TokenSite) -> None:
    """After three failed sign-ins from one address even the right token is 429 there; another address still signs in."""
    server = tokens_site.server
    with from_address(server, "127.0.0.21") as guesser:
        assert [sign_in(guesser, f"guess-{n}").status_code for n in range(3)] == [401, 401, 401]
        limited = sign_in(guesser, "alice-token")
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    with from_address(server, "127.0.0.22") as other:
        assert sign_in(other, "alice-token").status_code == 303


def test_answers_are_limited_per_principal_then_429(tokens_site: TokenSite) -> None:
    """A fourth answer in a minute from one principal is 429 and admits nothing; another principal still answers."""
    site = tokens_site
    minted = [(t, mint(site.store, t)) for t in (thread("limit") for _ in range(5))]
    with site.server.client("bob-token") as bob:
        codes = [bob.post(answer_path(t, i), json={"response": {}, "digest": digest_of(site.store, t, i)}).status_code
                 for t, i in minted[:4]]
        assert codes == [200, 200, 200, 429]
        t4, i4 = minted[3]
        assert [e.type for e in site.store.history(t4)] == [MINTED]
    with site.server.client("alice-token") as alice:
        t5, i5 = minted[4]
        assert alice.post(answer_path(t5, i5), json={"response": {}, "digest": digest_of(site.store, t5, i5)}).status_code == 200


def test_the_session_cookie_is_httponly_strict_and_ends_with_sign_out_or_revocation(tokens_site: TokenSite) -> None:
    """Signing in sets an HttpOnly, SameSite=Strict cookie with a lifetime; it reads the API but cannot answer through it."""
    site = tokens_site
    t = thread("session")
    i = mint(site.store, t)
    with from_address(site.server, "127.0.0.23") as browser:
        assert browser.get("/").headers["location"] == "/signin"
        signed = sign_in(browser, "alice-token")
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Max-Age=28800" in cookie
        assert browser.get("/").status_code == 200
        assert browser.get("/api/interrupts").status_code == 200
        through_api = browser.post(answer_path(t, i), json={"response": {}, "digest": digest_of(site.store, t, i)})
        assert through_api.status_code == 401
        page = browser.get(f"/interrupts/{t}/{i}")
        no_csrf = browser.post(f"/interrupts/{t}/{i}/answer", data={"decision": "approve", "digest": digest_of(site.store, t, i)})
        assert no_csrf.status_code == 403
        assert [e.type for e in site.store.history(t)] == [MINTED]
        out = browser.post("/signout", data={"csrf": csrf_of(page)})
        assert out.status_code == 303 and 'symfonic_session=""' in out.headers["set-cookie"]
        assert browser.get("/").status_code == 303
        sign_in(browser, "bob-token")
        assert browser.get("/").status_code == 200
        write_tokens(site.tokens, {**PRINCIPALS, "bob": ("bob-new-token", ["approver"])})
        try:
            assert browser.get("/").status_code == 303  # the session's token was revoked
        finally:
            write_tokens(site.tokens, PRINCIPALS)


def test_pages_carry_the_security_headers(tokens_site: TokenSite) -> None:
    """CSP without inline script and no framing, nosniff, on pages and the API alike."""
    with tokens_site.server.client() as client:
        for response in (client.get("/signin"), client.get("/api/interrupts"), client.get("/static/inbox.js")):
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["x-content-type-options"] == "nosniff"


# --- JWTs ---------------------------------------------------------------------------------


def _pem(key: Any) -> bytes:
    return bytes(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


@dataclass
class JwtSite:
    server: Served
    store: InterruptStore
    old_key: Any
    new_key: Any

    def token(self, sub: str, *, key: Any = None, alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"sub": sub, "iss": "https://idp.example", "aud": "approvals", "iat": now, "exp": now + 600,
                "groups": ["finance"], **claims}
        return jwt.encode(body, key or self.old_key, algorithm=alg)


@pytest.fixture(scope="module")
def jwt_site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JwtSite]:
    folder = tmp_path_factory.mktemp("jwt")
    old = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    new = ed25519.Ed25519PrivateKey.generate()
    (folder / "old.pem").write_bytes(_pem(old))
    (folder / "new.pem").write_bytes(_pem(new))
    policy = write_json(folder / "policy.json", {"*": {"roles": ["finance"]}})
    store = InterruptStore(served_db)
    flags = ("--jwt-public-key", str(folder / "old.pem"), "--jwt-public-key", str(folder / "new.pem"),
             "--jwt-issuer", "https://idp.example", "--jwt-audience", "approvals",
             "--jwt-roles-claim", "groups", "--policy", str(policy))
    with serve(served_db, *flags) as server:
        yield JwtSite(server, store, old, new)
    store.close()


def test_jwts_signed_by_either_key_are_accepted_and_name_the_approver(jwt_site: JwtSite) -> None:
    """Two public keys (RS256 and EdDSA, a rotation): a token from either is the principal `sub` with the roles claim."""
    site = jwt_site
    for key, alg, who in ((site.old_key, "RS256", "erin"), (site.new_key, "EdDSA", "frank")):
        t = thread("jwt")
        i = mint(site.store, t)
        with site.server.client(site.token(who, key=key, alg=alg)) as client:
            done = client.post(answer_path(t, i), json={"response": {}, "digest": digest_of(site.store, t, i)})
        assert done.status_code == 200 and done.json()["actor"] == who
        assert [e.actor for e in site.store.history(t) if e.type == RESUMED] == [who]
        (record,) = site.store.audit(thread_id=t)
        assert (record.requested_by, record.authenticated_by) == ("agent", "service:jwt")


def test_expired_foreign_or_misaddressed_jwts_are_401_and_roles_come_from_the_claim(jwt_site: JwtSite) -> None:
    """Expiry past the leeway, another issuer or audience, an unknown key: 401; no finance group: 403, recorded."""
    site = jwt_site
    now = int(time.time())
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = [
        site.token("erin", exp=now - 120),
        site.token("erin", iss="https://evil.example"),
        site.token("erin", aud="other"),
        site.token("erin", key=stranger),
    ]
    for token in refused:
        with site.server.client(token) as client:
            assert client.get("/api/interrupts").status_code == 401
    with site.server.client(site.token("erin", exp=now - 5)) as within_leeway:
        assert within_leeway.get("/api/interrupts").status_code == 200
    t = thread("jwt-role")
    i = mint(site.store, t)
    with site.server.client(site.token("gina", groups=["support"])) as client:
        denied = client.post(answer_path(t, i), json={"response": {}, "digest": digest_of(site.store, t, i)})
    assert denied.status_code == 403
    assert [(e.actor, e.data["why"]) for e in site.store.history(t) if e.type == RESUME_REJECTED] == [("gina", "not_allowed")]


def test_the_sign_in_form_takes_a_jwt_and_the_session_ends_with_it(jwt_site: JwtSite) -> None:
    """A JWT pasted into the form opens a session whose cookie lives no longer than the token."""
    site = jwt_site
    with from_address(site.server, "127.0.0.31") as browser:
        signed = sign_in(browser, site.token("erin", exp=int(time.time()) + 90))
        assert signed.status_code == 303
        max_age = int(re.search(r"Max-Age=(\d+)", signed.headers["set-cookie"]).group(1))  # type: ignore[union-attr]
        assert 90 <= max_age <= 121  # the token's exp plus the 30 s leeway, not eight hours
        assert "erin" in browser.get("/").text


# --- a trusted header --------------------------------------------------------------------


@dataclass
class HeaderSite:
    server: Served
    store: InterruptStore


@pytest.fixture(scope="module")
def header_site(served_db: str) -> Iterator[HeaderSite]:
    store = InterruptStore(served_db)
    flags = ("--trusted-header", "X-Forwarded-User", "--trusted-roles-header", "X-Forwarded-Roles",
             "--trusted-proxy", "127.0.0.1/32")
    with serve(served_db, *flags) as server:
        yield HeaderSite(server, store)
    store.close()


def test_the_trusted_header_names_the_approver_only_from_the_proxy(header_site: HeaderSite) -> None:
    """From the listed proxy the header is the principal; from any other address it is ignored (401, nothing written)."""
    site = header_site
    t = thread("header")
    i = mint(site.store, t)
    headers = {"X-Forwarded-User": "hank", "X-Forwarded-Roles": "approver, finance"}
    body = {"response": {}, "digest": digest_of(site.store, t, i)}
    with from_address(site.server, "127.0.0.2", headers=headers) as elsewhere:
        assert elsewhere.get("/api/interrupts").status_code == 401
        assert elsewhere.post(answer_path(t, i), json=body).status_code == 401
        assert elsewhere.get("/").status_code == 401
    assert [e.type for e in site.store.history(t)] == [MINTED]
    with from_address(site.server, "127.0.0.1") as proxy_without_header:
        assert proxy_without_header.get("/api/interrupts").status_code == 401
    with from_address(site.server, "127.0.0.1", headers=headers) as proxy:
        assert "hank" in proxy.get("/").text
        assert proxy.post(answer_path(t, i), json={**body, "actor": "someone"}).status_code == 400
        done = proxy.post(answer_path(t, i), json=body)
    assert done.status_code == 200 and done.json()["actor"] == "hank"
    (record,) = site.store.audit(thread_id=t)
    assert (record.outcome, record.actor) == ("resumed", "hank")
    assert (record.requested_by, record.authenticated_by) == ("agent", "service:trusted-header")


def test_an_api_answer_that_is_not_json_typed_is_415_even_with_the_proxy_header(header_site: HeaderSite) -> None:
    """A cross-site form can POST text/plain through the proxy; the API answers it 415 and records nothing."""
    site = header_site
    t = thread("header-csrf")
    i = mint(site.store, t)
    body = f'{{"response": {{}}, "digest": "{digest_of(site.store, t, i)}"}}'
    with from_address(site.server, "127.0.0.1", headers={"X-Forwarded-User": "hank"}) as proxy:
        for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            refused = proxy.post(answer_path(t, i), content=body, headers={"Content-Type": media})
            assert refused.status_code == 415, media
    assert [e.type for e in site.store.history(t)] == [MINTED]


def test_a_repeated_identity_header_from_the_proxy_is_400_and_logged(served_db: str) -> None:
    """A proxy that appends its header to the client's would let the first one win: a
    request with two user, roles or tenants headers is refused, API and inbox alike."""
    store = InterruptStore(served_db)
    t = thread("twice")
    i = mint(store, t)
    flags = ("--trusted-header", "X-Forwarded-User", "--trusted-roles-header", "X-Forwarded-Roles",
             "--trusted-tenants-header", "X-Forwarded-Tenants", "--trusted-proxy", "127.0.0.1/32")
    body = {"response": {}, "digest": digest_of(store, t, i)}
    one = [("X-Forwarded-User", "hank"), ("X-Forwarded-Roles", "approver"), ("X-Forwarded-Tenants", "acme")]
    try:
        with serve(served_db, *flags) as server, from_address(server, "127.0.0.1") as proxy:
            for name, value in (("X-Forwarded-User", "root"), ("X-Forwarded-Roles", "admin"),
                                ("X-Forwarded-Tenants", "*")):
                twice = [(name, value), *one]
                assert proxy.get("/api/interrupts", headers=twice).status_code == 400, name
                assert proxy.get("/", headers=twice).status_code == 400, name
                assert proxy.post(answer_path(t, i), json=body, headers=twice).status_code == 400, name
            assert proxy.get("/api/interrupts", headers=one).status_code == 200
            logs = server.logs_with(*(f"2 {n} headers" for n in ("x-forwarded-user", "x-forwarded-roles",
                                                                   "x-forwarded-tenants")))
        assert [e.type for e in store.history(t)] == [MINTED]
    finally:
        store.close()
    for name in ("x-forwarded-user", "x-forwarded-roles", "x-forwarded-tenants"):
        assert f"2 {name} headers" in logs, name
