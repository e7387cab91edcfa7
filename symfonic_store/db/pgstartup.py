"""Why a PostgreSQL connection could not be opened, by code: the startup probe.

libpq reports a refused connection (no such database, no such role, a wrong password)
as text only: the server's ErrorResponse carries the SQLSTATE, but libpq keeps it to
itself, and psycopg's ``OperationalError`` from ``connect`` has ``sqlstate`` None. The
text is worded in the server's ``lc_messages`` language, so the store does not read it.

When a connection could not be opened, :func:`startup_failure` asks the server again
with `pg8000 <https://github.com/tlocke/pg8000>`_ (a maintained pure-Python driver,
installed with the ``postgres`` extra), with the same host, port, user, database and
password, and reads the SQLSTATE (field ``C``) of the server's ErrorResponse, which
pg8000 keeps. A server that cannot be reached at all gives the socket's ``errno``.
Nothing is logged or returned that holds the password.

The probe asks over TLS when libpq's ``sslmode`` asks for it (verifying the server the way
``verify-ca`` / ``verify-full`` do), and does not ask at all with a client certificate,
several hosts, GSS encryption, ``channel_binding=require`` or ``require_auth``, or
without pg8000: it says nothing rather than something untrue, or less safe than libpq.
It runs only on this failure path and waits at most :data:`PROBE_TIMEOUT` seconds
(blocking, in the asyncio store too).
"""

from __future__ import annotations

import errno as errnos
import ssl
from dataclasses import dataclass
from typing import Any

# A constant and a frozen report, alike others in shape only.
PROBE_TIMEOUT = 5.0
"""Seconds the probe waits for the server, at most (less with a smaller ``connect_timeout``)."""


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
    try:
        from pg8000 import exceptions as pg8000_errors
        from pg8000.native import Connection
    except ImportError:  # the probe only adds precision: without pg8000 it says nothing
        return None
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
    password = (getattr(pgconn, "password", b"") or b"").decode("utf-8", "replace") or None
    shown_host = opts.get("host") or host
    try:
        timeout = min(PROBE_TIMEOUT, float(opts.get("connect_timeout") or PROBE_TIMEOUT) or PROBE_TIMEOUT)
        where: dict[str, Any] = (
            {"unix_sock": f"{host}/.s.PGSQL.{port}"} if host.startswith("/") else {"host": host, "port": int(port)}
        )
    except ValueError:
        return None

    def found(*, sqlstate: str | None = None, errno: int | None = None) -> StartupFailure:
        return StartupFailure(shown_host, port, user, database, sqlstate=sqlstate, errno=errno)

    def ask(context: ssl.SSLContext | None) -> StartupFailure | str | None:
        """What the server says with these TLS settings: a failure, None (nothing to
        tell), "again" (it closed the socket under the probe) or "next" (it refused them)."""
        try:
            Connection(user, database=database, password=password, timeout=timeout, ssl_context=context, **where).close()
        except (pg8000_errors.DatabaseError, pg8000_errors.InterfaceError, OSError) as exc:
            # The server's ErrorResponse; pg8000 then closes the socket the server already
            # closed, and that EPIPE is raised with the ErrorResponse as its context.
            answer = _chained(exc, pg8000_errors.DatabaseError)
            if answer is not None:
                fields = answer.args[0] if answer.args and isinstance(answer.args[0], dict) else {}
                code = fields.get("C")
                return found(sqlstate=str(code)) if code else None
            cause = exc if isinstance(exc, OSError) else (exc.__cause__ or exc.__context__)
            if not isinstance(cause, OSError):
                return "next"  # e.g. the server refuses TLS: the next setting, if any
            if _no_server(cause):
                code = cause.errno
                if code is None:
                    code = errnos.ETIMEDOUT if isinstance(cause, TimeoutError) else errnos.EHOSTUNREACH
                return found(errno=code)
            return "again"  # it answered, then closed the socket (EPIPE, ECONNRESET)
        except Exception:  # the probe only adds precision: any failure of its own says nothing
            return None
        return None  # the server accepts the connection now

    for context in _tls_contexts(opts, shown_host):
        said = ask(context)
        if said == "again":  # seen on Unix sockets while the server sends its answer
            said = ask(context)
        if said == "next":
            continue
        return said if isinstance(said, StartupFailure) else None
    return None


def _chained(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``exc`` or the first exception of ``kind`` in its chain (cause, then context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


_NO_SERVER = frozenset({
    errnos.ECONNREFUSED, errnos.ENOENT, errnos.ETIMEDOUT, errnos.EHOSTUNREACH,
    errnos.ENETUNREACH, errnos.EHOSTDOWN, errnos.EADDRNOTAVAIL,
})
"""Errors of opening the socket: nothing answered. A server that answered and then
closed the socket (EPIPE, ECONNRESET) is not one of them."""


def _no_server(exc: OSError) -> bool:
    return isinstance(exc, TimeoutError) or exc.errno in _NO_SERVER


def _tls_contexts(opts: dict[str, str], host: str) -> list[ssl.SSLContext | None]:
    """The TLS settings to try, in libpq's order for ``sslmode`` (None: no TLS)."""
    mode = opts.get("sslmode") or "prefer"
    if mode in ("disable", "allow") or host.startswith("/"):  # libpq: no TLS over a Unix socket
        return [None]
    if mode in ("verify-ca", "verify-full"):
        context = ssl.create_default_context(cafile=opts.get("sslrootcert") or None)
        context.check_hostname = mode == "verify-full" and not host.startswith("/")
        return [context]
    # prefer / require: encrypted, the server not verified (as libpq does)
    plain = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    plain.check_hostname = False
    plain.verify_mode = ssl.CERT_NONE
    return [plain] if mode == "require" else [plain, None]
