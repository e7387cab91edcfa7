"""The approval service as a real process, for the HTTP and browser tests.

``serve(db_url, *flags)`` starts ``symfonic-store serve --port 0`` as a subprocess (a
real uvicorn on a free loopback port), waits for the line it prints once it listens,
and stops it afterwards. :func:`served_database` gives a module-scoped database on each backend, so a
test module starts one server per backend rather than one per test. Helpers write the
tokens and policy files, sign JWTs, and write a ``--graph`` module that pauses with
LangGraph's own ``interrupt()`` and counts its side effect in a file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import factories
import httpx
import pytest
import sqlalchemy as sa
from cli_helpers import cli_env
from conftest import POSTGRES_SKIP_REASON, postgres_base_url, with_search_path

from symfonic_store import InterruptStore
from symfonic_store.server import interrupt_digest

START_TIMEOUT = 90


@dataclass
class Served:
    """A running ``symfonic-store serve`` process."""

    url: str
    process: subprocess.Popen[str]
    log: list[str] = field(default_factory=list)

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        """An HTTP client for the server (never through a proxy), with a bearer token."""
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, trust_env=False, timeout=60, **kwargs)

    def logs(self) -> str:
        return "".join(self.log)

    def logs_with(self, *needles: str, timeout: float = 30.0) -> str:
        """The server's log once every ``needle`` is in it (its stderr is read by a thread
        of its own, so a line the server wrote may not be here yet), or as it is after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not all(n in self.logs() for n in needles) and time.monotonic() < deadline:
            time.sleep(0.05)  # sleep-ok: polling the reader thread, bounded by the deadline
        return self.logs()


def _pump(stream: Any, sink: Any) -> None:
    for line in iter(stream.readline, ""):
        sink(line)
    stream.close()


@contextmanager
def serve(db_url: str, *flags: str, cwd: Path | None = None, env: dict[str, str] | None = None,
          options: tuple[str, ...] = ()) -> Iterator[Served]:
    """``symfonic-store --db db_url options... serve --port 0 flags...`` as a process, until
    the block ends (``options``: global ones, such as ``--decisions``)."""
    command = [sys.executable, "-m", "symfonic_store.cli", "--db", db_url, *options, "serve", "--port", "0",
               "--no-access-log", *flags]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        env=cli_env(env), cwd=cwd,
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []
    threading.Thread(target=_pump, args=(process.stdout, lines.put), daemon=True).start()
    threading.Thread(target=_pump, args=(process.stderr, log.append), daemon=True).start()
    try:
        try:
            ready = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            ready = ""
        if "serving the approval inbox on " not in ready:
            process.kill()
            process.wait(timeout=30)
            raise AssertionError(f"the server did not start: {ready!r}\n{''.join(log)}")
        url = ready.split(" on ", 1)[1].split()[0].rstrip("/")
        yield Served(url, process, log)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""The params of a module's ``served_db`` fixture (see :func:`served_database`)."""


def served_database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated database for one test module, on the backend ``request.param`` names.

    Each module declares its own module-scoped fixture over :data:`BACKENDS` that
    yields from this, so its servers share one database per backend::

        @pytest.fixture(scope="module", params=BACKENDS)
        def served_db(request, tmp_path_factory):
            yield from served_database(request, tmp_path_factory)
    """
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('served') / 'store.db'}"
        with InterruptStore(url) as store:
            store.setup()
        yield url
        return
    base = postgres_base_url()
    if base is None:
        pytest.skip(POSTGRES_SKIP_REASON)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    root = sa.make_url(base).set(drivername="postgresql+psycopg")
    admin = sa.create_engine(root)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = with_search_path(root.render_as_string(hide_password=False), schema)
    with InterruptStore(url) as store:
        store.setup()
    try:
        yield url
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


# --- credentials and policies ------------------------------------------------------


def write_tokens(path: Path, principals: dict[str, tuple[str, list[str]]]) -> Path:
    """A tokens file for ``{principal: (token, roles)}``, replaced in one step."""
    data = {
        name: {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "roles": roles}
        for name, (token, roles) in principals.items()
    }
    fresh = path.with_name(path.name + f".{uuid.uuid4().hex[:6]}")
    fresh.write_text(json.dumps(data))
    fresh.replace(path)
    return path


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


# --- interrupts --------------------------------------------------------------------


def mint(store: InterruptStore, thread_id: str, *, name: str = "approval_required", actor: str | None = "agent",
         **payload: Any) -> str:
    """Mint a seed marker on ``thread_id``; returns its interrupt id."""
    return str(factories.mint(store, thread_id, name=name, actor=actor, payload=payload or None)["interrupt_id"])


def digest_of(store: InterruptStore, thread_id: str, interrupt_id: str) -> str:
    """The digest the inbox shows for an interrupt, computed here from the SPEC's formula."""
    record = store.interrupt_record(thread_id, interrupt_id)
    assert record is not None
    return interrupt_digest(thread_id, interrupt_id, record["payload"])


def answer_path(thread_id: str, interrupt_id: str) -> str:
    from urllib.parse import quote

    return f"/api/interrupts/{quote(thread_id, safe='')}/{quote(interrupt_id, safe='')}/answer"


# --- a --graph module --------------------------------------------------------------


GRAPH_MODULE = '''\
"""Wires that need approval: LangGraph's own interrupt(), as `serve --graph wires:graph` finds it."""
import operator
import sqlite3
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

URL = {url!r}
LEDGER = {ledger!r}


def _saver():
    if URL.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect({checkpoints!r}, check_same_thread=False))
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    return PostgresSaver(psycopg.connect({conninfo!r}, autocommit=True, row_factory=dict_row))


checkpointer = _saver()
checkpointer.setup()


class State(TypedDict, total=False):
    answers: Annotated[list[Any], operator.add]


def approve(state):
    answer = interrupt({{"name": "wire_approval", "amount": 999, "to": "acct-1"}})
    if answer == "bad":
        raise ValueError("cannot read the answer 'bad'")
    if isinstance(answer, dict) and answer.get("approved") is True:
        with open(LEDGER, "a") as ledger:
            ledger.write("wired 999\\n")
    return {{"answers": [answer]}}


def _build(name):
    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer, name=name)


graph = _build("wires")
unserved = _build("unserved-wires")
'''


def write_graph_module(folder: Path, db_url: str) -> Path:
    """``wires.py`` in ``folder``, its checkpoints on the store's backend, its ledger beside it."""
    conninfo = ""
    if not db_url.startswith("sqlite"):
        conninfo = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    path = folder / "wires.py"
    path.write_text(GRAPH_MODULE.format(
        url=db_url, ledger=str(folder / "ledger.txt"), checkpoints=str(folder / "checkpoints.db"),
        conninfo=conninfo,
    ))
    return path


def import_module_file(path: Path) -> ModuleType:
    """Import ``path`` in this process under a name of its own (the server imports it too)."""
    name = f"{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def wired(folder: Path) -> int:
    """How many wires the graph sent (the side effect that must run once)."""
    ledger = folder / "ledger.txt"
    return len(ledger.read_text().splitlines()) if ledger.exists() else 0


# --- a --graph module of LangChain agents under HumanInTheLoopMiddleware -------------


AGENT_MODULE = '''\
"""Agents whose wire tool waits for a reviewer: create_agent with HumanInTheLoopMiddleware,
batched and per call, as `serve --graph agents:batched --graph agents:per_call` finds them.

The model is scripted by its input: a human message holding a JSON list of amounts asks
for one wire per amount; anything after a tool's result ends the turn. So the server's
copy of the model, which never saw the first turn, continues it the same way.
"""
import json
import sqlite3
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

URL = {url!r}
LEDGER = {ledger!r}


def _saver():
    if URL.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect({checkpoints!r}, check_same_thread=False))
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    return PostgresSaver(psycopg.connect({conninfo!r}, autocommit=True, row_factory=dict_row))


checkpointer = _saver()
checkpointer.setup()


class Model(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        last = messages[-1]
        if isinstance(last, HumanMessage):
            calls = [
                {{"name": "wire", "args": {{"amount": amount, "to": "acct-1"}}, "id": f"call-{{i}}"}}
                for i, amount in enumerate(json.loads(last.content))
            ]
            reply = AIMessage("", tool_calls=calls)
        else:
            reply = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def wire(amount: int, to: str) -> str:
    """Wire money to an account."""
    with open(LEDGER, "a") as ledger:
        ledger.write(f"wired {{amount}} to {{to}}\\n")
    return f"wired {{amount}} to {{to}}"


def _agent(name, mode, allowed):
    return create_agent(
        Model(),
        tools=[wire],
        middleware=[HumanInTheLoopMiddleware(
            interrupt_on={{"wire": {{"allowed_decisions": allowed}}}}, interrupt_mode=mode,
        )],
        checkpointer=checkpointer,
        name=name,
    )


batched = _agent("wire-agent", "batched", ["approve", "edit", "reject"])
per_call = _agent("wire-agent-per-call", "per_call", ["approve", "edit", "reject"])
no_edit = _agent("wire-agent-no-edit", "batched", ["approve", "reject"])
per_call_no_edit = _agent("wire-agent-per-call-no-edit", "per_call", ["approve", "reject"])
'''


def write_agent_module(folder: Path, db_url: str) -> Path:
    """``agents.py`` in ``folder``: HITL agents whose wires go to ``agent-ledger.txt``."""
    conninfo = ""
    if not db_url.startswith("sqlite"):
        conninfo = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    path = folder / "agents.py"
    path.write_text(AGENT_MODULE.format(
        url=db_url, ledger=str(folder / "agent-ledger.txt"),
        checkpoints=str(folder / "agent-checkpoints.db"), conninfo=conninfo,
    ))
    return path


def agent_wires(folder: Path) -> list[str]:
    """The wires the agents' tool sent, one line each (``wired 15 to acct-2``)."""
    ledger = folder / "agent-ledger.txt"
    return ledger.read_text().splitlines() if ledger.exists() else []


# --- the browser (Debian's Chromium through Playwright) ------------------------------


def chromium_path() -> str | None:
    """Debian's Chromium (or ``$SYMFONIC_STORE_CHROMIUM``); Playwright's own download is not used."""
    configured = os.environ.get("SYMFONIC_STORE_CHROMIUM")
    if configured:
        return configured
    return shutil.which("chromium") or shutil.which("chromium-browser")


def no_browser(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; in CI the browser tests must run (.ci/run installs chromium)")
    pytest.skip(reason)
