"""The approval service's JSON API against a real server process, on SQLite and PostgreSQL.

One ``symfonic-store serve`` process per backend serves the whole module: bearer tokens
for a dozen principals, a policy file, and ``--graph wires:graph`` (a graph module in
the module's folder that pauses with LangGraph's own ``interrupt()`` and counts the
wires it sends). Each test works on threads of its own.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from service_rig import (
    BACKENDS,
    Served,
    answer_path,
    digest_of,
    import_module_file,
    mint,
    serve,
    served_database,
    wired,
    write_graph_module,
    write_json,
    write_tokens,
)

from symfonic_store import InterruptGateway, InterruptStore
from symfonic_store.events import MINTED, RESUME_REJECTED, RESUMED
from symfonic_store.services.audit import AUDIT_FIELDS


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per backend for the whole module."""
    yield from served_database(request, tmp_path_factory)

APPROVERS = [f"approver{n}" for n in range(1, 9)]
PRINCIPALS: dict[str, tuple[str, list[str]]] = {
    **{name: (f"token-{name}", ["approver"]) for name in APPROVERS},
    "fin": ("token-fin", ["finance"]),
    "requester": ("token-requester", ["finance"]),
    "viewer": ("token-viewer", []),
}
POLICY = {
    "refund_approval": {"roles": ["finance"], "four_eyes": True},
    "locked": {"roles": []},
    "*": {"roles": ["approver", "finance"]},
}


@dataclass
class Site:
    server: Served
    store: InterruptStore
    graphs: ModuleType
    folder: Path

    def as_(self, name: str) -> httpx.Client:
        return self.server.client(PRINCIPALS[name][0])

    def gate(self, graph: Any = None) -> InterruptGateway:
        return InterruptGateway(graph or self.graphs.graph, self.store)


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("site")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    policy = write_json(folder / "policy.json", POLICY)
    write_graph_module(folder, served_db)
    graphs = import_module_file(folder / "wires.py")
    store = InterruptStore(served_db)
    flags = ("--tokens", str(tokens), "--policy", str(policy), "--graph", "wires:graph")
    with serve(served_db, *flags, cwd=folder) as server:
        yield Site(server, store, graphs, folder)
    store.close()
    graphs.checkpointer.conn.close()


def thread(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def count_events(store: InterruptStore, thread_id: str) -> int:
    try:
        return len(store.history(thread_id))
    except Exception:  # pragma: no cover - an id the store refuses
        return 0


def raise_wire(site: Site, thread_id: str, *, graph: Any = None, actor: str = "requester") -> str:
    """Run the wires graph to its interrupt() through the gateway; returns the interrupt id."""
    site.gate(graph).invoke({}, {"configurable": {"thread_id": thread_id, "actor": actor}})
    (opened,) = site.store.open_interrupts(thread_id)
    return str(opened["interrupt_id"])


# --- authentication -------------------------------------------------------------------


def test_health_is_open_and_everything_else_needs_valid_credentials(site: Site) -> None:
    """/healthz answers without credentials; every other endpoint is 401 without valid ones, and an answer writes nothing."""
    t = thread("auth")
    i = mint(site.store, t)
    digest = digest_of(site.store, t, i)
    with site.server.client() as anonymous, site.server.client("not-a-token") as wrong:
        assert anonymous.get("/healthz").json() == {"ok": True}
        for client in (anonymous, wrong):
            for path in ("/api/interrupts", f"/api/interrupts/{t}/{i}", "/api/audit", "/api/events",
                         f"/api/threads/{t}/events", "/metrics"):
                refused = client.get(path)
                assert refused.status_code == 401, path
                assert "error" in refused.json()
            posted = client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest})
            assert posted.status_code == 401
    assert [e.type for e in site.store.history(t)] == [MINTED]


def test_an_answer_is_the_principals_and_a_body_naming_an_actor_is_refused(site: Site) -> None:
    """The recorded actor is the token's principal; a body with "actor" is 400 and admits nothing."""
    t = thread("actor")
    i = mint(site.store, t)
    digest = digest_of(site.store, t, i)
    with site.as_("approver1") as client:
        forged = client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest,
                                                      "actor": "approver2"})
        assert forged.status_code == 400 and "actor" in forged.json()["error"]
        assert [e.type for e in site.store.history(t)] == [MINTED]
        done = client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest})
    assert done.status_code == 200, done.text
    assert done.json()["outcome"] == "resumed" and done.json()["actor"] == "approver1"
    (record,) = site.store.audit(thread_id=t)
    assert (record.outcome, record.actor, record.response) == ("resumed", "approver1", {"approved": True})


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", b'{"response": true}', b'{"response": 1, "digest": "x", "who": "me"}',
     b'{"response": NaN, "digest": "x"}'],
    ids=["not-json", "not-an-object", "no-digest", "unknown-key", "nan"],
)
def test_a_body_the_api_cannot_read_is_400_and_writes_nothing(site: Site, body: bytes) -> None:
    """Malformed bodies are refused with 400 and a JSON error; the interrupt's history is unchanged."""
    t = thread("bad-body")
    i = mint(site.store, t)
    with site.as_("approver1") as client:
        refused = client.post(answer_path(t, i), content=body, headers={"Content-Type": "application/json"})
    assert refused.status_code == 400 and refused.json()["error"]
    assert len(site.store.history(t)) == 1


def test_a_body_over_the_stores_payload_limit_is_413(site: Site) -> None:
    """A body larger than the store's payload limit (1 MiB) is 413 and nothing is recorded."""
    t = thread("large")
    i = mint(site.store, t)
    huge = {"response": {"note": "x" * 1_100_000}, "digest": digest_of(site.store, t, i)}
    with site.as_("approver1") as client:
        refused = client.post(answer_path(t, i), json=huge)
    assert refused.status_code == 413 and "limit" in refused.json()["error"]
    assert len(site.store.history(t)) == 1


# --- the inbox and one interrupt ------------------------------------------------------


def test_the_inbox_lists_open_interrupts_oldest_first_with_their_digest_in_pages(site: Site) -> None:
    """GET /api/interrupts filters by name, pages with its cursor, and gives the SPEC's digest."""
    name = thread("paged")
    minted = []
    for n in range(5):
        t = f"{name}-{n}"
        minted.append((t, mint(site.store, t, name=name, n=n)))
    seen: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    with site.as_("viewer") as client:
        while True:
            params = {"name": name, "limit": "2", **({"after": cursor} if cursor else {})}
            page = client.get("/api/interrupts", params=params).json()
            seen.extend(page["items"])
            pages += 1
            cursor = page["next"]
            if cursor is None:
                break
        assert client.get("/api/interrupts", params={"after": "garbage!"}).status_code == 400
        assert client.get("/api/interrupts", params={"limit": "0"}).status_code == 400
    assert pages == 3
    assert [(i["thread_id"], i["interrupt_id"]) for i in seen] == minted
    for item in seen:
        assert item["digest"] == digest_of(site.store, item["thread_id"], item["interrupt_id"])
        assert item["name"] == name and item["age_seconds"] >= 0 and item["minted_at"].endswith("+00:00")
        assert item["payload"]["n"] == int(item["thread_id"].rsplit("-", 1)[1])


def test_inbox_pages_hold_each_item_once_while_others_mint_and_answer(site: Site) -> None:
    """Paging GET /api/interrupts?name=...&limit=3 while a writer thread mints and answers
    interrupts of that name: every interrupt open from the first page to the last is on
    exactly one page, none twice, oldest first; a page's ``next`` is ``list_pending``'s
    cursor of its last item; a cursor of the old format (a bare key) is 400."""
    name = thread("churn")
    kept = [(f"{name}-k{n}", mint(site.store, f"{name}-k{n}", name=name)) for n in range(10)]
    stop = threading.Event()
    written = [0]

    def churn() -> None:
        with InterruptStore(site.store.engine.url.render_as_string(hide_password=False)) as store:
            while not stop.is_set() and written[0] < 200:
                t = f"{name}-w{written[0]}"
                iid = mint(store, t, name=name)
                if written[0] % 2:
                    store.resume(t, iid, {"approved": True}, actor="approver1")
                written[0] += 1

    seen: list[dict[str, Any]] = []
    with site.as_("viewer") as client:
        first = client.get("/api/interrupts", params={"name": name, "limit": "3"}).json()
        assert first["next"] == site.store.list_pending(name=name, limit=3)[-1]["cursor"]
        writer = threading.Thread(target=churn)
        writer.start()
        try:
            page = first
            while True:
                seen.extend(page["items"])
                if page["next"] is None:
                    break
                page = client.get("/api/interrupts", params={"name": name, "limit": "3", "after": page["next"]}).json()
        finally:
            stop.set()
            writer.join()
        old = base64.urlsafe_b64encode(json.dumps([1.0, kept[0][0], kept[0][1]]).encode()).decode()
        refused = client.get("/api/interrupts", params={"after": old.rstrip("=")})
        assert refused.status_code == 400 and "cursor" in refused.json()["error"]
    keys = [(i["thread_id"], i["interrupt_id"]) for i in seen]
    assert len(keys) == len(set(keys))
    assert [k for k in keys if k in kept] == kept
    assert written[0] > 0
    assert [i["minted_at"] for i in seen] == sorted(i["minted_at"] for i in seen)
    assert all(i["name"] == name for i in seen)


def test_any_thread_id_works_in_paths_slashes_and_unicode_included(site: Site) -> None:
    """Ids are percent-encoded and read from the raw path: a thread id with '/', '?', '#', '%' and unicode works."""
    t = f"tenant/42/{uuid.uuid4().hex[:6]}?x=1#frag %2F ünïcødé"
    i = mint(site.store, t)
    path = f"/api/interrupts/{quote(t, safe='')}/{quote(i, safe='')}"
    with site.as_("approver2") as client:
        shown = client.get(path).json()
        assert (shown["thread_id"], shown["interrupt_id"], shown["status"]) == (t, i, "pending")
        assert [e["type"] for e in shown["events"]] == [MINTED]
        done = client.post(path + "/answer", json={"response": {"approved": True}, "digest": shown["digest"]})
        assert done.status_code == 200, done.text
        after = client.get(path).json()
        replay = client.get(f"/api/threads/{quote(t, safe='')}/events").json()
        assert client.get(f"/api/threads/{quote(t + '-nope', safe='')}/events").status_code == 404
    assert (after["status"], after["resolved_by"]) == ("resumed", "approver2")
    assert [step["event"]["type"] for step in replay] == [MINTED, RESUMED]
    assert replay[0]["state"]["_interrupt_pending"]["interrupt_id"] == i
    assert replay[1]["state"]["_interrupt_pending"] is None


def test_unknown_digest_mismatch_expired_and_already_resolved(site: Site) -> None:
    """404 unknown and 412 digest mismatch write nothing; 410 expired; 409 names who answered and when."""
    t = thread("states")
    i = mint(site.store, t)
    digest = digest_of(site.store, t, i)
    ok = {"response": {"approved": True}, "digest": digest}
    with site.as_("approver3") as client:
        assert client.get(f"/api/interrupts/{t}/i-nope").status_code == 404
        assert client.post(answer_path(t, "i-nope"), json=ok).status_code == 404
        assert client.post(answer_path(thread("never"), i), json=ok).status_code == 404
        assert client.post(answer_path("x" * 300, i), json=ok).status_code == 404
        assert len(site.store.history(t)) == 1
        mismatch = client.post(answer_path(t, i), json={**ok, "digest": "0" * 64})
        assert mismatch.status_code == 412 and "nothing" in mismatch.json()["error"]
        assert len(site.store.history(t)) == 1
        assert client.post(answer_path(t, i), json=ok).status_code == 200
    with site.as_("approver4") as other:
        late = other.post(answer_path(t, i), json=ok)
    assert late.status_code == 409
    body = late.json()
    assert body["resolved_by"] == "approver3" and body["in_progress"] is False
    assert body["resolved_at"] == site.store.history(t)[1].occurred_at.isoformat()

    gone = thread("gone")
    j = mint(site.store, gone)
    site.store.expire(gone, j, reason="cancelled", actor="ops")
    with site.as_("approver3") as client:
        expired = client.post(answer_path(gone, j), json={"response": {}, "digest": digest_of(site.store, gone, j)})
    assert expired.status_code == 410 and expired.json()["reason"] == "cancelled"


def test_eight_concurrent_answers_one_is_admitted_seven_get_409_naming_it(site: Site) -> None:
    """Eight principals answer one interrupt at once: one 200, seven 409 naming the winner; one resume recorded."""
    t = thread("race")
    i = mint(site.store, t)
    digest = digest_of(site.store, t, i)
    start = threading.Barrier(len(APPROVERS))

    def answer(name: str) -> httpx.Response:
        with site.as_(name) as client:
            client.get("/healthz")  # connected before the barrier
            start.wait(timeout=30)
            return client.post(answer_path(t, i), json={"response": {"approved": True, "by": name}, "digest": digest})

    with ThreadPoolExecutor(len(APPROVERS)) as pool:
        results = list(pool.map(answer, APPROVERS))
    codes = sorted(r.status_code for r in results)
    assert codes == [200] + [409] * 7, [r.text for r in results]
    winner = next(r.json()["actor"] for r in results if r.status_code == 200)
    assert {r.json()["resolved_by"] for r in results if r.status_code == 409} == {winner}
    history = site.store.history(t)
    assert [e.actor for e in history if e.type == RESUMED] == [winner]
    assert len([e for e in history if e.type == RESUME_REJECTED]) == 7


# --- authorization ----------------------------------------------------------------------


def test_the_policy_refuses_by_role_and_four_eyes_and_records_each_refusal(site: Site) -> None:
    """403 for a missing role, for the requester (four-eyes) and for an unknown requester; each recorded as not_allowed."""
    t = thread("policy")
    i = mint(site.store, t, name="refund_approval", actor="requester")
    ok = {"response": {"approved": True}, "digest": digest_of(site.store, t, i)}
    with site.as_("approver1") as wrong_role, site.as_("requester") as own, site.as_("fin") as finance:
        by_role = wrong_role.post(answer_path(t, i), json=ok)
        by_requester = own.post(answer_path(t, i), json=ok)
        assert by_role.status_code == by_requester.status_code == 403
        assert "finance" in by_role.json()["error"] and "four-eyes" in by_requester.json()["error"]
        assert finance.post(answer_path(t, i), json=ok).status_code == 200
    (record,) = site.store.audit(thread_id=t)
    assert record.actor == "fin"
    assert [(a["actor"], a["why"]) for a in record.attempts] == [
        ("approver1", "not_allowed"), ("requester", "not_allowed"),
    ]
    assert "four-eyes" in str(record.attempts[1]["error"])

    nobody = thread("policy-unknown")
    j = mint(site.store, nobody, name="refund_approval", actor=None)
    with site.as_("fin") as finance:
        closed = finance.post(answer_path(nobody, j), json={"response": {}, "digest": digest_of(site.store, nobody, j)})
    assert closed.status_code == 403 and "unknown" in closed.json()["error"]
    assert site.store.pending(nobody) is not None

    locked = thread("policy-locked")
    k = mint(site.store, locked, name="locked")
    default = thread("policy-default")
    m = mint(site.store, default, name="anything_else")
    with site.as_("fin") as finance, site.as_("viewer") as viewer, site.as_("approver2") as approver:
        assert finance.post(answer_path(locked, k), json={"response": {}, "digest": digest_of(site.store, locked, k)}).status_code == 403
        body = {"response": {}, "digest": digest_of(site.store, default, m)}
        assert viewer.post(answer_path(default, m), json=body).status_code == 403
        assert approver.post(answer_path(default, m), json=body).status_code == 200
    rejected = [e for e in site.store.history(locked) if e.type == RESUME_REJECTED]
    assert [(e.actor, e.data["why"]) for e in rejected] == [("fin", "not_allowed")]



def marker_graph(store: InterruptStore, *, router: bool) -> Any:
    """A seed-marker graph on ``store`` asking for ``refund_approval`` (four-eyes in the
    policy): minted by the recording router, or (``router=False``) by the interrupt node."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    from symfonic_store.langgraph import (
        InterruptState,
        create_interrupt_node,
        make_interrupt_router,
    )
    from symfonic_store.protocol import build_interrupt_marker

    def ask(state: dict[str, Any]) -> dict[str, Any]:
        return build_interrupt_marker(name="refund_approval", interrupt_id=f"i-{uuid.uuid4().hex[:12]}",
                                      payload={"amount": 420}, run_id=state.get("run_id"))

    builder = StateGraph(InterruptState)
    builder.add_node("ask", ask)
    builder.add_node("interrupt", create_interrupt_node(store))
    builder.add_edge(START, "ask")
    if router:
        builder.add_conditional_edges("ask", make_interrupt_router(store),
                                      {"interrupt": "interrupt", "continue": END, "finish": END, "elicitation": END})
    else:
        builder.add_edge("ask", "interrupt")
    builder.add_edge("interrupt", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("router", [True, False], ids=["router-mints", "node-mints"])
def test_four_eyes_on_a_marker_interrupt_refuses_its_requester_and_admits_another(site: Site, router: bool) -> None:
    """A marker graph run with configurable actor "requester": the mint records it, so four-eyes refuses the requester (403) and admits "fin"."""
    t = thread("marker-4eyes")
    marker_graph(site.store, router=router).invoke(
        {"messages": [], "run_id": "r1"}, {"configurable": {"thread_id": t, "actor": "requester"}}
    )
    (opened,) = site.store.open_interrupts(t)
    i = opened["interrupt_id"]
    ok = {"response": {"approved": True}, "digest": digest_of(site.store, t, i)}
    with site.as_("requester") as own, site.as_("fin") as finance:
        shown = finance.get(f"/api/interrupts/{t}/{i}").json()
        assert shown["requested_by"] == "requester"
        refused = own.post(answer_path(t, i), json=ok)
        assert refused.status_code == 403 and "four-eyes" in refused.json()["error"], refused.text
        done = finance.post(answer_path(t, i), json=ok)
        assert done.status_code == 200, done.text
    (record,) = site.store.audit(thread_id=t)
    assert (record.requested_by, record.actor, record.outcome) == ("requester", "fin", "resumed")
    assert [(a["actor"], a["why"]) for a in record.attempts] == [("requester", "not_allowed")]

# --- LangGraph's own interrupts through --graph ---------------------------------------


def test_a_native_interrupt_is_answered_through_the_graph_and_its_side_effect_runs_once(site: Site) -> None:
    """An answer to a LangGraph interrupt resumes the paused graph in the server (--graph): the wire is sent once."""
    t = thread("wire")
    i = raise_wire(site, t)
    before = wired(site.folder)
    with site.as_("approver5") as client:
        listed = [x for x in client.get("/api/interrupts", params={"thread": t}).json()["items"]]
        assert [(x["interrupt_id"], x["source"], x["name"]) for x in listed] == [(i, "langgraph", "wire_approval")]
        done = client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": listed[0]["digest"]})
        assert done.status_code == 200, done.text
        shown = client.get(f"/api/interrupts/{t}/{i}").json()
    assert done.json() == {"outcome": "resumed", "actor": "approver5", "decision": "approve", "waiting": []}
    assert wired(site.folder) == before + 1
    assert (shown["status"], shown["resolved_by"], shown["requested_by"]) == ("resumed", "approver5", "requester")
    state = site.graphs.graph.get_state({"configurable": {"thread_id": t}})
    assert not state.next and state.values["answers"] == [{"approved": True}]
    (record,) = site.store.audit(thread_id=t)
    assert (record.outcome, record.actor) == ("resumed", "approver5")


def test_eight_concurrent_answers_to_a_native_interrupt_run_the_graph_once(site: Site) -> None:
    """Eight principals answer one LangGraph interrupt at once: one 200, seven 409, one wire."""
    t = thread("wire-race")
    i = raise_wire(site, t)
    digest = digest_of(site.store, t, i)
    before = wired(site.folder)
    start = threading.Barrier(len(APPROVERS))

    def answer(name: str) -> httpx.Response:
        with site.as_(name) as client:
            client.get("/healthz")
            start.wait(timeout=30)
            return client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest})

    with ThreadPoolExecutor(len(APPROVERS)) as pool:
        results = list(pool.map(answer, APPROVERS))
    assert sorted(r.status_code for r in results) == [200] + [409] * 7, [r.text for r in results]
    winner = next(r.json()["actor"] for r in results if r.status_code == 200)
    for lost in (r.json() for r in results if r.status_code == 409):
        assert lost["resolved_by"] == winner and lost["resolved_at"]
    assert wired(site.folder) == before + 1
    assert [e.actor for e in site.store.history(t) if e.type == RESUMED] == [winner]


def test_an_answer_the_graph_does_not_take_is_422_and_the_interrupt_stays_open(site: Site) -> None:
    """The graph raises on the answer: 422 not_taken, the interrupt stays open, and the next valid answer is admitted."""
    t = thread("wire-bad")
    i = raise_wire(site, t)
    digest = digest_of(site.store, t, i)
    with site.as_("approver6") as client:
        bad = client.post(answer_path(t, i), json={"response": "bad", "digest": digest})
        assert bad.status_code == 422, bad.text
        assert bad.json()["outcome"] == "not_taken" and "cannot read the answer" in bad.json()["error"]
        assert client.get(f"/api/interrupts/{t}/{i}").json()["status"] == "pending"
        good = client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest})
    assert good.status_code == 200, good.text
    (record,) = site.store.audit(thread_id=t)
    assert record.outcome == "resumed" and [a["why"] for a in record.attempts] == ["not_taken"]


def test_an_answer_whose_outcome_is_unknown_is_409_until_settled(site: Site) -> None:
    """A claim whose process died and whose lease ran out: 409 outcome_unknown naming the claimant, the inbox says so; after settle the next answer is admitted."""
    from datetime import UTC, datetime, timedelta

    from freezegun import freeze_time

    t = thread("wire-unknown")
    i = raise_wire(site, t)
    digest = digest_of(site.store, t, i)
    before = wired(site.folder)
    site.store.claim(t, i, {"approved": True}, actor="approver7")  # then its process died
    with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
        site.store.sweep(thread_ids=[t])
    claimed_at = next(e for e in site.store.history(t) if e.type == RESUME_REJECTED).data["claimed_at"]
    ok = {"response": {"approved": True}, "digest": digest}
    with site.as_("approver8") as client:
        refused = client.post(answer_path(t, i), json=ok)
        assert refused.status_code == 409, refused.text
        body = refused.json()
        assert body["outcome_unknown"] is True and body["claimed_by"] == "approver7"
        assert body["claimed_at"] == datetime.fromtimestamp(claimed_at, UTC).isoformat()
        assert "settle" in body["error"]
        assert client.get(f"/api/interrupts/{t}/{i}").json()["outcome_unknown"] is True
        page = client.get(f"/interrupts/{t}/{i}")
        assert "outcome unknown" in page.text and "approver7" in page.text
        assert wired(site.folder) == before  # the refused answer ran nothing
        site.store.settle(t, i, outcome="not_taken", actor="ops")
        again = client.post(answer_path(t, i), json=ok)
    assert again.status_code == 200, again.text
    assert wired(site.folder) == before + 1
    rejected = [(e.actor, e.data["why"]) for e in site.store.history(t) if e.type == RESUME_REJECTED]
    assert rejected == [("approver7", "outcome_unknown"), ("approver8", "outcome_unknown"), ("approver7", "not_taken")]


def test_a_native_interrupt_of_a_graph_the_server_does_not_serve_is_409_and_nothing_is_written(site: Site) -> None:
    """No --graph of the mint's graph name: 409 saying so, and the thread's history is unchanged."""
    t = thread("unserved")
    i = raise_wire(site, t, graph=site.graphs.unserved)
    events = count_events(site.store, t)
    with site.as_("approver7") as client:
        refused = client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest_of(site.store, t, i)})
    assert refused.status_code == 409
    assert "unserved-wires" in refused.json()["error"] and "--graph" in refused.json()["error"]
    assert count_events(site.store, t) == events
    assert site.store.open_interrupts(t)[0]["interrupt_id"] == i


# --- the audit and the log -----------------------------------------------------------------


def test_the_audit_pages_as_json_and_csv(site: Site) -> None:
    """GET /api/audit filters by thread, pages with its cursor (JSON 'next', CSV X-Next-Cursor), CSV has the §3 header."""
    t = thread("audit")
    ids = [mint(site.store, t, n=n) for n in range(3)]  # each new marker supersedes the last
    with site.as_("viewer") as client:
        first = client.get("/api/audit", params={"thread": t, "limit": "2"}).json()
        second = client.get("/api/audit", params={"thread": t, "limit": "2", "after": first["next"]}).json()
        csv_first = client.get("/api/audit", params={"thread": t, "limit": "2", "format": "csv"})
        csv_rest = client.get("/api/audit", params={"thread": t, "limit": "2", "format": "csv",
                                                    "after": csv_first.headers["X-Next-Cursor"]})
        assert client.get("/api/audit", params={"format": "xml"}).status_code == 400
        assert client.get("/api/audit", params={"since": "not a date"}).status_code == 400
    assert [r["interrupt_id"] for r in first["items"] + second["items"]] == ids
    assert second["next"] is None
    assert [r["outcome"] for r in first["items"] + second["items"]] == ["expired", "expired", "pending"]
    rows = [line.split(",")[1] for line in (csv_first.text + csv_rest.text.split("\n", 1)[1]).strip().splitlines()]
    assert csv_first.text.splitlines()[0] == ",".join(AUDIT_FIELDS)
    assert rows == ["interrupt_id", *ids]
    assert "X-Next-Cursor" not in csv_rest.headers


def test_audit_csv_cells_a_spreadsheet_would_run_are_quoted_and_json_is_unchanged(site: Site) -> None:
    """A cell beginning with =, +, -, @, a tab or a CR gets a ' in front in the CSV (OWASP);
    the JSON carries the values as they are."""
    uid = uuid.uuid4().hex[:8]
    threads = [f'=HYPERLINK("https://evil.example","open")-{uid}', f"+1-{uid}", f"-2-{uid}", f"@SUM-{uid}",
               f"\tx-{uid}", f"\rx-{uid}", f"plain-{uid}"]
    for t in threads:
        mint(site.store, t, actor="=cmd|' /C calc'!A0")
    with site.as_("viewer") as client:
        sheets = [list(csv.reader(io.StringIO(client.get("/api/audit", params={"thread": t, "format": "csv"}).text)))
                  for t in threads]
        items = [client.get("/api/audit", params={"thread": t}).json()["items"] for t in threads]
    for t, sheet, (item,) in zip(threads, sheets, items, strict=True):
        row = dict(zip(sheet[0], sheet[1], strict=True))
        assert row["thread_id"] == (t if t.startswith("plain") else "'" + t)
        assert row["requested_by"] == "'=cmd|' /C calc'!A0"
        assert (item["thread_id"], item["requested_by"]) == (t, "=cmd|' /C calc'!A0")


def _sse(response: httpx.Response, want: int) -> list[tuple[int, dict[str, Any]]]:
    """Read ``want`` events from an open Server-Sent Events response: (id, data)."""
    got: list[tuple[int, dict[str, Any]]] = []
    event_id = None
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            assert event_id is not None
            got.append((event_id, json.loads(line[6:])))
            if len(got) == want:
                return got
    return got


def test_the_event_stream_never_skips_an_event_while_writers_append(site: Site) -> None:
    """The SSE tail of the log, read while four writers append, holds every event once, in the store's order."""
    with site.as_("viewer") as client:
        head = client.get("/api/events", params={"after": "0", "limit": "1000"}).json()
        while len(head["items"]) == 1000:
            head = client.get("/api/events", params={"after": str(head["next"]), "limit": "1000"}).json()
        start = head["next"]
        threads = [thread(f"stream-{n}") for n in range(4)]

        def write(t: str) -> None:
            with InterruptStore(site.store.engine.url.render_as_string(hide_password=False)) as own:
                for _ in range(10):
                    mint(own, t)

        with client.stream("GET", "/api/events/stream", params={"after": str(start)}) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(write, threads))
            expected = [e for e in site.store.events(after=start) if e.thread_id in threads]
            got = [(i, d) for i, d in _sse(stream, len(site.store.events(after=start)))]
    mine = [(i, d) for i, d in got if d["thread_id"] in threads]
    assert [i for i, _ in mine] == [e.position for e in expected]
    assert all(i == d["position"] for i, d in got)
    assert len({i for i, _ in got}) == len(got)
    # 10 mints per thread, each superseding the last: 10 + 9 events per thread.
    assert len(mine) == 4 * 19


def test_the_stream_resumes_from_last_event_id_over_after_and_events_page(site: Site) -> None:
    """A Last-Event-ID header wins over ?after=; /api/events pages by position with 'next'."""
    t = thread("resume-stream")
    for _ in range(3):
        mint(site.store, t)
    mine = [e for e in site.store.events() if e.thread_id == t]
    middle = mine[1].position
    with site.as_("viewer") as client:
        page = client.get("/api/events", params={"after": str(mine[0].position - 1), "limit": "2"}).json()
        assert [e["position"] for e in page["items"]] == [e.position for e in site.store.events(after=mine[0].position - 1, limit=2)]
        assert page["next"] == page["items"][-1]["position"]
        assert client.get("/api/events", params={"after": "-1"}).status_code == 400
        with client.stream("GET", "/api/events/stream", params={"after": "0"},
                           headers={"Last-Event-ID": str(middle)}) as stream:
            ((first_id, first),) = _sse(stream, 1)
    assert first_id == site.store.events(after=middle, limit=1)[0].position
    assert first["position"] == first_id


def test_metrics_are_prometheus_text_from_the_log(site: Site) -> None:
    """/metrics (authenticated) reports open interrupts, answers and refusals by outcome, expiries and the answer-time histogram, as the log says."""
    t = thread("metrics")
    i = mint(site.store, t)
    with site.as_("approver8") as client:
        client.post(answer_path(t, i), json={"response": {}, "digest": digest_of(site.store, t, i)})
        text = client.get("/metrics").text
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            values[key] = float(value)
    log = site.store.events()
    assert values['symfonic_answers_total{outcome="resumed"}'] == len([e for e in log if e.type == RESUMED])
    rejected = [e for e in log if e.type == RESUME_REJECTED and e.data["why"] == "not_allowed"]
    assert values.get('symfonic_answers_total{outcome="not_allowed"}', 0) == len(rejected)
    superseded = [e for e in log if e.type == "interrupt.expired" and e.data["reason"] == "superseded"]
    assert values['symfonic_expiries_total{reason="superseded"}'] == len(superseded)
    pending = site.store.list_pending()
    opened = values['symfonic_open_interrupts{source="marker"}'] + values['symfonic_open_interrupts{source="langgraph"}']
    assert opened == len(pending)
    assert values["symfonic_mint_to_answer_seconds_count"] >= 1
    assert values["symfonic_oldest_open_interrupt_age_seconds"] >= 0
    assert values["symfonic_owed_wakeups"] == site.store.owed_wakeups()
    assert values["symfonic_reader_lag_seconds"] == 0 and values["symfonic_reader_lag_events"] == 0
    assert values["symfonic_writers_in_flight"] == 0
    assert values['symfonic_http_answers_total{code="200"}'] >= 1
