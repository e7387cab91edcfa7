"""The factory's configuration, and the Agent Servers that authenticate nobody (SPEC §13).

Two servers for the module, on SQLite, each started once: one with no auth configured
(the empty identity) that loads the factory by a ``./file.py:attr`` path, and the project
docs/agent-server.md shows, as it is (its ``langgraph.json`` sets ``"disable_studio_auth": true``; its
``auth.py`` knows a bearer token and Agent Inbox's ``x-api-key``). The factory's settings and the
asyncio store's first schema check under LangGraph's blocking-call detector need no server.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_server_rig import (
    AgentServer,
    agent_server,
    require_cli,
    served,
    server_env,
    store_database,
)

from symfonic_store import AsyncInterruptStore, InterruptStore, InvalidInputError
from symfonic_store import agent_server as factory
from symfonic_store.db import migrate
from symfonic_store.events import MINTED, RESUMED

FILE_FACTORY = "from symfonic_store.agent_server import checkpointer\n"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentServer, InterruptStore]]:
    """No auth configured; the factory reached through ``./ckpt.py:checkpointer``."""
    folder = tmp_path_factory.mktemp("agent-server-open")
    (folder / "project").mkdir()
    (folder / "project" / "ckpt.py").write_text(FILE_FACTORY, encoding="utf-8")
    with served("sqlite", folder, auth=None, checkpointer="./ckpt.py:checkpointer",
                ttl=3600) as (running, url):
        store = InterruptStore(url)
        try:
            yield running, store
        finally:
            store.close()


DOCS = Path(__file__).resolve().parents[2] / "docs" / "agent-server.md"


def docs_files() -> dict[str, str]:
    """The files docs/agent-server.md shows (a fence after ``<!-- file: NAME -->``)."""
    found = re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    return dict(found)


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentServer, InterruptStore]]:
    """The project docs/agent-server.md shows, as it is (``disable_studio_auth``: true)."""
    require_cli()
    folder = tmp_path_factory.mktemp("agent-server-docs")
    project = folder / "project"
    project.mkdir()
    for name, text in docs_files().items():
        (project / name).write_text(text, encoding="utf-8")
    with store_database("sqlite", folder) as url:
        with agent_server(project / "langgraph.json", server_env(url)) as running:
            store = InterruptStore(url)
            try:
                yield running, store
            finally:
                store.close()


def _run(client: Any, actor: str | None = None) -> tuple[str, str]:
    thread_id = str(client.threads.create(metadata={"test": uuid.uuid4().hex})["thread_id"])
    config = {"configurable": {"actor": actor}} if actor is not None else None
    out = client.runs.wait(thread_id, "agent", input={"amount": 7}, config=config)
    return thread_id, str(out["__interrupt__"][0]["id"])


def test_without_auth_the_identity_is_empty_and_the_claim_stands(
    open_server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = open_server
    client = running.client()
    thread_id, interrupt_id = _run(client, actor="erin")
    client.runs.wait(thread_id, "agent", command={"resume": {interrupt_id: {"approved": False}}},
                     config={"configurable": {"actor": "frank"}})
    events = store.history(thread_id)
    (mint,) = [e for e in events if e.type == MINTED]
    (answer,) = [e for e in events if e.type == RESUMED]
    assert (mint.actor, answer.actor) == ("erin", "frank")
    assert answer.data["decision"] == "reject"
    for event in (mint, answer):
        assert "authenticated_by" not in event.data
        assert "claimed_actor" not in event.data


def test_without_auth_a_client_cannot_send_the_servers_user_key(
    open_server: tuple[AgentServer, InterruptStore],
) -> None:
    """The server strips the reserved key from the request: no claim becomes authenticated."""
    running, store = open_server
    client = running.client()
    thread_id = str(client.threads.create()["thread_id"])
    client.runs.wait(thread_id, "agent", input={"amount": 1},
                     config={"configurable": {"langgraph_auth_user_id": "root", "actor": "erin"}})
    (mint,) = [e for e in store.history(thread_id) if e.type == MINTED]
    assert mint.actor == "erin"
    assert "authenticated_by" not in mint.data


def test_the_server_loads_the_factory_from_a_file_path_too(
    open_server: tuple[AgentServer, InterruptStore],
) -> None:
    running, store = open_server
    assert "Using custom checkpointer: AsyncStoreCheckpointer" in running.logs()
    thread_id, interrupt_id = _run(running.client())
    assert [p["interrupt_id"] for p in store.list_pending() if p["thread_id"] == thread_id] == [interrupt_id]


def test_the_docs_project_names_the_dotted_factory_and_disables_studio_auth() -> None:
    files = docs_files()
    assert set(files) == {"agent.py", "auth.py", "langgraph.json"}
    config = json.loads(files["langgraph.json"])
    assert config["checkpointer"]["path"] == "symfonic_store.agent_server.checkpointer"
    assert config["auth"]["disable_studio_auth"] is True


def test_disable_studio_auth_refuses_studios_header_without_credentials(
    strict_server: tuple[AgentServer, InterruptStore],
) -> None:
    from langgraph_sdk.errors import APIStatusError

    running, _ = strict_server
    with pytest.raises(APIStatusError) as refused:
        running.client(headers={"x-auth-scheme": "langsmith"}).threads.create()
    assert refused.value.status_code in (401, 403)


def test_the_docs_walkthrough_records_alice_and_bob(
    strict_server: tuple[AgentServer, InterruptStore],
) -> None:
    """docs/agent-server.md's "Run it and drive it", on the docs' own project."""
    running, store = strict_server
    alice, bob = running.client("tok-alice"), running.client("tok-bob")
    thread = alice.threads.create()
    out = alice.runs.wait(thread["thread_id"], "agent", input={"amount": 42})
    interrupt_id = out["__interrupt__"][0]["id"]
    bob.runs.wait(thread["thread_id"], "agent", command={"resume": {interrupt_id: {"approved": True}}})
    (record,) = store.audit(thread_id=thread["thread_id"])
    assert (record.requested_by, record.actor, record.authenticated_by, record.decision) == (
        "alice", "bob", "agent-server", "approve")


def _inbox(running: AgentServer, key: str) -> Any:
    """A ``langgraph-sdk`` client sending ``key`` as Agent Inbox sends its "LangSmith API
    Key": ``x-api-key`` (the SDK reserves that header for its ``api_key``)."""
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=running.url, api_key=key, timeout=60)


def _inbox_accept(client: Any, thread_id: str) -> None:
    """Agent Inbox's Submit of an accept, as it sends it (SPEC §13)."""
    for _ in client.runs.stream(thread_id, "agent", command={"resume": [{"type": "accept", "args": None}]},
                                stream_mode="events"):
        pass


def test_agent_inbox_with_its_api_key_lists_and_answers_as_the_keys_user(
    strict_server: tuple[AgentServer, InterruptStore],
) -> None:
    """The docs' auth.py accepts what Agent Inbox sends (``x-api-key``, its "LangSmith API
    Key"): the inbox lists the interrupted thread, and its accept is recorded as bob's."""
    running, store = strict_server
    thread_id, _ = _run(running.client("tok-alice"))
    inbox = _inbox(running, "key-bob")
    listed = inbox.threads.search(status="interrupted", limit=100)
    assert thread_id in {t["thread_id"] for t in listed}
    _inbox_accept(inbox, thread_id)
    (record,) = store.audit(thread_id=thread_id)
    assert (record.requested_by, record.outcome, record.actor, record.authenticated_by) == (
        "alice", "resumed", "bob", "agent-server")


def test_agent_inbox_with_a_wrong_key_is_401_and_nothing_is_answered(
    strict_server: tuple[AgentServer, InterruptStore],
) -> None:
    """A key the handler does not know is 401, listing or answering; the interrupt stays open."""
    from langgraph_sdk.errors import APIStatusError

    running, store = strict_server
    thread_id, interrupt_id = _run(running.client("tok-alice"))
    inbox = _inbox(running, "key-mallory")
    with pytest.raises(APIStatusError) as listing:
        inbox.threads.search(status="interrupted")
    with pytest.raises(APIStatusError) as answering:
        _inbox_accept(inbox, thread_id)
    assert (listing.value.status_code, answering.value.status_code) == (401, 401)
    assert [p["interrupt_id"] for p in store.list_pending() if p["thread_id"] == thread_id] == [interrupt_id]


def test_agent_inbox_without_auth_is_recorded_with_no_actor_at_all(
    open_server: tuple[AgentServer, InterruptStore],
) -> None:
    """With no auth configured Agent Inbox names nobody: its accept has actor null and no
    ``authenticated_by`` (what docs/agent-server.md's Agent Inbox section says)."""
    running, store = open_server
    inbox = _inbox(running, "anything")
    thread_id, _ = _run(inbox)
    _inbox_accept(inbox, thread_id)
    (answer,) = [e for e in store.history(thread_id) if e.type == RESUMED]
    assert answer.actor is None and "authenticated_by" not in answer.data


# --- the factory, without a server ---------------------------------------------------------


def test_settings_read_the_url_and_the_ttl() -> None:
    found = factory.settings({"SYMFONIC_STORE_URL": " sqlite:///a.db ", "SYMFONIC_STORE_TTL": "90"})
    assert (found.url, found.ttl_seconds) == ("sqlite:///a.db", 90.0)
    assert factory.settings({"SYMFONIC_STORE_URL": "sqlite:///a.db"}).ttl_seconds is None


@pytest.mark.parametrize("environ, names", [
    ({}, "SYMFONIC_STORE_URL"),
    ({"SYMFONIC_STORE_URL": "  "}, "SYMFONIC_STORE_URL"),
    ({"SYMFONIC_STORE_URL": "sqlite:///a.db", "SYMFONIC_STORE_TTL": "soon"}, "SYMFONIC_STORE_TTL"),
    ({"SYMFONIC_STORE_URL": "sqlite:///a.db", "SYMFONIC_STORE_TTL": "-1"}, "SYMFONIC_STORE_TTL"),
    ({"SYMFONIC_STORE_URL": "sqlite:///a.db", "SYMFONIC_STORE_TTL": "inf"}, "SYMFONIC_STORE_TTL"),
])
def test_settings_refuse_what_is_missing_or_not_seconds(environ: dict[str, str], names: str) -> None:
    with pytest.raises(InvalidInputError, match=names):
        factory.settings(environ)


async def test_the_factory_migrates_an_empty_database_and_applies_the_ttl(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYMFONIC_STORE_URL", db_url)
    monkeypatch.setenv("SYMFONIC_STORE_TTL", "120")
    async with factory.checkpointer() as saver:
        assert saver.store.ttl_seconds == 120.0
        assert await saver.store.list_pending() == []
        config = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
        assert await saver.aget_tuple(config) is None


async def test_the_asyncio_stores_first_schema_check_reads_no_file_on_the_loop(
    migrated_url: str,
) -> None:
    """A store nobody set up in this process checks its schema on first use: Alembic's
    scripts are read in a thread, so LangGraph's blocking-call detector lets it pass."""
    blockbuster = pytest.importorskip("blockbuster", reason="blockbuster comes with langgraph-api")
    migrate.head_revision.cache_clear()
    migrate.known_revisions.cache_clear()
    store = AsyncInterruptStore(migrated_url)
    detector = blockbuster.BlockBuster()
    for name in ("os.stat", "io.BufferedReader.read", "io.TextIOWrapper.read", "threading.Lock.acquire"):
        detector.functions.pop(name).deactivate()  # as langgraph dev allows them
    detector.activate()
    try:
        assert await store.list_pending() == []
    finally:
        detector.deactivate()
        await store.aclose()


def test_the_detector_would_catch_the_check_on_the_loop(migrated_url: str) -> None:
    """The test above can fail: Alembic's script directory read on the loop is refused."""
    blockbuster = pytest.importorskip("blockbuster", reason="blockbuster comes with langgraph-api")
    migrate.head_revision.cache_clear()
    migrate.known_revisions.cache_clear()

    async def on_the_loop() -> None:
        migrate.head_revision()

    detector = blockbuster.BlockBuster()
    detector.activate()
    try:
        with pytest.raises(blockbuster.BlockingError):
            asyncio.run(on_the_loop())
    finally:
        detector.deactivate()
        migrate.head_revision.cache_clear()
