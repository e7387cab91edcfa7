"""The web inbox in a real headless browser (Debian's Chromium driven by Playwright), against
a real server process on SQLite and PostgreSQL.

A person signs in, sees the open interrupts, opens one, approves, rejects or answers it,
and sees the thread's timeline; a hostile payload is shown as text and never runs; the
list updates live from the event stream; a LangGraph interrupt approved in the browser
resumes its graph in the server. The page offers only the answers the policy allows the
signed-in person and says why not; a HITL tool call is edited argument by argument and
the tool runs with the edited arguments; the audit page filters and pages the records. Without a Chromium these tests skip, saying why --
except in CI (``CI=true``), where a missing browser fails them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import pytest
from freezegun import freeze_time
from langchain_core.messages import HumanMessage
from service_rig import (
    BACKENDS,
    Served,
    agent_wires,
    import_module_file,
    mint,
    serve,
    served_database,
    wired,
    write_agent_module,
    write_graph_module,
    write_json,
    write_tokens,
)

from symfonic_store import InterruptGateway, InterruptStore
from symfonic_store.events import RESUME_REJECTED, RESUMED

HOSTILE = "<script>window.__pwned = true</script><img src=x onerror='window.__pwned = true'>"
PRINCIPALS = {
    "alice": ("alice-token", ["approver"]),
    "bob": ("bob-token", ["approver"]),
    "carol": ("carol-token", ["finance"]),
}
POLICY = {"payout": {"roles": ["approver"], "four_eyes": True}, "refund": {"roles": ["finance"]}}
"""Names it does not list (``approval_required``, the wires, the agents) anyone may answer."""
WAIT_MS = 20_000


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per backend for the whole module."""
    yield from served_database(request, tmp_path_factory)


@dataclass
class Site:
    server: Served
    store: InterruptStore
    graphs: ModuleType
    folder: Path
    agents: ModuleType


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("inbox")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    policy = write_json(folder / "policy.json", POLICY)
    write_graph_module(folder, served_db)
    write_agent_module(folder, served_db)
    graphs = import_module_file(folder / "wires.py")
    agents = import_module_file(folder / "agents.py")
    store = InterruptStore(served_db)
    with serve(
        served_db, "--tokens", str(tokens), "--policy", str(policy), "--graph", "wires:graph",
        "--graph", "agents:batched", "--graph", "agents:per_call", "--graph", "agents:no_edit",
        "--graph", "agents:per_call_no_edit",
        cwd=folder,
    ) as server:
        yield Site(server, store, graphs, folder, agents)
    store.close()
    graphs.checkpointer.conn.close()
    agents.checkpointer.conn.close()


@dataclass
class Person:
    """A browser page signed in as one principal, with what its console said."""

    page: Any
    console: list[str] = field(default_factory=list)


@pytest.fixture
def person(site: Site, browser: Any) -> Iterator[Any]:
    def open_as(name: str) -> Person:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        who = Person(page)
        page.on("console", lambda message: who.console.append(f"{message.type}: {message.text}"))
        page.goto(site.server.url + "/")
        page.fill("#token", PRINCIPALS[name][0])
        page.click("form[action='/signin'] button[type=submit]")
        page.wait_for_selector("h1:has-text('Waiting for an answer')")
        return who

    contexts: list[Any] = []
    yield open_as
    for context in contexts:
        context.close()


def thread(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def card(page: Any, thread_id: str) -> Any:
    return page.locator(f"li.interrupt[data-thread='{thread_id}']")


def no_csp_violations(who: Person) -> None:
    assert not [line for line in who.console if "Content Security Policy" in line], who.console


def test_sign_in_approve_and_see_the_timeline_with_a_hostile_payload_shown_as_text(
    site: Site, person: Any, tmp_path: Path
) -> None:
    """alice signs in, sees the payload's <script> as text (it never runs), approves, and the timeline and audit name her."""
    t = thread("browser")
    mint(site.store, t, note=HOSTILE, amount=420)
    alice = person("alice")
    page = alice.page
    page.reload()
    shown = card(page, t)
    assert HOSTILE in shown.locator("pre.payload").inner_text()
    assert page.evaluate("window.__pwned") is None
    shown.locator("a.button").click()
    page.wait_for_selector("#payload")
    assert HOSTILE in page.inner_text("#payload")
    assert "waiting for an answer" in page.inner_text("#status")
    page.click("button[value=approve]")
    page.wait_for_selector(".notice")
    assert "answered by alice" in page.inner_text("#status")
    steps = page.locator("ol.timeline li").all_inner_texts()
    assert any("alice" in step and "answered: approve" in step for step in steps), steps
    page.screenshot(path=str(tmp_path / "interrupt.png"), full_page=True)
    assert page.evaluate("window.__pwned") is None
    (record,) = site.store.audit(thread_id=t)
    assert (record.outcome, record.actor, record.response) == ("resumed", "alice", {"approved": True})

    page.click(f"a[href='/threads/{quote(t, safe='')}']")
    page.wait_for_selector("h1:has-text('Thread')")
    timeline = page.inner_text("ol.timeline")
    assert "asked" in timeline and "alice" in timeline and "answered: approve" in timeline
    no_csp_violations(alice)


def test_the_list_updates_live_from_the_event_stream(site: Site, person: Any) -> None:
    """With the inbox open, an interrupt raised elsewhere appears, and one answered elsewhere leaves, without a reload."""
    bob = person("bob")
    page = bob.page
    page.wait_for_selector("#live-status.on")
    t = thread("live")
    i = mint(site.store, t, amount=17)
    card(page, t).wait_for(state="visible")
    site.store.resume(t, i, {"approved": True}, actor="someone-else")
    card(page, t).wait_for(state="detached")
    no_csp_violations(bob)


def test_reject_and_a_value_that_is_not_json(site: Site, person: Any) -> None:
    """Reject records the refusal as the answer; an answer that is not JSON is shown as an error and writes nothing."""
    t = thread("reject")
    i = mint(site.store, t)
    bob = person("bob")
    page = bob.page
    page.goto(f"{site.server.url}/interrupts/{quote(t, safe='')}/{quote(i, safe='')}")
    page.click("details.answer summary")
    page.fill("#response", "yes please")
    page.click("details.answer button[type=submit]")
    page.wait_for_selector(".alert")
    assert "not JSON" in page.inner_text(".alert")
    assert [e.type for e in site.store.history(t)] == ["interrupt.minted"]
    page.click("button[value=reject]")
    page.wait_for_selector(".notice")
    assert "answered: reject" in page.inner_text("ol.timeline")
    (record,) = site.store.audit(thread_id=t)
    assert (record.actor, record.response) == ("bob", {"approved": False})


def test_a_langgraph_interrupt_approved_in_the_browser_resumes_its_graph(site: Site, person: Any) -> None:
    """The page's Approve answers a native interrupt through --graph: the wire is sent once and the page says the graph ran on."""
    t = thread("browser-wire")
    InterruptGateway(site.graphs.graph, site.store).invoke({}, {"configurable": {"thread_id": t, "actor": "agent"}})
    (opened,) = site.store.open_interrupts(t)
    before = wired(site.folder)
    alice = person("alice")
    page = alice.page
    page.goto(f"{site.server.url}/interrupts/{quote(t, safe='')}/{quote(opened['interrupt_id'], safe='')}")
    assert "wire_approval" in page.inner_text("h1")
    page.click("button[value=approve]")
    page.wait_for_selector(".notice")
    assert "the thread waits on nothing" in page.inner_text("#live")
    assert wired(site.folder) == before + 1
    history = site.store.history(t)
    assert [e.actor for e in history if e.type == RESUMED] == ["alice"]
    assert not [e for e in history if e.type == RESUME_REJECTED]
    no_csp_violations(alice)


def test_an_answer_the_graph_does_not_take_is_shown_on_the_page_and_the_interrupt_stays_open(
    site: Site, person: Any
) -> None:
    """The graph raises on the answer: the page shows its error (422), the timeline the refusal, and Approve still works."""
    t = thread("browser-bad")
    InterruptGateway(site.graphs.graph, site.store).invoke({}, {"configurable": {"thread_id": t, "actor": "agent"}})
    (opened,) = site.store.open_interrupts(t)
    bob = person("bob")
    page = bob.page
    page.goto(f"{site.server.url}/interrupts/{quote(t, safe='')}/{quote(opened['interrupt_id'], safe='')}")
    page.click("details.answer summary")
    page.fill("#response", '"bad"')
    page.click("details.answer button[type=submit]")
    page.wait_for_selector(".alert")
    assert "cannot read the answer" in page.inner_text(".alert")
    assert "refused (not_taken)" in page.inner_text("ol.timeline")
    assert "waiting for an answer" in page.inner_text("#status")
    page.click("button[value=approve]")
    page.wait_for_selector(".notice")
    assert "answered by bob" in page.inner_text("#status")


# --- what the signed-in person may do ----------------------------------------------


def open_interrupt(site: Site, page: Any, thread_id: str, interrupt_id: str) -> None:
    page.goto(f"{site.server.url}/interrupts/{quote(thread_id, safe='')}/{quote(interrupt_id, safe='')}")
    page.wait_for_selector("#payload")


def test_the_page_offers_no_answer_the_policy_forbids_and_says_why(
    site: Site, person: Any, tmp_path: Path
) -> None:
    """No Approve/Reject/Answer for a forbidden interrupt, the policy's reason instead, nothing recorded for looking; a forged POST is still refused and recorded."""
    own = thread("own-payout")
    own_id = mint(site.store, own, name="payout", actor="alice", amount=5000)
    refund = thread("refund")
    refund_id = mint(site.store, refund, name="refund", amount=80)
    nameless = thread("unknown-requester")
    nameless_id = mint(site.store, nameless, name="payout", actor=None, amount=7)
    alice = person("alice")
    page = alice.page

    for t, i, why in (
        (own, own_id, "'alice' asked for this interrupt and may not answer it; another person must"),
        (refund, refund_id, "needs one of the roles finance (held: approver)"),
        (nameless, nameless_id, "the requester of this interrupt is unknown"),
    ):
        open_interrupt(site, page, t, i)
        assert why in page.inner_text("#forbidden")
        assert "You cannot answer this." in page.inner_text("#forbidden")
        assert page.locator("button[value=approve]").count() == 0
        assert page.locator("button[value=reject]").count() == 0
        assert page.locator("details.answer").count() == 0
        assert page.locator("details.edit").count() == 0
        if t == own:
            page.screenshot(path=str(tmp_path / "forbidden.png"), full_page=True)
    for t in (own, refund, nameless):
        assert [e.type for e in site.store.history(t)] == ["interrupt.minted"], "looking recorded something"

    # The refusal still stands behind the page: a hand-made form is refused and recorded.
    open_interrupt(site, page, refund, refund_id)
    digest = page.get_attribute("dd[title]", "title")
    page.evaluate(
        """([action, digest]) => {
            const form = document.createElement("form");
            form.method = "post";
            form.action = action;
            const fields = {csrf: document.querySelector("input[name=csrf]").value, digest, decision: "approve"};
            for (const [name, value] of Object.entries(fields)) {
                const input = document.createElement("input");
                input.type = "hidden"; input.name = name; input.value = value;
                form.appendChild(input);
            }
            document.body.appendChild(form);
            form.submit();
        }""",
        [f"/interrupts/{quote(refund, safe='')}/{quote(refund_id, safe='')}/answer", digest],
    )
    page.wait_for_selector(".alert")
    assert "not allowed" in page.inner_text(".alert") and "recorded" in page.inner_text(".alert")
    refused = [(e.actor, e.data.get("why")) for e in site.store.history(refund) if e.type == RESUME_REJECTED]
    assert refused == [("alice", "not_allowed")]

    # Those the policy allows get the buttons: bob answers alice's payout, carol the refund.
    bob = person("bob")
    open_interrupt(site, bob.page, own, own_id)
    assert bob.page.locator("#forbidden").count() == 0
    bob.page.click("button[value=approve]")
    bob.page.wait_for_selector(".notice")
    carol = person("carol")
    open_interrupt(site, carol.page, refund, refund_id)
    carol.page.click("button[value=reject]")
    carol.page.wait_for_selector(".notice")
    assert [r.actor for r in site.store.audit(thread_id=own)] == ["bob"]
    assert [r.actor for r in site.store.audit(thread_id=refund)] == ["carol"]
    no_csp_violations(alice)


# --- editing a HITL tool call ---------------------------------------------------------


def ask_agent(site: Site, graph: Any, t: str, *amounts: int) -> str:
    """Run an agent until its middleware holds the wires for review; the interrupt's id."""
    InterruptGateway(graph, site.store).invoke(
        {"messages": [HumanMessage(json.dumps(list(amounts)))]},
        {"configurable": {"thread_id": t, "actor": "agent"}},
    )
    (opened,) = site.store.open_interrupts(t)
    return str(opened["interrupt_id"])


def test_a_batched_hitl_edit_is_a_form_and_the_tool_runs_with_the_edited_arguments(
    site: Site, person: Any, tmp_path: Path
) -> None:
    """Each wire's tool name and arguments are fields; bad JSON is an error and admits nothing; the sent edit runs the tool with the edited arguments."""
    t = thread("hitl-edit")
    i = ask_agent(site, site.agents.batched, t, 10, 20)
    before = agent_wires(site.folder)
    bob = person("bob")
    page = bob.page
    open_interrupt(site, page, t, i)
    page.click("details.edit summary")
    calls = page.locator("fieldset.action")
    assert calls.count() == 2
    assert "wire" in calls.nth(0).locator("legend").inner_text()
    assert [page.input_value("#arg-0-0"), page.input_value("#arg-0-1")] == ["10", '"acct-1"']
    assert [page.input_value("#arg-1-0"), page.input_value("#arg-1-1")] == ["20", '"acct-1"']
    assert page.get_attribute("#arg-0-0", "data-arg") == "amount"
    assert page.is_checked("input[name=choice-0][value=edit]")
    page.screenshot(path=str(tmp_path / "edit.png"), full_page=True)

    page.fill("#arg-0-0", "15 dollars")
    page.click("#edit-form button[type=submit]")
    page.wait_for_selector(".alert")
    assert "The argument 'amount' of 'wire' is not JSON" in page.inner_text(".alert")
    assert page.input_value("#arg-0-0") == "15 dollars", "what was typed is kept"
    assert [e.type for e in site.store.history(t) if e.interrupt_id == i] == ["interrupt.minted"]

    page.fill("#arg-0-0", "15")
    page.fill("#arg-0-1", '"acct-2"')
    page.check("input[name=choice-1][value=approve]")
    page.click("#edit-form button[type=submit]")
    page.wait_for_selector(".notice")
    assert sorted(agent_wires(site.folder)[len(before):]) == ["wired 15 to acct-2", "wired 20 to acct-1"]
    records = site.store.audit(thread_id=t)
    assert [(r.decision, r.actor) for r in records] == [("edit", "bob"), ("approve", "bob")]
    assert records[0].response == {"decisions": [
        {"type": "edit", "edited_action": {"name": "wire", "args": {"amount": 15, "to": "acct-2"}}},
        {"type": "approve"},
    ]}
    no_csp_violations(bob)


def test_a_per_call_hitl_edit_runs_the_tool_with_the_edited_arguments_and_no_edit_means_no_form(
    site: Site, person: Any
) -> None:
    """A per-call ToolApprovalRequest is answered with one edit decision (refused by the graph, shown, when its tool allows no edit); a batched review config without edit gets no edit form."""
    t = thread("hitl-per-call")
    i = ask_agent(site, site.agents.per_call, t, 7)
    before = agent_wires(site.folder)
    alice = person("alice")
    page = alice.page
    open_interrupt(site, page, t, i)
    page.click("details.edit summary")
    assert page.input_value("#arg-0-0") == "7"
    page.fill("#arg-0-0", "8")
    page.click("#edit-form button[type=submit]")
    page.wait_for_selector(".notice")
    assert agent_wires(site.folder)[len(before):] == ["wired 8 to acct-1"]
    (record,) = site.store.audit(thread_id=t)
    assert (record.decision, record.response) == (
        "edit", {"type": "edit", "edited_action": {"name": "wire", "args": {"amount": 8, "to": "acct-1"}}}
    )

    # A per-call value carries no review config: the form is offered, and the graph's own
    # response_schema refuses the edit; the page says so and the interrupt stays open.
    strict = thread("hitl-per-call-no-edit")
    strict_id = ask_agent(site, site.agents.per_call_no_edit, strict, 9)
    open_interrupt(site, page, strict, strict_id)
    page.click("details.edit summary")
    page.fill("#arg-0-0", "10")
    page.click("#edit-form button[type=submit]")
    page.wait_for_selector(".alert")
    assert "did not take the answer" in page.inner_text(".alert")
    assert "refused (not_taken)" in page.inner_text("ol.timeline")
    assert "waiting for an answer" in page.inner_text("#status")
    assert "wired 10 to acct-1" not in agent_wires(site.folder)

    fixed = thread("hitl-no-edit")
    open_interrupt(site, page, fixed, ask_agent(site, site.agents.no_edit, fixed, 3))
    assert page.locator("details.edit").count() == 0
    assert page.locator("button[value=approve]").count() == 1


# --- the audit page -------------------------------------------------------------------


def rows(page: Any) -> list[tuple[str, str, str]]:
    """The audit table's rows as (outcome, decision, actor)."""
    found = []
    for row in page.locator("table.audit tbody tr").all():
        found.append((row.locator("td.outcome").inner_text().split()[0], row.locator("td.decision").inner_text(),
                      row.locator("td.actor").inner_text()))
    return found


def answered(page: Any) -> list[tuple[str, str]]:
    return [(outcome, actor) for outcome, _, actor in rows(page)]


def test_the_audit_page_filters_by_thread_actor_decision_and_time_and_pages(
    site: Site, person: Any, tmp_path: Path
) -> None:
    """The nav's Audit link opens the records; thread, actor, decision, since/until filter them, pages follow, payloads are text."""
    t = thread("audited")
    with freeze_time("2031-03-01 10:00:00"):
        first = mint(site.store, t, note=HOSTILE, amount=1)
        site.store.resume(t, first, {"approved": True}, actor="alice")
    with freeze_time("2031-03-02 10:00:00"):
        second = mint(site.store, t, amount=2)
        site.store.resume(t, second, {"approved": False}, actor="bob")
    with freeze_time("2031-03-03 10:00:00"):
        mint(site.store, t, amount=3)
    h = thread("audited-hitl")
    i = ask_agent(site, site.agents.batched, h, 1, 2)
    InterruptGateway(site.agents.batched, site.store).answer(
        h, i, {"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"}]}, actor="carol"
    )

    with site.server.client() as anonymous:
        assert anonymous.get("/audit").status_code == 303, "the audit page needs a signed-in person"
    alice = person("alice")
    page = alice.page
    page.click("#nav-audit")
    page.wait_for_selector("h1:has-text('Audit')")

    def apply(**filters: str) -> None:
        for name in ("thread", "actor", "decision", "since", "until"):
            page.fill(f"#audit-filters input[name={name}]", filters.get(name, ""))
        page.click("#audit-filters button[type=submit]")
        page.wait_for_load_state()

    apply(thread=t)
    assert answered(page) == [("resumed", "alice"), ("resumed", "bob"), ("pending", "—")]
    # The seed markers' answers say what they decided (SPEC §12: {"approved": bool}).
    assert rows(page) == [("resumed", "approve", "alice"), ("resumed", "reject", "bob"), ("pending", "—", "—")]
    apply(thread=t, decision="reject")
    assert rows(page) == [("resumed", "reject", "bob")]
    # Answered through the Python API here: nobody authenticated the actor.
    assert page.locator("table.audit tbody td.auth").inner_text() == "—"
    apply(thread=t)
    page.locator("table.audit tbody tr").first.locator("details").first.locator("summary").click()
    assert HOSTILE in page.locator("table.audit pre.detail").first.inner_text()
    assert page.evaluate("window.__pwned") is None
    page.screenshot(path=str(tmp_path / "audit.png"), full_page=True)

    apply(thread=t, actor="bob")
    assert answered(page) == [("resumed", "bob")]
    apply(thread=t, since="2031-03-02T00:00Z", until="2031-03-02T23:59:59Z")
    assert answered(page) == [("resumed", "bob")]
    apply(thread=t, since="2031-03-02")
    assert [r[0] for r in rows(page)] == ["resumed", "pending"]
    apply(thread=h, decision="reject")
    assert rows(page) == [("resumed", "reject", "carol")]
    apply(decision="reject", actor="carol", thread=h)
    assert "call 2" in page.inner_text("table.audit tbody")
    apply(thread=t, since="yesterday")
    assert "not an ISO 8601 date" in page.inner_text(".alert")

    page.goto(f"{site.server.url}/audit?thread={quote(t, safe='')}&limit=2")
    assert [r[2] for r in rows(page)] == ["alice", "bob"]
    page.click("#next-page")
    page.wait_for_selector("#first-page")
    assert answered(page) == [("pending", "—")]
    assert page.locator("#next-page").count() == 0
    no_csp_violations(alice)
