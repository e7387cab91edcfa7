"""The service while its database is unreachable (SPEC §12): a real ``symfonic-store serve``
process on a private PostgreSQL cluster, whose server is stopped under it, and the app
in-process on both backends (a PostgreSQL address nobody answers at; a SQLite file another
process holds locked past the busy timeout).

Every route answers 503 with ``Retry-After`` (JSON for the API, a page for the inbox),
never 500; keep-alive connections are answered, never reset; an open event stream ends
cleanly. Once the server is back, the routes answer again and a stream reopened with
``Last-Event-ID`` delivers every event after it, none skipped. Nothing sleeps: each wait
polls a real condition, a bounded number of times.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa
from pgcluster import PrivateCluster, free_port, unavailable_reason
from service_rig import Served, answer_path, digest_of, mint, serve, write_tokens
from starlette.testclient import TestClient

from symfonic_store import InterruptStore
from symfonic_store.server import TokenAuth, create_app

TOKEN = "token-ops"
PRINCIPALS = {"ops": (TOKEN, ["approver"])}
RECOVERY_TRIES = 50
"""The most requests a route gets to answer again once the server is back."""


@dataclass
class Rig:
    cluster: PrivateCluster
    url: str
    server: Served
    store: InterruptStore


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """A private cluster, a migrated database on it and a service process serving it."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    folder: Path = tmp_path_factory.mktemp("unavailable")
    cluster = PrivateCluster()
    try:
        cluster.init()
        cluster.start()
        name = f"u_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(cluster.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        admin.dispose()
        url = str(sa.make_url(cluster.url).set(database=name))
        store = InterruptStore(url)
        store.setup()
        tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
        with serve(url, "--tokens", str(tokens), "--rate-limit", "off") as server:
            yield Rig(cluster, url, server, store)
        store.close()
    finally:
        cluster.destroy()


def read_stream(lines: Iterator[str], *, until: int | None) -> list[int]:
    """The event ids of an open stream's lines, up to ``until`` (or until it ends)."""
    seen: list[int] = []
    for line in lines:
        if line.startswith("id: "):
            seen.append(int(line[4:]))
            if until is not None and seen[-1] >= until:
                break
    return seen


def csrf_of(page: httpx.Response) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert match is not None, page.text
    return match.group(1)


def api_and_inbox_routes(t: str, i: str, digest: str, csrf: str) -> list[tuple[str, str, dict[str, object], bool]]:
    """Every route that reads or writes the store: (method, path, request options, is the API)."""
    one = f"{quote(t, safe='')}/{quote(i, safe='')}"
    return [
        ("GET", "/api/interrupts", {}, True),
        ("GET", f"/api/interrupts/{one}", {}, True),
        ("POST", answer_path(t, i), {"json": {"response": {"approved": True}, "digest": digest}}, True),
        ("GET", "/api/audit", {}, True),
        ("GET", f"/api/threads/{quote(t, safe='')}/events", {}, True),
        ("GET", "/api/events", {}, True),
        ("GET", "/api/events/stream", {}, True),
        ("GET", "/metrics", {}, True),
        ("GET", "/healthz", {}, True),
        ("GET", "/", {}, False),
        ("GET", "/audit", {}, False),
        ("GET", f"/interrupts/{one}", {}, False),
        ("POST", f"/interrupts/{one}/answer", {"data": {"decision": "approve", "digest": digest, "csrf": csrf}}, False),
        ("GET", f"/threads/{quote(t, safe='')}", {}, False),
    ]


@pytest.mark.postgres
def test_every_route_answers_503_with_retry_after_while_the_database_is_down_and_the_stream_resumes(
    rig: Rig,
) -> None:
    """With the server stopped: 503 + Retry-After on every route over kept-alive
    connections (no reset), the open stream ends; back up: 200 again, nothing skipped."""
    t = f"down-{uuid.uuid4().hex[:8]}"
    first = mint(rig.store, t)
    second = mint(rig.store, t)
    last = rig.store.events(after=0, limit=1000)[-1].position
    api = rig.server.client(TOKEN)
    browser = rig.server.client(follow_redirects=False)
    streamer = rig.server.client(TOKEN)
    try:
        form = browser.get("/signin")
        assert browser.post("/signin", data={"token": TOKEN, "csrf": csrf_of(form)}).status_code == 303
        page = browser.get(f"/interrupts/{quote(t, safe='')}/{quote(first, safe='')}")
        assert page.status_code == 200
        csrf = csrf_of(page)
        digest = digest_of(rig.store, t, first)
        assert api.get("/api/interrupts").status_code == 200  # the connection is open

        with streamer.stream("GET", "/api/events/stream", params={"after": "0"}) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            assert read_stream(lines, until=last)[-1] == last
            rig.cluster.crash()
            # The stream notices at its next look and finishes its response: iterating
            # ends without a protocol error (a reset would raise here).
            assert read_stream(lines, until=None) == []

        routes = api_and_inbox_routes(t, first, digest, csrf) + [
            ("GET", "/api/events/stream", {"headers": {"Last-Event-ID": str(last)}}, True),
        ]
        # Each route twice, on the same two kept-alive connections: a connection the
        # server dropped after an answer would fail the second request.
        for _ in range(2):
            for method, path, extra, is_api in routes:
                client = api if is_api else browser
                response = client.request(method, path, **extra)  # type: ignore[arg-type]
                where = f"{method} {path}"
                assert response.status_code == 503, (where, response.status_code, response.text)
                assert response.headers["retry-after"].isdigit(), where
                if is_api:
                    assert response.headers["content-type"].startswith("application/json"), where
                    assert response.json()["error"], where
                else:
                    assert response.headers["content-type"].startswith("text/html"), where
                    assert "not available" in response.text, where
        assert rig.cluster.is_running() is False

        rig.cluster.start()
        for _ in range(RECOVERY_TRIES):
            if api.get("/healthz").status_code == 200:
                break
        assert api.get("/healthz").json() == {"ok": True}
        for method, path, extra, is_api in routes:
            if method == "POST" or path == "/api/events/stream":
                continue
            client = api if is_api else browser
            assert client.request(method, path, **extra).status_code == 200, path  # type: ignore[arg-type]

        # Events appended while no stream was open, then the stream reopened from the
        # last id the client saw: every one of them, in order, none skipped.
        # (A store of the test's own: this one's pooled connections died with the server.)
        with InterruptStore(rig.url) as writer:
            again = {"response": {"approved": True}, "digest": digest_of(writer, t, second)}
            answered = api.post(answer_path(t, second), json=again)
            assert answered.status_code == 200, answered.text
            mint(writer, f"{t}-after")
            expected = [e.position for e in writer.events(after=last, limit=1000)]
        assert len(expected) == 2
        with streamer.stream("GET", "/api/events/stream", headers={"Last-Event-ID": str(last)}) as stream:
            assert stream.status_code == 200
            assert read_stream(stream.iter_lines(), until=expected[-1]) == expected
    finally:
        if not rig.cluster.is_running():
            rig.cluster.start()
        for client in (api, browser, streamer):
            client.close()
    log = rig.server.logs()
    assert "Traceback" not in log, log
    assert json.dumps(TOKEN) not in log and TOKEN not in log


@pytest.mark.postgres
def test_the_open_inbox_comes_back_live_after_the_database_was_down(rig: Rig, browser: Any) -> None:
    """An inbox page open through an outage: its stream ends, reopening it gets 503, and
    once the database is back the page opens a new stream and shows what arrives, no reload."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(rig.server.url + "/")
        page.fill("#token", TOKEN)
        page.click("form[action='/signin'] button[type=submit]")
        page.wait_for_selector("#live-status.on")
        with page.expect_response(lambda r: "/api/events/stream" in r.url and r.status == 503):
            rig.cluster.crash()
        # The browser's stream was refused while the server was down (an EventSource
        # does not retry after a 503 by itself); now the database comes back.
        rig.cluster.start()
        t = f"back-{uuid.uuid4().hex[:8]}"
        with InterruptStore(rig.url) as writer:
            mint(writer, t)
        page.locator(f"li.interrupt[data-thread='{t}']").wait_for(state="visible")
        page.wait_for_selector("#live-status.on")
    finally:
        if not rig.cluster.is_running():
            rig.cluster.start()
        context.close()


# --- in-process, on both backends ----------------------------------------------------


def test_the_app_answers_503_with_retry_after_on_every_route_when_its_database_cannot_answer(
    migrated_url: str, backend: str, tmp_path: Path
) -> None:
    """create_app over a store whose database cannot answer: 503, Retry-After and the
    API's JSON or the inbox's page on every route, never 500; nothing was written."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"ops": {"token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), "roles": []}}))
    t = f"locked-{uuid.uuid4().hex[:8]}"
    with InterruptStore(migrated_url) as setup:
        setup.setup()
        i = mint(setup, t)
        digest = digest_of(setup, t, i)
        before = len(setup.events(after=0, limit=1000))
    lock: sqlite3.Connection | None = None
    if backend == "sqlite":
        # Another process holds the file exclusively: every connection the store opens
        # waits out its (short) timeout and is refused.
        lock = sqlite3.connect(sa.make_url(migrated_url).database or "", isolation_level=None)
        lock.execute("PRAGMA locking_mode=EXCLUSIVE")
        lock.execute("BEGIN EXCLUSIVE")
        down = f"{migrated_url}?timeout=0.05"
    else:
        down = sa.make_url(migrated_url).set(port=free_port()).render_as_string(hide_password=False)
    try:
        with InterruptStore(down, busy_timeout=0.05) as store:
            client = TestClient(create_app(store, auth=TokenAuth(tokens)), raise_server_exceptions=False)
            form = client.get("/signin")
            signed = client.post("/signin", data={"token": TOKEN, "csrf": csrf_of(form)}, follow_redirects=False)
            assert signed.status_code == 303
            csrf = csrf_of(client.get("/audit"))  # the sign-out form of the 503 page
            for method, path, extra, is_api in api_and_inbox_routes(t, i, digest, csrf):
                headers = {"Authorization": f"Bearer {TOKEN}"} if is_api else {}
                response = client.request(method, path, headers=headers, **extra)  # type: ignore[arg-type]
                where = f"{method} {path}"
                assert response.status_code == 503, (where, response.status_code, response.text)
                assert response.headers["retry-after"].isdigit(), where
                if is_api:
                    assert response.json()["error"], where
                else:
                    assert response.headers["content-type"].startswith("text/html"), where
                    assert "not available" in response.text, where
                    assert down not in response.text, where
    finally:
        if lock is not None:
            lock.rollback()
            lock.close()
    with InterruptStore(migrated_url) as after:
        assert len(after.events(after=0, limit=1000)) == before


def test_a_last_resort_500_tells_the_client_the_connection_closes(store: InterruptStore, tmp_path: Path) -> None:
    """An error nobody mapped is a 500 saying ``Connection: close`` (the server drops the
    connection after it), so a keep-alive client opens a new one instead of being reset."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"ops": {"token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), "roles": []}}))

    def broken(**_: object) -> None:
        raise RuntimeError("a bug")

    store.audit = broken  # type: ignore[method-assign]
    client = TestClient(create_app(store, auth=TokenAuth(tokens)), raise_server_exceptions=False)
    response = client.get("/api/audit", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 500
    assert response.headers["connection"] == "close"
    assert response.json() == {"error": "unexpected RuntimeError: see the server log"}
    healthy = client.get("/api/events", headers={"Authorization": f"Bearer {TOKEN}"})
    assert healthy.status_code == 200 and "connection" not in healthy.headers
