"""``serve --graph`` with a seed-marker graph (SPEC §9, wave 4): an approval over HTTP
resumes the graph waiting on the marker, once, however many approvers race -- on two
server processes sharing the store -- and without a ``--graph`` that waits on it the
answer is admitted and the 200 says the application resumes the graph.

The graph is the docs' refund agent (``build_agent_graph`` with the store, as
``refund_agent/app.py`` in docs/operations.md), its checkpoints in a SQLite file or the
store's PostgreSQL schema, its refunds counted in a file (the side effect that must run
once).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from service_rig import (
    BACKENDS,
    Served,
    answer_path,
    digest_of,
    import_module_file,
    serve,
    served_database,
    write_tokens,
)

from symfonic_store import InterruptStore
from symfonic_store.events import RESUME_REJECTED, RESUMED
from symfonic_store.server.marker_graphs import APPLICATION_RESUMES, RAN_ALREADY

APPROVERS = [f"approver{n}" for n in range(1, 7)]
PRINCIPALS = {name: (f"token-{name}", ["approver"]) for name in APPROVERS}

REFUND_APP = '''\
"""The docs' refund agent, as `serve --graph refund_app:graph` imports it."""
import sqlite3

from symfonic_store import InterruptStore
from symfonic_store.demo import RefundLedger, build_agent_graph, refund_tools

URL = {url!r}
REFUNDS = {refunds!r}


class FileLedger(RefundLedger):
    def issue(self, order_id, amount):
        with open(REFUNDS, "a") as refunds:
            refunds.write(f"refund {{amount}} to {{order_id}}\\n")
        return super().issue(order_id, amount)


def _saver():
    if URL.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect({checkpoints!r}, check_same_thread=False))
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    return PostgresSaver(psycopg.connect({conninfo!r}, autocommit=True, row_factory=dict_row))


store = InterruptStore(URL)
checkpointer = _saver()
checkpointer.setup()
graph = build_agent_graph(store, checkpointer=checkpointer, tools=refund_tools(FileLedger()))
'''


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per backend for the whole module."""
    yield from served_database(request, tmp_path_factory)


@dataclass
class Site:
    servers: tuple[Served, Served]
    bare: Served
    store: InterruptStore
    app: Any
    folder: Path

    def client(self, name: str, server: Served | None = None) -> httpx.Client:
        return (server or self.servers[0]).client(PRINCIPALS[name][0])

    def refunds(self) -> int:
        path = self.folder / "refunds.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def paused(self, thread_id: str) -> str:
        """Start the agent on ``thread_id`` (this process): it pauses on a marker; its id."""
        self.app.graph.invoke({"messages": [HumanMessage("Please refund $420 to order 1181.")]},
                              {"configurable": {"thread_id": thread_id, "actor": "agent"}})
        pending = self.store.pending(thread_id)
        assert pending is not None
        return str(pending["interrupt_id"])

    def waits(self, thread_id: str) -> bool:
        snapshot = self.app.graph.get_state({"configurable": {"thread_id": thread_id}})
        return bool(snapshot.interrupts)


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("markers")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    conninfo = ""
    if not served_db.startswith("sqlite"):
        conninfo = sa.make_url(served_db).set(drivername="postgresql").render_as_string(hide_password=False)
    (folder / "refund_app.py").write_text(REFUND_APP.format(
        url=served_db, refunds=str(folder / "refunds.txt"),
        checkpoints=str(folder / "checkpoints.db"), conninfo=conninfo,
    ))
    app = import_module_file(folder / "refund_app.py")
    store = InterruptStore(served_db)
    flags = ("--tokens", str(tokens), "--rate-limit", "off")
    with (
        serve(served_db, *flags, "--graph", "refund_app:graph", cwd=folder) as one,
        serve(served_db, *flags, "--graph", "refund_app:graph", cwd=folder) as two,
        serve(served_db, *flags, cwd=folder) as bare,
    ):
        yield Site((one, two), bare, store, app, folder)
    store.close()
    app.store.close()


def _answer(site: Site, client: httpx.Client, thread_id: str, interrupt_id: str) -> httpx.Response:
    body = {"response": {"approved": True}, "digest": digest_of(site.store, thread_id, interrupt_id)}
    return client.post(answer_path(thread_id, interrupt_id), json=body)


def test_an_approval_resumes_the_marker_graph_it_serves_past_the_marker(site: Site, served_db: str) -> None:
    """One approval over HTTP: the server's --graph runs on past the marker, the refund is
    issued once, and the 200 names the graph that ran it."""
    thread_id = f"refund-one-{served_db[:6]}"
    interrupt_id = site.paused(thread_id)
    before = site.refunds()
    with site.client("approver1") as client:
        done = _answer(site, client, thread_id, interrupt_id)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["outcome"] == "resumed" and body["actor"] == "approver1"
    assert body["resume"] == {"approved": True} and body["decision"] == "approve"
    assert body["graph"] == "LangGraph" and body["waiting"] == []
    assert site.refunds() == before + 1
    assert not site.waits(thread_id)  # the graph ran past the marker, in the server
    with site.client("approver1", site.servers[1]) as client:  # the same answer again
        again = _answer(site, client, thread_id, interrupt_id)
    assert again.status_code == 200, again.text
    assert (again.json()["graph"], again.json()["note"]) == (None, RAN_ALREADY)
    assert site.refunds() == before + 1
    assert site.store.pending(thread_id) is None
    resumed = [e for e in site.store.history(thread_id) if e.type == RESUMED]
    assert [(e.interrupt_id, e.actor) for e in resumed] == [(interrupt_id, "approver1")]


def test_racing_approvers_on_two_servers_resume_the_marker_graph_once(site: Site, served_db: str) -> None:
    """Six principals, and one of them twice, race their approvals across two server
    processes sharing the store: one 200 runs the graph, the refund is issued once."""
    thread_id = f"refund-race-{served_db[:6]}"
    interrupt_id = site.paused(thread_id)
    before = site.refunds()
    racers = [*APPROVERS, APPROVERS[0]]
    start = threading.Barrier(len(racers))

    def race(n_name: tuple[int, str]) -> httpx.Response:
        n, name = n_name
        with site.client(name, site.servers[n % 2]) as client:
            start.wait()
            return _answer(site, client, thread_id, interrupt_id)

    with ThreadPoolExecutor(len(racers)) as pool:
        results = list(pool.map(race, enumerate(racers)))
    ran = [r for r in results if r.status_code == 200 and r.json()["graph"] is not None]
    assert len(ran) == 1, [(r.status_code, r.text) for r in results]
    for r in results:
        assert r.status_code in (200, 409), r.text
        if r.status_code == 200 and r.json()["graph"] is None:
            # The winner's identical second answer, after its graph ran: admitted once.
            assert r.json()["actor"] == ran[0].json()["actor"] and r.json()["note"] == RAN_ALREADY
    assert site.refunds() == before + 1
    assert not site.waits(thread_id)
    events = [e for e in site.store.history(thread_id) if e.interrupt_id == interrupt_id]
    assert sum(e.type == RESUMED for e in events) == 1
    refused = [e for e in events if e.type == RESUME_REJECTED]
    assert len(refused) == sum(r.status_code == 409 for r in results)
    assert {e.data["why"] for e in refused} <= {"already_resolved", "in_progress"}


def test_without_a_graph_waiting_on_it_the_answer_is_admitted_and_the_application_resumes(
    site: Site, served_db: str
) -> None:
    """A server without --graph admits the approval, runs nothing, and says the application
    resumes the graph; the application then does, with the value of the 200."""
    from langgraph.types import Command

    thread_id = f"refund-bare-{served_db[:6]}"
    interrupt_id = site.paused(thread_id)
    before = site.refunds()
    with site.client("approver2", site.bare) as client:
        done = _answer(site, client, thread_id, interrupt_id)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["outcome"] == "resumed" and body["graph"] is None and body["note"] == APPLICATION_RESUMES
    assert site.refunds() == before and site.waits(thread_id)  # still paused: not the server's to run
    site.app.graph.invoke(Command(resume=body["resume"]),
                          {"configurable": {"thread_id": thread_id, "actor": "approver2"}})
    assert site.refunds() == before + 1 and not site.waits(thread_id)
