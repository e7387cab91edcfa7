"""The web inbox in a real headless browser (Debian's Chromium driven by Playwright), against
a real server process on SQLite and PostgreSQL.

A person signs in, sees the open interrupts, opens one, approves, rejects or answers it,
and sees the thread's timeline; a hostile payload is shown as text and never runs; the
list updates live from the event stream; a LangGraph interrupt approved in the browser
resumes its graph in the server. Without a Chromium these tests skip, saying why --
except in CI (``CI=true``), where a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import pytest
from service_rig import (
    BACKENDS,
    Served,
    import_module_file,
    mint,
    serve,
    served_database,
    wired,
    write_graph_module,
    write_tokens,
)

from symfonic_store import InterruptGateway, InterruptStore
from symfonic_store.events import RESUME_REJECTED, RESUMED

HOSTILE = "<script>window.__pwned = true</script><img src=x onerror='window.__pwned = true'>"
PRINCIPALS = {"alice": ("alice-token", ["approver"]), "bob": ("bob-token", ["approver"])}
WAIT_MS = 20_000


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


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        no_browser("playwright is not installed (pip install -e '.[test]')")
    path = chromium_path()
    if path is None:
        no_browser("no Chromium found: apt-get install chromium (or set SYMFONIC_STORE_CHROMIUM)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True)
        yield launched
        launched.close()


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


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("inbox")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    write_graph_module(folder, served_db)
    graphs = import_module_file(folder / "wires.py")
    store = InterruptStore(served_db)
    with serve(served_db, "--tokens", str(tokens), "--graph", "wires:graph", cwd=folder) as server:
        yield Site(server, store, graphs, folder)
    store.close()
    graphs.checkpointer.conn.close()


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
