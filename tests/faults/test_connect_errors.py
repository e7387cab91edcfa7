"""A PostgreSQL connection that cannot be opened is told truly, by code (SPEC §12).

A database that does not exist, an unknown role or a refused password is a
configuration error (``DatabaseConfigurationError``, CLI exit 2, no "retry"); a server
that does not answer is unreachable (``DatabaseUnreachableError``, retry later). psycopg
gives no SQLSTATE for a refused connection, so the store asks the server for it (the
startup probe); the tests run against the real server on 127.0.0.1:5432, a port nobody
listens on, a private cluster with password authentication (SCRAM and MD5), and a fake
server whose error text is nonsense but whose code is right.
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli
from graph_rig import ready
from pgcluster import PrivateCluster, free_port, unavailable_reason

from symfonic_store import (
    AsyncInterruptStore,
    DatabaseConfigurationError,
    DatabaseError,
    DatabaseUnreachableError,
    InterruptStore,
)

PASSWORD = "s3cr3t-pw-Zq"
NONSENSE = "blorp quux zzyzx: frobnicated the wibble"

pytestmark = pytest.mark.postgres


def url_with(base: str, **parts: Any) -> str:
    return sa.make_url(base).set(**parts).render_as_string(hide_password=False)


@pytest.fixture
def server_url(postgres_schema_url: str) -> str:
    """The real server's URL (its schema option dropped: these URLs never get that far)."""
    return url_with(postgres_schema_url, query={})


async def failure_of(url: str, kind: str) -> DatabaseError:
    """The store's error for its first call on ``url``, through the sync or asyncio store."""
    store: Any = InterruptStore(url) if kind == "sync" else AsyncInterruptStore(url)
    try:
        with pytest.raises(DatabaseError) as caught:
            await ready(store.list_pending())
    finally:
        await ready(store.aclose() if kind == "async" else store.close())
    return caught.value


def assert_configuration(error: DatabaseError, code: str, *names: str) -> None:
    assert type(error) is DatabaseConfigurationError, error
    assert error.code == code
    text = str(error)
    assert "configuration error" in text and code in text
    assert "retry" not in text.lower()
    assert "nothing of it was written" not in text
    for name in names:
        assert name in text
    assert PASSWORD not in text


KINDS = ["sync", "async"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_database_that_does_not_exist_is_a_configuration_error(server_url: str, kind: str) -> None:
    """3D000 from the real server: named, no retry advice, no password in the message."""
    url = url_with(server_url, database="symfonic_no_such_db", password=PASSWORD)
    assert_configuration(await failure_of(url, kind), "3D000", "'symfonic_no_such_db'", "127.0.0.1:5432")


@pytest.mark.parametrize("kind", KINDS)
async def test_an_unknown_role_is_a_configuration_error(server_url: str, kind: str) -> None:
    """28000 from the real server (trust authentication): the role is named."""
    url = url_with(server_url, username="symfonic_no_such_role")
    assert_configuration(await failure_of(url, kind), "28000", "'symfonic_no_such_role'")


SOCKET_DIR = "/var/run/postgresql"


async def test_over_a_unix_socket_a_configuration_error_is_never_called_unreachable(server_url: str) -> None:
    """Through the server's Unix socket (no TLS there, as libpq does), a missing database and an unknown role are configuration errors every time: a server that closes the socket after its answer is not unreachable."""
    import os

    if not os.path.exists(os.path.join(SOCKET_DIR, ".s.PGSQL.5432")):
        pytest.skip(f"no PostgreSQL socket in {SOCKET_DIR} on this machine")
    base = sa.make_url(server_url).set(host=None, port=None, query={"host": SOCKET_DIR})
    for _ in range(10):
        missing = base.set(database="symfonic_no_such_db").render_as_string(hide_password=False)
        assert_configuration(await failure_of(missing, "sync"), "3D000", "'symfonic_no_such_db'")
        stranger = base.set(username="symfonic_no_such_role").render_as_string(hide_password=False)
        assert_configuration(await failure_of(stranger, "sync"), "28000", "'symfonic_no_such_role'")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_does_not_answer_is_unreachable_and_retryable(server_url: str, kind: str) -> None:
    """Nothing listening on the port: unreachable, by errno, and worth a retry."""
    port = free_port()
    error = await failure_of(url_with(server_url, port=port, password=PASSWORD), kind)
    assert type(error) is DatabaseUnreachableError
    assert error.errno is not None
    text = str(error)
    assert f"127.0.0.1:{port}" in text and "unreachable" in text and "retry" in text
    assert "configuration error" not in text and PASSWORD not in text


def test_the_command_line_exits_2_without_retry_advice_or_password(server_url: str) -> None:
    """`pending` on a missing database, an unknown role, a closed port: exit 2, one line each."""
    missing = url_with(server_url, database="symfonic_no_such_db", password=PASSWORD)
    role = url_with(server_url, username="symfonic_no_such_role", password=PASSWORD)
    closed = url_with(server_url, port=free_port(), password=PASSWORD)
    for url, words in ((missing, "does not exist"), (role, "refused role")):
        result = run_cli("--db", url, "pending")
        line = assert_clean_error(result, 2)
        assert words in line and "configuration error" in line
        assert "retry" not in line.lower()
        assert PASSWORD not in result.stdout + result.stderr
    result = run_cli("--db", closed, "sweep", "--format", "json")
    line = assert_clean_error(result, 2)
    assert "unreachable" in line and PASSWORD not in result.stdout + result.stderr


# --- the code decides, not the text: a fake server ----------------------------------------


def _fake_server(sqlstate: str) -> tuple[int, threading.Thread]:
    """A server that answers every startup with an ErrorResponse: ``sqlstate``, nonsense text."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = int(listener.getsockname()[1])

    def message(body: bytes) -> bytes:
        return b"E" + struct.pack("!i", len(body) + 4) + body

    def serve() -> None:
        with listener:
            listener.settimeout(10)
            for _ in range(2):  # libpq's connection (sslmode=disable), then the probe's
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    (length,) = struct.unpack("!i", conn.recv(4))
                    rest = conn.recv(length - 4)
                    if rest[:4] == struct.pack("!i", 80877103):  # SSLRequest: no TLS here
                        conn.sendall(b"N")
                        (length,) = struct.unpack("!i", conn.recv(4))
                        conn.recv(length - 4)
                    fields = b"SFATAL\x00VFATAL\x00C" + sqlstate.encode() + b"\x00M" + NONSENSE.encode() + b"\x00\x00"
                    conn.sendall(message(fields))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return port, thread


@pytest.mark.parametrize(("sqlstate", "kind"), [("3D000", DatabaseConfigurationError), ("28P01", DatabaseConfigurationError)])
def test_the_servers_code_decides_not_its_words(sqlstate: str, kind: type[DatabaseError]) -> None:
    """A server whose message is nonsense but whose SQLSTATE is right is classified by the code."""
    port, thread = _fake_server(sqlstate)
    with InterruptStore(f"postgresql+psycopg://someone@127.0.0.1:{port}/somewhere?sslmode=disable") as store:
        with pytest.raises(DatabaseError) as caught:
            store.list_pending()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert type(caught.value) is kind and caught.value.code == sqlstate  # type: ignore[attr-defined]


# --- a refused password: a private cluster with password authentication ----------------------


@pytest.fixture(scope="module")
def password_cluster() -> Iterator[PrivateCluster]:
    """A private cluster where ``alice`` logs in with SCRAM-SHA-256 and ``mallory`` with MD5."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    private = PrivateCluster()
    try:
        private.init()
        (private.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            "host all postgres 127.0.0.1/32 trust\n"
            "host all mallory 127.0.0.1/32 md5\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
        )
        private.start()
        admin = sa.create_engine(private.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE ROLE alice LOGIN PASSWORD '{PASSWORD}'")
            conn.exec_driver_sql("SET password_encryption = 'md5'")
            conn.exec_driver_sql(f"CREATE ROLE mallory LOGIN PASSWORD '{PASSWORD}'")
            conn.exec_driver_sql("CREATE DATABASE alices OWNER alice")
        admin.dispose()
        yield private
    finally:
        private.destroy()


@pytest.mark.parametrize("role", ["alice", "mallory"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_password_is_a_configuration_error(
    password_cluster: PrivateCluster, role: str, kind: str
) -> None:
    """28P01 under SCRAM and MD5; with the right password a missing database is 3D000 (the probe authenticated as libpq did)."""
    base = url_with(password_cluster.url, username=role, database="alices")
    wrong = url_with(base, password="not-" + PASSWORD)
    refused = await failure_of(wrong, kind)
    assert_configuration(refused, "28P01", f"'{role}'")
    assert "not-" + PASSWORD not in str(refused)

    missing = url_with(base, password=PASSWORD, database=f"nope_{uuid.uuid4().hex[:6]}")
    assert_configuration(await failure_of(missing, kind), "3D000")

    if role == "alice":  # the right settings work (alice owns the database)
        with InterruptStore(url_with(base, password=PASSWORD)) as store:
            store.setup()
            assert store.list_pending() == []


def test_the_command_line_hides_a_refused_password(password_cluster: PrivateCluster) -> None:
    """`pending` with a wrong password: exit 2, the password named as the thing to check, never shown."""
    wrong = url_with(password_cluster.url, username="alice", database="alices", password=PASSWORD + "x")
    result = run_cli("--db", wrong, "pending")
    line = assert_clean_error(result, 2)
    assert "refused the password of role 'alice'" in line and "retry" not in line.lower()
    assert PASSWORD not in result.stdout + result.stderr
