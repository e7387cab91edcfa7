"""Why a PostgreSQL connection could not be opened, by code: the settings the server
refused (a configuration error) or a server that is unreachable.

psycopg gives no SQLSTATE for a refused connection; the startup probe
(:mod:`symfonic_store.db.pgstartup`) asks the server for it.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Any

from ...errors import DatabaseConfigurationError, DatabaseError, DatabaseUnreachableError

if TYPE_CHECKING:
    from ..pgstartup import StartupFailure

PG_REFUSED_SETTINGS = {
    "3D000": "invalid_catalog_name",
    "28000": "invalid_authorization_specification",
    "28P01": "invalid_password",
    "42501": "insufficient_privilege",
}
"""SQLSTATEs of a server refusing a connection's settings (at connect): a configuration error."""


def _refused_settings(sqlstate: str, failure: StartupFailure | None) -> DatabaseConfigurationError:
    where = f" at {failure.where}" if failure is not None else ""
    database = repr(failure.database) if failure is not None else "named in the URL"
    role = repr(failure.user) if failure is not None else "named in the URL"
    what = {
        "3D000": f"the database {database} does not exist on the PostgreSQL server{where}: "
        "check the database name in the URL, or create the database",
        "28P01": f"the PostgreSQL server{where} refused the password of role {role}: check "
        "the password in the URL (or the password file)",
        "42501": f"role {role} may not connect to the database {database}{where}: grant it "
        "CONNECT, or use another role",
    }.get(
        sqlstate,
        f"the PostgreSQL server{where} refused role {role}: the role does not exist or may "
        "not connect from here (pg_hba.conf); check the user name in the URL",
    )
    label = PG_REFUSED_SETTINGS.get(sqlstate, "invalid_authorization_specification")
    return DatabaseConfigurationError(
        f"{what} [{sqlstate} {label}]; this is a configuration error, not a passing fault "
        "(no connection was opened)",
        code=sqlstate,
    )


def _unreachable(failure: StartupFailure) -> DatabaseUnreachableError:
    assert failure.errno is not None
    why = os.strerror(failure.errno) if failure.errno > 0 else "its host name does not resolve"
    name = errno.errorcode.get(failure.errno)
    return DatabaseUnreachableError(
        f"the PostgreSQL server at {failure.where} is unreachable ({why}"
        f"{f' [{name}]' if name else ''}): check that it is running and that the URL's host "
        "and port are right; no connection was opened, so the transaction did not start and "
        "nothing of it was written: retry once it answers",
        errno=failure.errno,
    )


def _never_connected(exc: BaseException) -> Any | None:
    """The libpq connection of a psycopg error raised while connecting, else None.

    Connecting runs no statement, and libpq's backend process id stays 0 until the
    server has accepted the session (a connection lost later keeps its id).
    """
    if getattr(exc, "statement", None) is not None:
        return None
    pgconn = getattr(getattr(exc, "orig", None), "pgconn", None)
    if pgconn is None or getattr(pgconn, "backend_pid", None) != 0:
        return None
    return pgconn


def connect_failure(exc: BaseException) -> DatabaseError | None:
    """A PostgreSQL connection that could not be opened, told by code: the settings it
    was refused for (a configuration error) or a server that is unreachable; None when
    ``exc`` is something else, or nothing says which.

    psycopg gives no SQLSTATE for a refused connection; the startup probe
    (:mod:`symfonic_store.db.pgstartup`) asks the server for it.
    """
    pgconn = _never_connected(exc)
    if pgconn is None:
        return None
    sqlstate = getattr(getattr(exc, "orig", None) or exc, "sqlstate", None)
    if isinstance(sqlstate, str):  # a driver (or a release) that tells the code itself
        return _refused_settings(sqlstate, None) if sqlstate in PG_REFUSED_SETTINGS else None
    from ..pgstartup import startup_failure  # only on this failure path

    failure = startup_failure(pgconn)
    if failure is None:
        return None
    if failure.errno is not None:
        return _unreachable(failure)
    if failure.sqlstate is not None and (
        failure.sqlstate in PG_REFUSED_SETTINGS or failure.sqlstate.startswith("28")
    ):
        return _refused_settings(failure.sqlstate, failure)
    return None
