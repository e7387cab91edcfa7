"""Assignment and quorum votes (SPEC §15) against two real server processes on one
database, on SQLite and PostgreSQL.

Two ``symfonic-store serve`` processes share each backend's database, with one tokens
file, one policy file and ``--graph wires:graph`` (a graph that pauses with LangGraph's
own ``interrupt()`` and counts the wires it sends), so racing votes come from several
processes: the database keeps one vote per principal and the graph resumes once.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
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
from symfonic_store.events import ASSIGNED, RESUME_REJECTED, RESUMED, VOTED

FINANCE = [f"fin{n}" for n in range(1, 7)]
PRINCIPALS: dict[str, tuple[str, list[str]]] = {
    **{name: (f"token-{name}", ["finance"]) for name in FINANCE},
    "requester": ("token-requester", ["finance"]),
    "ann": ("token-ann", ["approver"]),
    "bob": ("token-bob", ["approver"]),
    "cid": ("token-cid", ["approver"]),
    "lead": ("token-lead", ["lead"]),
}
POLICY = {
    "two_of_finance": {"roles": ["finance"], "quorum": 2, "four_eyes": True},
    "no_veto": {"roles": ["finance"], "quorum": 2, "veto": False},
    "wire_approval": {"roles": ["finance"], "quorum": 2},
    "*": {"roles": ["approver", "finance", "lead"], "reassign": ["lead"]},
}


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served_database(request, tmp_path_factory)


@dataclass
class Site:
    servers: tuple[Served, Served]
    store: InterruptStore
    graphs: ModuleType
    folder: Path

    def as_(self, name: str, server: int = 0) -> httpx.Client:
        return self.servers[server].client(PRINCIPALS[name][0])


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("quorum")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    policy = write_json(folder / "policy.json", POLICY)
    write_graph_module(folder, served_db)
    graphs = import_module_file(folder / "wires.py")
    store = InterruptStore(served_db)
    flags = ("--tokens", str(tokens), "--policy", str(policy), "--graph", "wires:graph",
             "--rate-limit", "off")
    with serve(served_db, *flags, cwd=folder) as one, serve(served_db, *flags, cwd=folder) as two:
        yield Site((one, two), store, graphs, folder)
    store.close()
    graphs.checkpointer.conn.close()


def thread(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def assign_path(thread_id: str, interrupt_id: str) -> str:
    return f"/api/interrupts/{quote(thread_id, safe='')}/{quote(interrupt_id, safe='')}/assign"


def vote(site: Site, name: str, t: str, i: str, approved: bool = True, server: int = 0) -> httpx.Response:
    with site.as_(name, server) as client:
        return client.post(answer_path(t, i), json={"response": {"approved": approved}, "digest": digest_of(site.store, t, i)})


def raise_wire(site: Site, thread_id: str) -> str:
    InterruptGateway(site.graphs.graph, site.store).invoke(
        {}, {"configurable": {"thread_id": thread_id, "actor": "requester"}}
    )
    (opened,) = site.store.open_interrupts(thread_id)
    return str(opened["interrupt_id"])


# --- quorum ------------------------------------------------------------------------------


def test_two_approving_votes_resume_once_with_both_approvers(site: Site) -> None:
    """The first vote is 200 voted 1 of 2; the same principal again is 409 'already voted'
    with nothing written; a second principal's vote (on the other server) resumes it with
    data["approvers"] listing both; the inbox showed the vote so far."""
    t = thread("q")
    i = mint(site.store, t, name="two_of_finance", actor="requester", amount=10)
    first = vote(site, "fin1", t, i)
    assert (first.status_code, first.json()) == (200, {"outcome": "voted", "votes": 1, "needed": 2})
    with site.as_("fin2") as client:
        shown = client.get(f"/api/interrupts/{t}/{i}").json()
    assert shown["status"] == "pending" and shown["needed"] == 2
    assert [(v["actor"], v["decision"]) for v in shown["votes"]] == [("fin1", "approve")]
    before = len(site.store.history(t))
    again = vote(site, "fin1", t, i, server=1)
    assert (again.status_code, again.json()) == (409, {"error": "already voted"})
    assert len(site.store.history(t)) == before
    done = vote(site, "fin2", t, i, server=1)
    assert done.status_code == 200, done.text
    assert done.json()["outcome"] == "resumed" and done.json()["approvers"] == ["fin1", "fin2"]
    (resumed,) = [e for e in site.store.history(t) if e.type == RESUMED]
    assert (resumed.actor, resumed.data["approvers"]) == ("fin2", ["fin1", "fin2"])
    assert [e.actor for e in site.store.history(t) if e.type == VOTED] == ["fin1", "fin2"]
    late = vote(site, "fin3", t, i)
    assert late.status_code == 409
    with site.as_("fin3") as client:
        (audited,) = client.get("/api/audit", params={"thread": t}).json()["items"]
        sheet = client.get("/api/audit", params={"thread": t, "format": "csv"}).text.splitlines()
    assert audited["approvers"] == ["fin1", "fin2"]
    assert sheet[0].endswith(",approvers") and sheet[1].endswith('"[""fin1"", ""fin2""]"')


def test_a_reject_vetoes_unless_veto_is_false_and_other_decisions_are_422(site: Site) -> None:
    """A reject vote ends the interrupt at once (resumed with it); with "veto": false it is
    recorded and does not count; an answer that neither approves nor rejects is 422, nothing written."""
    t = thread("veto")
    i = mint(site.store, t, name="two_of_finance", actor="requester")
    assert vote(site, "fin1", t, i).status_code == 200
    vetoed = vote(site, "fin2", t, i, approved=False)
    assert vetoed.status_code == 200 and vetoed.json()["outcome"] == "resumed", vetoed.text
    (resumed,) = [e for e in site.store.history(t) if e.type == RESUMED]
    assert resumed.data["response"] == {"approved": False} and "approvers" not in resumed.data

    t2 = thread("noveto")
    i2 = mint(site.store, t2, name="no_veto", actor="requester")
    rejected = vote(site, "fin1", t2, i2, approved=False)
    assert (rejected.status_code, rejected.json()["votes"]) == (200, 0)
    before = len(site.store.history(t2))
    with site.as_("fin2") as client:
        other = client.post(answer_path(t2, i2), json={"response": {"note": "hm"}, "digest": digest_of(site.store, t2, i2)})
    assert other.status_code == 422 and len(site.store.history(t2)) == before
    assert vote(site, "fin2", t2, i2).json()["votes"] == 1
    assert vote(site, "fin3", t2, i2).json()["outcome"] == "resumed"


def test_a_vote_is_read_by_the_interrupts_schema(site: Site) -> None:
    """A HITL request's vote is its decisions: when they disagree it is 422, nothing written;
    when they all approve it is an approve vote, and two resume it with both approvers."""
    t = thread("hitl")
    requests = [{"name": "wire", "args": {"to": "x"}}, {"name": "log", "args": {}}]
    i = mint(site.store, t, name="two_of_finance", actor="requester", action_requests=requests,
             review_configs=[{"action_name": "wire", "allowed_decisions": ["approve", "reject"]}])

    def decide(name: str, *types: str) -> httpx.Response:
        with site.as_(name) as client:
            return client.post(answer_path(t, i), json={
                "response": {"decisions": [{"type": x} for x in types]}, "digest": digest_of(site.store, t, i)})

    before = len(site.store.history(t))
    mixed = decide("fin1", "approve", "reject")
    assert mixed.status_code == 422 and len(site.store.history(t)) == before, mixed.text
    first = decide("fin1", "approve", "approve")
    assert (first.status_code, first.json()) == (200, {"outcome": "voted", "votes": 1, "needed": 2})
    (voted,) = [e for e in site.store.history(t) if e.type == VOTED]
    assert voted.data["decision"] == "approve"
    done = decide("fin2", "approve", "approve")
    assert done.status_code == 200 and done.json()["approvers"] == ["fin1", "fin2"], done.text


def test_the_requester_may_not_vote_under_four_eyes(site: Site) -> None:
    """four_eyes: the requester's vote is 403 and recorded as a refusal, not a vote."""
    t = thread("4eyes")
    i = mint(site.store, t, name="two_of_finance", actor="requester")
    refused = vote(site, "requester", t, i)
    assert refused.status_code == 403
    assert [e.type for e in site.store.history(t)][-1] == RESUME_REJECTED
    assert not [e for e in site.store.history(t) if e.type == VOTED]


def test_racing_completing_votes_on_two_servers_send_the_wire_once(site: Site) -> None:
    """After one vote, five principals race the completing vote across both server
    processes: the graph resumes once (one wire), every vote is counted once."""
    t = thread("wire-q")
    i = raise_wire(site, t)
    before = wired(site.folder)
    assert vote(site, "fin1", t, i).json() == {"outcome": "voted", "votes": 1, "needed": 2}
    racers = FINANCE[1:]
    start = threading.Barrier(len(racers))
    digest = digest_of(site.store, t, i)

    def race(n_name: tuple[int, str]) -> httpx.Response:
        n, name = n_name
        with site.as_(name, n % 2) as client:
            client.get("/healthz")
            start.wait(timeout=60)
            return client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest})

    with ThreadPoolExecutor(len(racers)) as pool:
        results = list(pool.map(race, enumerate(racers)))
    statuses = [r.status_code for r in results]
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 409}, [r.text for r in results]
    assert [r.json()["outcome"] for r in results if r.status_code == 200].count("resumed") == 1
    assert wired(site.folder) == before + 1
    history = site.store.history(t)
    (resumed,) = [e for e in history if e.type == RESUMED]
    voters = [e.actor for e in history if e.type == VOTED]
    assert len(voters) == len(set(voters))
    # Two distinct voters, the completing one (who answered) last: fin1 and the first
    # racer to vote when no other racer had, else the racer before it and it.
    approvers = resumed.data["approvers"]
    assert len(set(approvers)) == 2 and approvers[-1] == resumed.actor and set(approvers) <= set(voters)
    (record,) = site.store.audit(thread_id=t)
    assert list(record.approvers) == approvers
    # A loser's 409 names who won and when, as an answer's does.
    later = vote(site, "requester", t, i)
    assert later.status_code == 409
    lost = [r.json() for r in results if r.status_code == 409 and not r.json().get("in_progress")]
    for late in [later.json(), *lost]:
        assert late["resolved_by"] == resumed.actor and late["resolved_at"] is not None, late


def test_one_principals_racing_votes_on_two_servers_count_once(site: Site) -> None:
    """One principal sends the same vote six times at once to both servers: one is
    recorded (the database's one-vote index), the rest are 409 'already voted'."""
    t = thread("dup")
    i = mint(site.store, t, name="two_of_finance", actor="requester")
    start = threading.Barrier(6)

    def race(n: int) -> httpx.Response:
        with site.as_("fin4", n % 2) as client:
            client.get("/healthz")
            start.wait(timeout=60)
            return client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest_of(site.store, t, i)})

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(race, range(6)))
    assert sorted(r.status_code for r in results) == [200] + [409] * 5, [r.text for r in results]
    assert all(r.json() == {"error": "already voted"} for r in results if r.status_code == 409)
    assert [e.actor for e in site.store.history(t) if e.type == VOTED] == ["fin4"]


# --- assignment ----------------------------------------------------------------------------


def test_an_assigned_interrupt_admits_only_its_assignee_and_reassign_needs_the_role(site: Site) -> None:
    """ann assigns to bob (200, recorded); cid's answer is 403 and recorded; ann may not
    assign it again (403), lead (a reassign role) hands it to role:finance; then bob is
    refused and a finance principal answers."""
    t = thread("assign")
    i = mint(site.store, t, name="plain", actor="agent")
    with site.as_("ann") as client:
        done = client.post(assign_path(t, i), json={"to": "bob"})
    assert (done.status_code, done.json()) == (200, {"assigned_to": "bob"})
    (assigned,) = [e for e in site.store.history(t) if e.type == ASSIGNED]
    assert (assigned.actor, assigned.data) == ("ann", {"to": "bob", "kind": "principal"})
    refused = vote(site, "cid", t, i, server=1)
    assert refused.status_code == 403 and "assigned to 'bob'" in refused.json()["error"]
    last = site.store.history(t)[-1]
    assert (last.type, last.actor) == (RESUME_REJECTED, "cid")
    with site.as_("ann") as client:
        again = client.post(assign_path(t, i), json={"to": "cid"})
        shown = client.get(f"/api/interrupts/{t}/{i}").json()
    assert again.status_code == 403 and "reassign" in again.json()["error"]
    assert shown["assigned_to"] == "bob"
    with site.as_("lead", 1) as client:
        moved = client.post(assign_path(t, i), json={"to": "role:finance"})
    assert moved.json() == {"assigned_to": "role:finance"}
    assert site.store.history(t)[-1].data == {"to": "finance", "kind": "role"}
    assert vote(site, "bob", t, i).status_code == 403
    answered = vote(site, "fin5", t, i)
    assert answered.status_code == 200 and answered.json()["outcome"] == "resumed"


def test_assigning_needs_the_right_to_answer_and_a_known_interrupt(site: Site) -> None:
    """A principal the policy does not let answer may not assign (403); an unknown
    interrupt is 404; a body without "to" is 400."""
    t = thread("assign-bad")
    i = mint(site.store, t, name="two_of_finance", actor="requester")
    with site.as_("ann") as client:
        assert client.post(assign_path(t, i), json={"to": "bob"}).status_code == 403
        assert client.post(assign_path(t, "nope"), json={"to": "bob"}).status_code == 404
        assert client.post(assign_path(t, i), json={"who": "bob"}).status_code == 400


# --- the inbox -------------------------------------------------------------------------------


def signed_in(site: Site, name: str) -> httpx.Client:
    """A browser-like client signed in through the inbox's token form."""
    client = site.servers[0].client()
    page = client.get("/signin")
    client.post("/signin", data={"token": PRINCIPALS[name][0], "csrf": csrf_of(page.text)})
    return client


def csrf_of(html: str) -> str:
    marker = 'name="csrf" value="'
    start = html.index(marker) + len(marker)
    return html[start:html.index('"', start)]


def test_the_inbox_page_shows_the_votes_so_far_and_assigns_through_its_form(site: Site) -> None:
    """The interrupt's page says 1 of 2 approvals and who voted; its assignment form
    refuses one principal for a quorum (409, the reason on the page, nothing written),
    records interrupt.assigned to a role, and the page then names the assignee."""
    t = thread("page")
    i = mint(site.store, t, name="two_of_finance", actor="requester")
    assert vote(site, "fin1", t, i).status_code == 200
    client = signed_in(site, "fin2")
    try:
        page = client.get(f"/interrupts/{t}/{i}")
        assert page.status_code == 200
        assert "1 of 2 approvals" in page.text and "<b>fin1</b> (approve)" in page.text
        assert 'id="assign"' in page.text and "To role:&lt;name&gt; (a quorum" in page.text
        refused = client.post(f"/interrupts/{t}/{i}/assign", data={"to": "fin3", "csrf": csrf_of(page.text)})
        assert refused.status_code == 409 and "quorum of 2" in refused.text
        assert not [e for e in site.store.history(t) if e.type == ASSIGNED]
        moved = client.post(f"/interrupts/{t}/{i}/assign", data={"to": "role:finance", "csrf": csrf_of(page.text)})
        assert moved.status_code in (200, 303), moved.text
        after = client.get(f"/interrupts/{t}/{i}").text
    finally:
        client.close()
    assert '<dd id="assigned-to"><b>role:finance</b></dd>' in after
    (assigned,) = [e for e in site.store.history(t) if e.type == ASSIGNED]
    assert (assigned.actor, assigned.data) == ("fin2", {"to": "finance", "kind": "role"})
    assert 'id="assign"' not in after  # fin2 may not reassign it (no "lead" role)


def test_the_assign_form_is_offered_to_who_may_reassign_and_only_to_them(site: Site) -> None:
    """Once assigned, the page offers the form to a holder of a reassign role even though
    it may not answer, and not to the assignee's role holder without one: the page asks
    the rule the API refuses with."""
    t = thread("reassign")
    i = mint(site.store, t, name="anything", actor="requester")
    with site.as_("ann") as ann:
        assert ann.post(assign_path(t, i), json={"to": "role:approver"}).status_code == 200
    pages = {}
    for name in ("lead", "bob"):
        client = signed_in(site, name)
        try:
            pages[name] = client.get(f"/interrupts/{t}/{i}").text
        finally:
            client.close()
    assert "You cannot answer this" in pages["lead"] and 'id="assign"' in pages["lead"]
    assert "You cannot answer this" not in pages["bob"] and 'id="assign"' not in pages["bob"]
    with site.as_("bob") as bob:
        refused = bob.post(assign_path(t, i), json={"to": "cid"})
    assert refused.status_code == 403 and "the role 'approver'" in refused.json()["error"]
    with site.as_("lead") as lead:
        assert lead.post(assign_path(t, i), json={"to": "cid"}).status_code == 200
