"""Why a PostgreSQL connection could not be opened, by code: the startup probe.

libpq reports a refused connection (no such database, no such role, a wrong password)
as text only: the server's ErrorResponse carries the SQLSTATE, but libpq keeps it to
itself, and psycopg's ``OperationalError`` from ``connect`` has ``sqlstate`` None. The
text is worded in the server's ``lc_messages`` language, so the store does not read it.

When a connection could not be opened, :func:`startup_failure` asks the server again,
speaking its wire protocol (v3) for as far as the failure goes: the StartupMessage with
the same user and database, the password exchange (cleartext, MD5 or SCRAM-SHA-256,
with the password libpq used), and reads the SQLSTATE (field ``C``) of the server's
ErrorResponse. A server that cannot be reached at all gives the socket's ``errno``
instead. Nothing is logged or returned that holds the password.

The probe asks over TLS when libpq's ``sslmode`` asks for it (verifying the server the way
``verify-ca`` / ``verify-full`` do), and does not ask at all with a client certificate,
several hosts, GSS encryption, ``channel_binding=require`` or ``require_auth``: it says
nothing rather than something untrue, or less safe than libpq. It runs only on this
failure path and waits at most :data:`PROBE_TIMEOUT` seconds (blocking, in the asyncio
store too).
"""

from __future__ import annotations

import base64
import contextlib
import errno as errnos
import hashlib
import hmac
import os
import secrets
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

PROBE_TIMEOUT = 5.0
"""Seconds the probe waits for the server, at most (less with a smaller ``connect_timeout``)."""

_PROTOCOL_3 = 196608
_SSL_REQUEST = 80877103
_AUTH_OK, _AUTH_CLEARTEXT, _AUTH_MD5, _AUTH_SASL, _AUTH_SASL_CONTINUE, _AUTH_SASL_FINAL = 0, 3, 5, 10, 11, 12


@dataclass(frozen=True, slots=True)
class StartupFailure:
    """What the probe learnt: the server's SQLSTATE, or the socket's errno (no server)."""

    host: str
    port: str
    user: str
    database: str
    sqlstate: str | None = None
    errno: int | None = None

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}" if not self.host.startswith("/") else self.host


class _Unprobed(Exception):
    """The probe cannot tell (a setting it does not speak, an unexpected reply)."""


def _options(pgconn: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for option in getattr(pgconn, "info", None) or ():
        value = getattr(option, "val", None)
        if value is not None:
            out[option.keyword.decode()] = value.decode("utf-8", "replace")
    return out


def startup_failure(pgconn: Any) -> StartupFailure | None:
    """Ask the server why a connection with ``pgconn``'s settings is refused.

    ``pgconn``: the (finished) libpq connection psycopg attaches to its error. Returns
    None when the probe cannot tell, or the server now accepts the connection.
    """
    opts = _options(pgconn)
    host = opts.get("hostaddr") or opts.get("host") or "/var/run/postgresql"
    port = opts.get("port") or "5432"
    if (
        "," in host
        or "," in port
        or opts.get("sslcert")
        or opts.get("gssencmode") == "require"
        # Authentication the probe could not honour as libpq would: say nothing.
        or opts.get("channel_binding") == "require"
        or opts.get("require_auth")
    ):
        return None
    user = opts.get("user") or ""
    database = opts.get("dbname") or user
    password = getattr(pgconn, "password", b"") or b""
    shown_host = opts.get("host") or host
    try:
        timeout = min(PROBE_TIMEOUT, float(opts.get("connect_timeout") or PROBE_TIMEOUT) or PROBE_TIMEOUT)
    except ValueError:
        timeout = PROBE_TIMEOUT
    found = StartupFailure(host=shown_host, port=port, user=user, database=database)
    try:
        sock = _open(host, port, timeout)
    except OSError as exc:
        code = exc.errno
        if code is None:
            code = errnos.ETIMEDOUT if isinstance(exc, TimeoutError) else errnos.EHOSTUNREACH
        return StartupFailure(**{**_fields(found), "errno": code})
    try:
        with contextlib.closing(sock):
            wrapped = _tls(sock, opts, shown_host)
            with contextlib.closing(wrapped):
                sqlstate = _startup(_Wire(wrapped), user, database, password)
    except Exception:  # the probe only adds precision: any failure of its own says nothing
        return None
    if sqlstate is None:
        return None
    return StartupFailure(**{**_fields(found), "sqlstate": sqlstate})


def _fields(f: StartupFailure) -> dict[str, Any]:
    return {"host": f.host, "port": f.port, "user": f.user, "database": f.database}


def _open(host: str, port: str, timeout: float) -> socket.socket:
    if host.startswith("/"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(os.path.join(host, f".s.PGSQL.{port}"))
        except OSError:
            sock.close()
            raise
        return sock
    return socket.create_connection((host, int(port)), timeout=timeout)


def _tls(sock: socket.socket, opts: dict[str, str], host: str) -> socket.socket:
    mode = opts.get("sslmode") or "prefer"
    if mode in ("disable", "allow"):
        return sock
    sock.sendall(struct.pack("!ii", 8, _SSL_REQUEST))
    answer = sock.recv(1)
    if answer != b"S":
        if mode in ("require", "verify-ca", "verify-full"):
            raise _Unprobed("the server does not speak TLS")
        return sock
    if mode in ("verify-ca", "verify-full"):
        context = ssl.create_default_context(cafile=opts.get("sslrootcert") or None)
        context.check_hostname = mode == "verify-full"
    else:  # prefer / require: encrypted, the server not verified (as libpq does)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context.wrap_socket(sock, server_hostname=host if not host.startswith("/") else None)


class _Wire:
    """Messages of the v3 protocol over one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send(self, kind: bytes, body: bytes) -> None:
        self.sock.sendall(kind + struct.pack("!i", len(body) + 4) + body)

    def _exactly(self, n: int) -> bytes:
        chunks = b""
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise _Unprobed("the server closed the connection")
            chunks += chunk
        return chunks

    def receive(self) -> tuple[bytes, bytes]:
        kind = self._exactly(1)
        (length,) = struct.unpack("!i", self._exactly(4))
        if not 4 <= length <= 1 << 20:
            raise _Unprobed("not a PostgreSQL server")
        return kind, self._exactly(length - 4)


def _sqlstate(body: bytes) -> str | None:
    for field in body.split(b"\x00"):
        if field[:1] == b"C":
            return field[1:].decode("ascii", "replace")
    return None


def _startup(wire: _Wire, user: str, database: str, password: bytes) -> str | None:
    """The SQLSTATE the server refuses the startup with; None when it accepts it."""
    params = b"".join(
        k.encode() + b"\x00" + v.encode() + b"\x00"
        for k, v in (("user", user), ("database", database), ("application_name", "symfonic-store probe"))
    )
    body = struct.pack("!i", _PROTOCOL_3) + params + b"\x00"
    wire.sock.sendall(struct.pack("!i", len(body) + 4) + body)
    scram: _Scram | None = None
    while True:
        kind, payload = wire.receive()
        if kind == b"E":
            return _sqlstate(payload)
        if kind in (b"Z", b"K", b"S", b"N", b"v"):
            if kind == b"Z":  # ready for query: the server accepts it now
                with contextlib.suppress(OSError):
                    wire.send(b"X", b"")
                return None
            continue
        if kind != b"R":
            raise _Unprobed(f"unexpected message {kind!r}")
        (auth,) = struct.unpack("!i", payload[:4])
        if auth == _AUTH_OK or auth == _AUTH_SASL_FINAL:
            continue
        if not password:
            raise _Unprobed("the server asks for a password and none was given")
        if auth == _AUTH_CLEARTEXT:
            wire.send(b"p", password + b"\x00")
        elif auth == _AUTH_MD5:
            inner = hashlib.md5(password + user.encode()).hexdigest().encode()
            wire.send(b"p", b"md5" + hashlib.md5(inner + payload[4:8]).hexdigest().encode() + b"\x00")
        elif auth == _AUTH_SASL:
            if b"SCRAM-SHA-256\x00" not in payload[4:] or not password.isascii():
                # (libpq SASLprep-normalises a non-ASCII password; the probe does not)
                raise _Unprobed("no SASL mechanism the probe speaks")
            scram = _Scram(password)
            first = scram.client_first()
            wire.send(b"p", b"SCRAM-SHA-256\x00" + struct.pack("!i", len(first)) + first)
        elif auth == _AUTH_SASL_CONTINUE and scram is not None:
            wire.send(b"p", scram.client_final(payload[4:]))
        else:
            raise _Unprobed(f"authentication method {auth} is not one the probe speaks")


class _Scram:
    """The client side of SCRAM-SHA-256 (RFC 5802/7677), without channel binding."""

    def __init__(self, password: bytes) -> None:
        self.password = password
        self.nonce = base64.b64encode(secrets.token_bytes(18))
        self.first_bare = b"n=,r=" + self.nonce

    def client_first(self) -> bytes:
        return b"n,," + self.first_bare

    def client_final(self, server_first: bytes) -> bytes:
        attrs = dict(part.split(b"=", 1) for part in server_first.split(b","))
        nonce, salt, rounds = attrs[b"r"], base64.b64decode(attrs[b"s"]), int(attrs[b"i"])
        if not nonce.startswith(self.nonce):
            raise _Unprobed("the server's SCRAM nonce does not extend the client's")
        salted = hashlib.pbkdf2_hmac("sha256", self.password, salt, rounds)
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = b"c=biws,r=" + nonce
        message = self.first_bare + b"," + server_first + b"," + without_proof
        signature = hmac.new(stored_key, message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return without_proof + b",p=" + base64.b64encode(proof)


__all__ = ["StartupFailure", "startup_failure"]
