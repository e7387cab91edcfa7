"""``serve``: the approval service -- the HTTP API and the web inbox (SPEC §9)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ...errors import InvalidInputError
from ..app import app, count, flag, get_session, seconds
from .sweep import LangGraphKeyFile, LangGraphUrl, import_graph, served_graphs

SECRET_ENV = "SYMFONIC_STORE_SESSION_SECRET"


def _server() -> Any:
    """The server package, or a usage error saying which extra to install."""
    try:
        from ... import server
    except ImportError as exc:
        raise InvalidInputError("serve", str(exc)) from None
    return server


def _secret(path: Path | None) -> bytes | None:
    if path is not None:
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            raise InvalidInputError("--session-secret-file", f"cannot be read ({exc.strerror or exc})") from None
    else:
        env = os.environ.get(SECRET_ENV, "").strip()
        if not env:
            return None
        secret = env.encode("utf-8")
    if len(secret) < 32:
        raise InvalidInputError(
            "--session-secret-file" if path is not None else SECRET_ENV,
            "must hold at least 32 bytes (e.g. `openssl rand -hex 32`)",
        )
    return secret


def port_number(value: Any, field: str = "value") -> int:
    """A TCP port: 0 (any free one) to 65535."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > 65535:
        raise InvalidInputError(field, f"must be a port number from 0 to 65535, got {text!r}")
    return int(text)


# Its many options are declared where they are read, alike in shape only (see cli/app.py).
@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="The port (0: any free one, printed).", parser=flag(port_number))
    ] = 8765,
    graph: Annotated[
        list[str] | None,
        typer.Option("--graph", metavar="MODULE:ATTR", help="A compiled graph this server resumes when it answers its interrupts: LangGraph's own, and the seed markers it waits on (repeatable)."),
    ] = None,
    tokens: Annotated[
        Path | None,
        typer.Option("--tokens", metavar="FILE", help='Bearer tokens: {"<principal>": {"token_sha256": "<hex>", "roles": [...]}}; re-read when it changes.'),
    ] = None,
    jwt_public_key: Annotated[
        list[Path] | None,
        typer.Option("--jwt-public-key", metavar="FILE", help="A PEM public key that signs JWTs (RS256, ES256, EdDSA); repeatable for rotation."),
    ] = None,
    jwt_issuer: Annotated[str | None, typer.Option("--jwt-issuer", metavar="ISS", help="The required iss.")] = None,
    jwt_audience: Annotated[str | None, typer.Option("--jwt-audience", metavar="AUD", help="The required aud.")] = None,
    # Options alike in shape only (see cli/app.py), deliberately declared where they are read.
    jwt_roles_claim: Annotated[
        str, typer.Option("--jwt-roles-claim", metavar="NAME", help="The claim holding the roles (dotted for a nested one).")
    ] = "roles",
    jwt_tenants_claim: Annotated[
        str | None, typer.Option("--jwt-tenants-claim", metavar="NAME", help='The claim holding the principal\'s tenants ("*": all).')
    ] = None,
    jwt_leeway: Annotated[
        float, typer.Option("--jwt-leeway", metavar="SECONDS", help="Clock skew allowed on exp/nbf.", parser=flag(seconds))
    ] = 30.0,
    trusted_header: Annotated[
        str | None, typer.Option("--trusted-header", metavar="NAME", help="The header an authenticating proxy names the principal in.")
    ] = None,
    trusted_roles_header: Annotated[
        str | None, typer.Option("--trusted-roles-header", metavar="NAME", help="The header with the principal's roles, comma-separated.")
    ] = None,
    trusted_tenants_header: Annotated[
        str | None, typer.Option("--trusted-tenants-header", metavar="NAME", help='The header with the principal\'s tenants, comma-separated ("*": all).')
    ] = None,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option("--trusted-proxy", metavar="CIDR", help="An address the proxy connects from (repeatable); the headers are honoured only from these."),
    ] = None,
    policy: Annotated[
        Path | None, typer.Option("--policy", metavar="FILE", help='Who may answer what: {"<interrupt name>": {"roles": [...], "four_eyes": true}, "*": {...}}.')
    ] = None,
    # Options alike in shape only, deliberately declared where they are read.
    rate_limit: Annotated[
        str, typer.Option("--rate-limit", metavar="on|off", help="Limit failed sign-ins per address and answers per principal.")
    ] = "on",
    sign_in_limit: Annotated[
        int, typer.Option("--sign-in-limit", metavar="N", help="Failed sign-ins per address per minute.", parser=flag(count))
    ] = 20,
    answer_limit: Annotated[
        int, typer.Option("--answer-limit", metavar="N", help="Answers per principal per minute.", parser=flag(count))
    ] = 120,
    session_secret_file: Annotated[
        Path | None,
        typer.Option("--session-secret-file", metavar="FILE", help=f"Signs session cookies (>= 32 bytes); else ${SECRET_ENV}, else random per process."),
    ] = None,
    session_lifetime: Annotated[
        float, typer.Option("--session-lifetime", metavar="SECONDS", help="The longest a browser session lasts.", parser=flag(seconds))
    ] = 8 * 3600.0,
    secure_cookies: Annotated[
        bool, typer.Option("--secure-cookies", help="Mark cookies Secure (behind a proxy that terminates TLS).")
    ] = False,
    access_log: Annotated[bool, typer.Option("--access-log/--no-access-log", help="Log each request.")] = True,
    langgraph_url: LangGraphUrl = None,
    langgraph_api_key_file: LangGraphKeyFile = None,
) -> None:
    """Serve the approval service: the JSON API and the web inbox.

    One authentication mode: --tokens, --jwt-public-key (with --jwt-issuer and
    --jwt-audience), or --trusted-header (behind an authenticating proxy).
    """
    server = _server()
    from ...server.auth import is_loopback_host

    modes = [name for name, given in (
        ("--tokens", tokens is not None),
        ("--jwt-public-key", bool(jwt_public_key)),
        ("--trusted-header", trusted_header is not None),
    ) if given]
    if len(modes) != 1:
        raise InvalidInputError(
            "authentication",
            "choose exactly one mode: --tokens FILE, --jwt-public-key FILE (with --jwt-issuer "
            "and --jwt-audience), or --trusted-header NAME"
            + (f" (given: {', '.join(modes)})" if modes else ""),
        )
    if rate_limit not in ("on", "off"):
        raise InvalidInputError("--rate-limit", f"must be on or off, got {rate_limit!r}")
    proxies = list(trusted_proxy or [])
    auth: Any
    if tokens is not None:
        auth = server.TokenAuth(tokens)
    elif jwt_public_key:
        auth = server.JwtAuth(
            jwt_public_key, issuer=jwt_issuer or "", audience=jwt_audience or "",
            roles_claim=jwt_roles_claim, leeway=jwt_leeway, tenants_claim=jwt_tenants_claim,
        )
    else:
        assert trusted_header is not None
        if not proxies and not is_loopback_host(host):
            raise InvalidInputError(
                "--trusted-proxy",
                f"is required with --trusted-header on {host!r}: anyone who can reach that "
                "address could send the header; list the proxy's address(es)",
            )
        auth = server.TrustedHeaderAuth(
            trusted_header, roles_header=trusted_roles_header,
            tenants_header=trusted_tenants_header,
            **({"proxies": proxies} if proxies else {}),
        )
    from ...server.auth import parse_networks

    networks = parse_networks(proxies)
    rules = server.Policy.from_file(policy) if policy is not None else None
    limits = None if rate_limit == "off" else server.RateLimits(sign_in_limit, answer_limit)
    secret = _secret(session_secret_file)
    graphs = [import_graph(spec) for spec in graph or []]
    import uvicorn

    with get_session(ctx).store() as store:
        # Fail now, not on the first request, when the database is down or not migrated.
        store.pending("symfonic-store/healthz")
        application = server.create_app(
            store, graphs=graphs, auth=auth, policy=rules, session_secret=secret,
            session_lifetime=session_lifetime, rate_limits=limits, trusted_proxies=networks,
            secure_cookies=secure_cookies,
            served=None if langgraph_url is None
            else served_graphs(store, langgraph_url, langgraph_api_key_file),
        )
        config = uvicorn.Config(
            application,
            host=host,
            port=port,
            # The client address must be the peer's: X-Forwarded-For is read only from
            # --trusted-proxy addresses, by the service itself.
            proxy_headers=False,
            server_header=False,
            access_log=access_log,
            timeout_graceful_shutdown=5,
            log_level="info",
        )
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say so, and
        # without it a keep-alive response (headers, then body) waits ~40 ms for an ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), port))
        except OSError as exc:
            raise InvalidInputError("--host/--port", f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
        # Listening before the line is printed: whoever reads it can connect at once.
        sock.listen(config.backlog)
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        sys.stdout.write(f"serving the approval inbox on http://{shown}:{bound}/ ({auth.mode} authentication)\n")
        sys.stdout.flush()
        uvicorn.Server(config).run(sockets=[sock])
