"""LangGraph's Agent Server as a real process, for the tests of graphs it serves (SPEC §13).

:func:`agent_server` starts ``langgraph dev --no-browser --no-reload`` (the in-memory
runtime, with its default blocking-call check: no ``--allow-blocking``) on 127.0.0.1 on a
free port, in a project folder :func:`write_project` wrote (``langgraph.json``, graph
files, a custom auth handler), waits until it answers ``/ok`` and stops it afterwards.
The store is the one ``symfonic_store.agent_server.checkpointer`` opens from
``SYMFONIC_STORE_URL``. :func:`store_database` gives that database on each backend (a
SQLite file; a PostgreSQL schema of its own, dropped afterwards), empty: the factory
migrates it at start-up, as it would a user's. Start one server per module (a
module-scoped fixture): a start costs seconds.

Without ``langgraph-cli[inmem]`` the tests that use it skip and say why; with ``CI=true``
they fail instead (``.ci/run`` installs the ``[agent-server]`` extra), as the browser tests do.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from conftest import POSTGRES_SKIP_REASON, postgres_base_url, with_search_path

START_TIMEOUT = 120
STOP_TIMEOUT = 20
CHECKPOINTER_PATH = "symfonic_store.agent_server.checkpointer"
"""The factory the package ships, as ``langgraph.json`` names it (the dotted form)."""

TOKENS = {"tok-alice": "alice", "tok-bob": "bob", "tok-carol": "carol"}
"""The bearer tokens the default auth handler knows, and the users they stand for."""

AUTH_SOURCE = f'''
from langgraph_sdk import Auth

auth = Auth()
TOKENS = {TOKENS!r}


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    user = TOKENS.get(token) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
    return user
'''
"""A custom auth handler: a bearer token from :data:`TOKENS` names the user, else 401."""

INTERRUPT_GRAPH = '''
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    amount: int
    answer: Any


def ask(state: State) -> State:
    return {"answer": interrupt({"name": "refund", "amount": state.get("amount")})}


builder = StateGraph(State)
builder.add_node("ask", ask)
builder.add_edge(START, "ask")
builder.add_edge("ask", END)
graph = builder.compile()
'''
"""A graph that pauses once with LangGraph's own ``interrupt()`` and returns the answer."""


def cli_missing() -> str | None:
    """Why the Agent Server cannot be started here, or None."""
    for module, what in (("langgraph_cli", "langgraph-cli"), ("langgraph_api", "langgraph-api"),
                         ("langgraph_runtime_inmem", "langgraph-cli[inmem]"),
                         ("langgraph_sdk", "langgraph-sdk")):
        if importlib.util.find_spec(module) is None:
            return f"{what} is not installed (pip install -e '.[agent-server]')"
    return None


def require_cli() -> None:
    """Skip (fail under ``CI=true``) when the Agent Server cannot be started."""
    reason = cli_missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; in CI the Agent Server tests must run (.ci/run installs the extra)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_project(
    folder: Path,
    *,
    graphs: dict[str, str] | None = None,
    auth: str | None = AUTH_SOURCE,
    checkpointer: str = CHECKPOINTER_PATH,
    disable_studio_auth: bool = False,
    extra: dict[str, Any] | None = None,
) -> Path:
    """A ``langgraph.json`` project in ``folder``: ``graphs`` maps a graph id to the source
    of a module whose ``graph`` is compiled (default: :data:`INTERRUPT_GRAPH` as ``agent``),
    ``auth`` the source of ``auth.py`` (None: no auth configured). Returns the config path."""
    folder.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"dependencies": ["."], "graphs": {}, "checkpointer": {"path": checkpointer}}
    for graph_id, source in (graphs or {"agent": INTERRUPT_GRAPH}).items():
        (folder / f"graph_{graph_id}.py").write_text(source, encoding="utf-8")
        config["graphs"][graph_id] = f"./graph_{graph_id}.py:graph"
    if auth is not None:
        (folder / "auth.py").write_text(auth, encoding="utf-8")
        config["auth"] = {"path": "./auth.py:auth"}
        if disable_studio_auth:
            config["auth"]["disable_studio_auth"] = True
    config.update(extra or {})
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


@dataclass
class AgentServer:
    """A running ``langgraph dev`` process."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def logs(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def client(self, token: str | None = None, headers: dict[str, str] | None = None) -> Any:
        """A ``langgraph-sdk`` sync client of this server, with a bearer token if given."""
        from langgraph_sdk import get_sync_client

        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return get_sync_client(url=self.url, headers=sent, timeout=60)

    def aclient(self, token: str | None = None, headers: dict[str, str] | None = None) -> Any:
        """A ``langgraph-sdk`` async client of this server."""
        from langgraph_sdk import get_client

        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return get_client(url=self.url, headers=sent, timeout=60)


def server_env(store_url: str, ttl: float | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the store's URL and TTL, no tracing, no analytics."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env.pop("SYMFONIC_STORE_TTL", None)
    env.update(
        SYMFONIC_STORE_URL=store_url,
        LANGSMITH_TRACING="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        PYTHONUNBUFFERED="1",
    )
    if ttl is not None:
        env["SYMFONIC_STORE_TTL"] = str(ttl)
    env.update(extra or {})
    return env


@contextmanager
def agent_server(config: Path, env: dict[str, str]) -> Iterator[AgentServer]:
    """``langgraph dev --no-browser --no-reload`` on 127.0.0.1 for ``config``, until the block
    ends; the blocking-call check stays on. Fails with the server's log if it does not start."""
    require_cli()
    port = free_port()
    log_path = config.parent / f"server-{port}.log"
    command = [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--no-reload",
               "--host", "127.0.0.1", "--port", str(port), "--config", str(config)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=config.parent, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = AgentServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        _wait_ready(server)
        yield server
    finally:
        _stop(process)


def _wait_ready(server: AgentServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    with httpx.Client(trust_env=False, timeout=5) as http:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                pytest.fail(f"langgraph dev exited ({server.process.returncode}):\n{server.logs()[-4000:]}")
            try:
                if http.get(f"{server.url}/ok").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            # Polling a process that prints no reliable "ready" line: real time passes here.
            time.sleep(0.2)  # sleep-ok: a real process starting, not domain time
    pytest.fail(f"langgraph dev did not answer /ok in {START_TIMEOUT} s:\n{server.logs()[-4000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)  # the server's own session: it and its workers
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def store_database(backend: str, folder: Path) -> Iterator[str]:
    """An empty database for the server's store: a SQLite file in ``folder``, or a fresh
    PostgreSQL schema (``agent_server_…``) dropped afterwards. Skips without PostgreSQL."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'store.db'}"
        return
    base = postgres_base_url()
    if base is None:
        pytest.skip(POSTGRES_SKIP_REASON)
    url = sa.make_url(base).set(drivername="postgresql+psycopg")
    schema = f"agent_server_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        yield with_search_path(url.render_as_string(hide_password=False), schema)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.dispose()


@contextmanager
def served(
    backend: str,
    folder: Path,
    *,
    ttl: float | None = None,
    env: dict[str, str] | None = None,
    **project: Any,
) -> Iterator[tuple[AgentServer, str]]:
    """A project (:func:`write_project` ``**project``) served on a fresh store of ``backend``:
    ``(server, store_url)``. The usual body of a module-scoped fixture."""
    require_cli()
    with store_database(backend, folder) as url:
        config = write_project(folder / "project", **project)
        with agent_server(config, server_env(url, ttl, env)) as server:
            yield server, url
