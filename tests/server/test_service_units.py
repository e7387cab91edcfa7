"""The approval service's pure parts, in this process: the digest, the policy, the answers
behind the approve and reject buttons, sessions, CSRF tokens, rate limits, the tokens
file and JWT checks, and the import guard."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from freezegun import freeze_time

from symfonic_store import InvalidInputError
from symfonic_store.native import decision_answer
from symfonic_store.server import JwtAuth, Policy, Principal, SignedIn, TokenAuth, interrupt_digest
from symfonic_store.server.limits import SlidingWindow
from symfonic_store.server.sessions import Sessions

HOSTILE = 'tenant/1?#%2F "quoted" ünï <script>\u2028'


def test_the_digest_is_the_specs_formula_on_hostile_text() -> None:
    """digest = hex SHA-256 of the sorted, compact, non-ASCII-escaped JSON of interrupt_id, payload and thread_id."""
    payload = {"b": [1, 2.5, None], "a": HOSTILE, "z": {"y": True}}
    text = json.dumps({"interrupt_id": "i-1", "payload": payload, "thread_id": HOSTILE},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert interrupt_digest(HOSTILE, "i-1", payload) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert interrupt_digest(HOSTILE, "i-1", {**payload, "a": "other"}) != interrupt_digest(HOSTILE, "i-1", payload)


# --- the policy ----------------------------------------------------------------------


def test_the_policy_applies_roles_four_eyes_and_the_default_entry() -> None:
    """Roles by name, "*" for the rest, four-eyes against the requester, [] for nobody; no entry: anyone."""
    policy = Policy.from_dict({
        "refund": {"roles": ["finance"], "four_eyes": True},
        "locked": {"roles": []},
        "*": {"roles": ["approver"]},
    })
    alice = Principal("alice", frozenset({"finance"}))
    bob = Principal("bob", frozenset({"approver"}))
    assert policy.refusal(alice, "refund", "agent") is None
    assert "finance" in str(policy.refusal(bob, "refund", "agent"))
    assert "four-eyes" in str(policy.refusal(alice, "refund", "alice"))
    assert "unknown" in str(policy.refusal(alice, "refund", None))
    assert "nobody" in str(policy.refusal(alice, "locked", "agent"))
    assert policy.refusal(bob, None, None) is None  # unnamed: the "*" entry
    assert "approver" in str(policy.refusal(alice, "other", None))
    assert Policy.from_dict({"refund": {"roles": ["finance"]}}).refusal(bob, "other", None) is None


def test_a_batched_request_gets_every_actions_rule() -> None:
    """A HITL batch named "a,b" must pass the rules of both a and b unless "a,b" is listed itself."""
    policy = Policy.from_dict({"wire": {"roles": ["finance"]}, "*": {"roles": ["approver", "finance"]}})
    approver = Principal("bob", frozenset({"approver"}))
    assert policy.refusal(approver, "lookup,wire", None) is not None
    assert policy.refusal(Principal("alice", frozenset({"finance"})), "lookup,wire", None) is None


@pytest.mark.parametrize(
    "value, named",
    [([], "object"), ({"x": []}, "entry"), ({"x": {"roles": "admin"}}, "roles"),
     ({"x": {"four_eyes": "yes"}}, "four_eyes"), ({"x": {"role": ["a"]}}, "unknown key")],
)
def test_a_malformed_policy_is_refused_naming_the_entry(value: Any, named: str) -> None:
    """Policy.from_dict refuses what it cannot read, and says where."""
    with pytest.raises(InvalidInputError, match=named):
        Policy.from_dict(value)


def test_a_policy_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    """Policy.from_file names the file and the JSON error."""
    path = tmp_path / "policy.json"
    path.write_text("{not json")
    with pytest.raises(InvalidInputError, match="policy file"):
        Policy.from_file(path)


# --- the approve and reject buttons ------------------------------------------------------


def test_the_buttons_answer_in_each_schemas_own_form() -> None:
    """Approve/reject become a breakpoint's approved flag, HITL decisions, Agent Inbox accept/ignore, else approved."""
    hitl = {"action_requests": [{"name": "wire"}, {"name": "mail"}], "review_configs": []}
    assert decision_answer(hitl, True) == {"decisions": [{"type": "approve"}, {"type": "approve"}]}
    assert decision_answer(hitl, False, message="no")["decisions"][1] == {"type": "reject", "message": "no"}
    assert decision_answer({"type": "tool_approval", "name": "wire"}, True) == {"type": "approve"}
    inbox = [{"action_request": {"action": "wire", "args": {}}, "config": {}}]
    assert decision_answer(inbox, True) == [{"type": "accept", "args": None}]
    assert decision_answer(inbox[0], False) == {"type": "ignore", "args": None}
    assert decision_answer({"next": ["wire"]}, True, breakpoint=True) == {"approved": True}
    assert decision_answer({"amount": 420}, False) == {"approved": False}


# --- sessions, CSRF, rate limits ---------------------------------------------------------


def test_a_session_lasts_its_lifetime_and_never_outlives_its_credential() -> None:
    """A session cookie reads back until its lifetime (or the JWT's exp) passes; a tampered one never."""
    sessions = Sessions(b"s" * 32, lifetime=3600)
    with freeze_time("2026-03-01 12:00:00") as clock:
        cookie, max_age = sessions.issue(SignedIn(Principal("alice", frozenset({"finance"})), binding="d"))
        assert max_age == 3600
        opened = sessions.read(cookie)
        assert opened is not None and (opened.name, opened.roles, opened.binding) == ("alice", ("finance",), "d")
        assert sessions.read(cookie[:-2] + "xx") is None
        assert Sessions(b"t" * 32).read(cookie) is None
        short, short_age = sessions.issue(SignedIn(Principal("bob"), expires_at=time.time() + 60))
        assert short_age == 60
        clock.tick(61)
        assert sessions.read(short) is None and sessions.read(cookie) is not None
        clock.tick(3600)
        assert sessions.read(cookie) is None


def test_a_csrf_token_belongs_to_one_browser_and_one_principal() -> None:
    """The CSRF token checks against its nonce and principal only."""
    sessions = Sessions(b"s" * 32)
    token = sessions.csrf_token("nonce-1", "alice")
    assert sessions.csrf_ok("nonce-1", "alice", token)
    assert not sessions.csrf_ok("nonce-2", "alice", token)
    assert not sessions.csrf_ok("nonce-1", "bob", token)
    assert not sessions.csrf_ok("nonce-1", None, token)
    assert not sessions.csrf_ok(None, "alice", token)


def test_a_sliding_window_refuses_past_its_limit_until_the_minute_slides() -> None:
    """Three hits a minute: the fourth waits, and is allowed once the first is a minute old."""
    window = SlidingWindow(3, period=60)
    with freeze_time("2026-03-01 12:00:00") as clock:
        assert [window.hit("a") for _ in range(3)] == [None, None, None]
        assert window.hit("a") == 60 and window.retry_after("a") == 60
        assert window.hit("b") is None
        clock.tick(30)
        assert window.hit("a") == 30
        clock.tick(31)
        assert window.retry_after("a") is None and window.hit("a") is None


# --- tokens and JWTs ---------------------------------------------------------------------


def _tokens(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def _entry(token: str, roles: list[str]) -> dict[str, Any]:
    return {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "roles": roles}


def test_a_tokens_file_is_reread_when_it_changes_and_fails_closed_when_broken(tmp_path: Path) -> None:
    """A rewritten file revokes at once; a file that stops parsing admits nobody; a bad file at start is an error."""
    path = _tokens(tmp_path / "tokens.json", {"alice": _entry("a-token", ["finance"])})
    auth = TokenAuth(path)
    signed = auth.sign_in("a-token")
    assert signed is not None and signed.principal == Principal("alice", frozenset({"finance"}))
    assert auth.from_session("alice", [], signed.binding) is not None
    replaced = _tokens(tmp_path / "new.json", {"alice": _entry("other-token", [])})
    replaced.replace(path)
    assert auth.sign_in("a-token") is None and auth.sign_in("other-token") is not None
    assert auth.from_session("alice", [], signed.binding) is None  # the old token's session ends
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    broken.replace(path)
    assert auth.sign_in("other-token") is None
    with pytest.raises(InvalidInputError, match="token_sha256"):
        TokenAuth(_tokens(tmp_path / "bad.json", {"alice": {"token_sha256": "short"}}))


def _rsa() -> tuple[Any, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key, key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _ed() -> tuple[Any, bytes]:
    key = ed25519.Ed25519PrivateKey.generate()
    return key, key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _ec() -> tuple[Any, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    return key, key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_jwts_are_checked_for_key_issuer_audience_and_expiry() -> None:
    """Any configured key verifies (RS256, ES256, EdDSA); wrong iss/aud, an unknown key, expiry past the leeway or HS256 do not."""
    (rsa_key, rsa_pub), (ed_key, ed_pub), (ec_key, ec_pub) = _rsa(), _ed(), _ec()
    auth = JwtAuth([rsa_pub, ed_pub, ec_pub], issuer="https://idp", audience="inbox",
                   roles_claim="realm.roles", leeway=30)
    now = int(time.time())
    claims = {"sub": "alice", "iss": "https://idp", "aud": "inbox", "exp": now + 600, "realm": {"roles": ["finance"]}}
    for key, alg in ((rsa_key, "RS256"), (ed_key, "EdDSA"), (ec_key, "ES256")):
        signed = auth.verify(jwt.encode(claims, key, algorithm=alg))
        assert signed is not None and signed.principal == Principal("alice", frozenset({"finance"}))
    assert auth.verify(jwt.encode({**claims, "exp": now - 10}, rsa_key, algorithm="RS256")) is not None
    for bad in ({"iss": "https://other"}, {"aud": "other"}, {"exp": now - 120}, {"sub": ""}):
        assert auth.verify(jwt.encode({**claims, **bad}, rsa_key, algorithm="RS256")) is None, bad
    stranger, _ = _rsa()
    assert auth.verify(jwt.encode(claims, stranger, algorithm="RS256")) is None
    assert auth.verify(jwt.encode(claims, "s" * 32, algorithm="HS256")) is None
    assert auth.verify("not.a.jwt") is None


# --- the extra ----------------------------------------------------------------------------


def test_import_symfonic_store_loads_no_server_library() -> None:
    """`import symfonic_store` (and the CLI's --help) loads none of Starlette, uvicorn, Jinja2, PyJWT or prometheus-client."""
    code = (
        "import sys, symfonic_store, symfonic_store.cli.main\n"
        "roots = ('starlette', 'uvicorn', 'jinja2', 'jwt', 'prometheus_client', 'itsdangerous', 'symfonic_store.server')\n"
        "print([m for m in sys.modules if m.split('.')[0] in roots or m.startswith('symfonic_store.server')])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"


def test_without_the_extra_the_import_says_what_to_install() -> None:
    """With Starlette missing, importing symfonic_store.server names the extra to install."""
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "import importlib.util\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'starlette' else real(name, *a)\n"
        "try:\n    import symfonic_store.server\nexcept ImportError as exc:\n    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "pip install '.[server]' in a checkout of symfonic-store" in result.stdout and "starlette" in result.stdout


def test_the_package_data_ships_every_inbox_file() -> None:
    """Every template and static file of the inbox matches a package-data pattern, so the wheel carries it."""
    import fnmatch
    import tomllib

    import symfonic_store.server.inbox as inbox

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    patterns = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["symfonic_store.server.inbox"]
    root = Path(inbox.__file__).parent
    files = [p.relative_to(root).as_posix() for p in root.rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert len(files) >= 8
    assert [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)] == []


def test_with_rate_limits_off_failed_sign_ins_are_never_429(tmp_path: Path) -> None:
    """create_app(rate_limits=None) (serve --rate-limit off): thirty failed sign-ins from one address are each 401."""
    import re

    from starlette.testclient import TestClient

    from symfonic_store import InterruptStore
    from symfonic_store.server import create_app

    tokens = _tokens(tmp_path / "tokens.json", {"alice": _entry("a-token", [])})
    with InterruptStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.setup()
        client = TestClient(create_app(store, auth=TokenAuth(tokens), rate_limits=None))
        form = client.get("/signin")
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
        assert match is not None
        codes = {client.post("/signin", data={"token": f"guess-{n}", "csrf": match.group(1)}).status_code
                 for n in range(30)}
    assert codes == {401}
