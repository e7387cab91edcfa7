"""``symfonic-store serve``: configurations it refuses before it listens (exit 2, one line)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from cli_helpers import assert_clean_error, run_cli


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"alice": {"token_sha256": hashlib.sha256(b"t").hexdigest(), "roles": []}}))
    return path


@pytest.mark.parametrize(
    "flags, named",
    [
        ((), "choose exactly one mode"),
        (("--tokens", "{tokens}", "--trusted-header", "X-User"), "given: --tokens, --trusted-header"),
        (("--trusted-header", "X-User", "--host", "0.0.0.0"), "--trusted-proxy"),
        (("--trusted-header", "X-User", "--trusted-proxy", "not-a-network"), "not an IP address"),
        (("--tokens", "{missing}"), "cannot be read"),
        (("--tokens", "{tokens}", "--policy", "{bad_policy}"), "policy file"),
        (("--tokens", "{tokens}", "--graph", "no_such_module:graph"), "no_such_module"),
        (("--tokens", "{tokens}", "--port", "70000"), "port number"),
        (("--tokens", "{tokens}", "--rate-limit", "sometimes"), "--rate-limit"),
        (("--jwt-public-key", "{tokens}", "--jwt-issuer", "i", "--jwt-audience", "a"), "not a PEM public key"),
        (("--tokens", "{tokens}", "--session-secret-file", "{short_secret}"), "at least 32 bytes"),
    ],
    ids=["no-mode", "two-modes", "header-off-loopback", "bad-cidr", "missing-tokens", "bad-policy",
         "bad-graph", "bad-port", "bad-rate-limit", "bad-key", "short-secret"],
)
def test_serve_refuses_a_bad_configuration_before_listening(
    flags: tuple[str, ...], named: str, tokens: Path, tmp_path: Path
) -> None:
    """Each bad configuration exits 2 with one error line naming the problem; nothing is served."""
    (tmp_path / "policy.json").write_text('{"*": {"roles": "admin"}}')
    (tmp_path / "secret").write_text("short")
    values = {"tokens": str(tokens), "missing": str(tmp_path / "nope.json"),
              "bad_policy": str(tmp_path / "policy.json"), "short_secret": str(tmp_path / "secret")}
    args = [flag.format(**values) for flag in flags]
    result = run_cli("--db", f"sqlite:///{tmp_path / 'store.db'}", "serve", *args, cwd=tmp_path)
    assert named in assert_clean_error(result, 2)


def test_serve_is_listed_in_the_help() -> None:
    """`symfonic-store --help` lists serve, and `serve --help` its authentication modes."""
    assert "serve" in run_cli("--help").stdout
    text = run_cli("serve", "--help").stdout
    for flag in ("--tokens", "--jwt-public-key", "--trusted-header", "--trusted-proxy", "--policy", "--rate-limit"):
        assert flag in text


def test_serve_refuses_a_database_behind_the_migrations_before_listening(tokens: Path, tmp_path: Path) -> None:
    """An empty database is refused at start (exit 2, naming `db upgrade`), not on the first request."""
    (tmp_path / "empty.db").touch()
    result = run_cli("--db", f"sqlite:///{tmp_path / 'empty.db'}", "serve", "--tokens", str(tokens))
    assert "db upgrade" in assert_clean_error(result, 2)
