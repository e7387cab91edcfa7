"""What you saw is what you approve, visibly: the web inbox in a real browser (SPEC §12).

A payload ``"\\u202e024$"`` would read as ``$420``, a zero-width joiner as nothing, a
Cyrillic ``а`` as a Latin ``a``. Here they sit in a payload, a thread id, the requester
(the mint's actor) and the signed-in approver's name; Debian's Chromium, driven by
Playwright against a real server process on SQLite and PostgreSQL, must show each as
visible text -- the escape ``⟨U+202E⟩``, the mark ``⚠⟨Cyrillic+Latin⟩`` -- on every page
and in a live update, while the digest the form carries stays the one over the stored
value, so the answer is admitted exactly as the API's would be.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from service_rig import (
    BACKENDS,
    Served,
    answer_path,
    digest_of,
    mint,
    serve,
    served_database,
    write_tokens,
)

from symfonic_store import InterruptStore
from symfonic_store.events import RESUMED

BIDI, ZWJ, RLO = "\u202e024$", "\u200d", "\u202e"
LOOKALIKE = "\u0430lice"  # the first letter is Cyrillic
PAYLOAD = {"amount": BIDI, "to": LOOKALIKE, "note": f"wire{ZWJ}now"}
REQUESTER = f"\u0430gent{ZWJ}{RLO}7"
APPROVER = f"b\u043eb{ZWJ}{RLO}"  # a Cyrillic о between two Latin b's
PRINCIPALS = {APPROVER: ("bob-token", ["approver"])}
SHOWN_PAYLOAD = ("⟨U+202E⟩024$", "⚠⟨Cyrillic+Latin⟩\u0430lice", "wire⟨U+200D⟩now")
SHOWN_REQUESTER = "⚠⟨Cyrillic+Latin⟩\u0430gent⟨U+200D⟩⟨U+202E⟩7"
SHOWN_APPROVER = "⚠⟨Latin+Cyrillic⟩b\u043eb⟨U+200D⟩⟨U+202E⟩"
INVISIBLE = (RLO, ZWJ)
WAIT_MS = 20_000
SCREENSHOTS = os.environ.get("SYMFONIC_STORE_SCREENSHOTS")
"""A folder to copy the screenshots to, for a person to look at them."""


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served_database(request, tmp_path_factory)


@dataclass
class Site:
    server: Served
    store: InterruptStore


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("visible")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    store = InterruptStore(served_db)
    with serve(served_db, "--tokens", str(tokens), cwd=folder) as server:
        yield Site(server, store)
    store.close()


@pytest.fixture
def page(site: Site, browser: Any) -> Iterator[Any]:
    """A page signed in as the approver whose name hides a look-alike and two invisible characters."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    opened.goto(site.server.url + "/")
    opened.fill("#token", PRINCIPALS[APPROVER][0])
    opened.click("form[action='/signin'] button[type=submit]")
    opened.wait_for_selector("h1:has-text('Waiting for an answer')")
    yield opened
    context.close()


def hostile_thread(label: str) -> str:
    return f"{label}{ZWJ}-{uuid.uuid4().hex[:8]}"


def shown(thread_id: str) -> str:
    return thread_id.replace(ZWJ, "⟨U+200D⟩")


def plain(text: str) -> None:
    """Nothing invisible reaches what the page shows."""
    assert not [c for c in INVISIBLE if c in text], ascii(text)


def screenshot(page: Any, path: Path, request: pytest.FixtureRequest) -> None:
    page.screenshot(path=str(path), full_page=True)
    if SCREENSHOTS:
        name = f"{request.node.name}-{path.name}".replace("/", "_")
        shutil.copy(path, Path(SCREENSHOTS) / name)


def test_the_inbox_shows_hidden_and_look_alike_characters_and_admits_the_stored_digest(
    site: Site, page: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Payload, thread, requester and approver show escapes and marks on every page; Approve is admitted with the API's digest."""
    t = hostile_thread("refund")
    i = mint(site.store, t, actor=REQUESTER, **PAYLOAD)
    page.reload()
    card = page.locator("li.interrupt").filter(has=page.locator(f"a[href*='{quote(i, safe='')}']"))
    listed = card.inner_text()
    plain(listed)
    assert shown(t) in listed and all(part in listed for part in SHOWN_PAYLOAD), listed
    assert SHOWN_APPROVER in page.inner_text("header .who .name")
    assert "RIGHT-TO-LEFT OVERRIDE" in (card.locator("pre.payload .esc").first.get_attribute("title") or "")
    assert "Cyrillic, Latin" in (card.locator("pre.payload .mixed").first.get_attribute("title") or "")
    screenshot(page, tmp_path / "inbox.png", request)

    card.locator("a.button").click()
    page.wait_for_selector("#payload")
    facts = page.inner_text("dl.facts")
    plain(page.inner_text("main"))
    assert shown(t) in facts and SHOWN_REQUESTER in facts, facts
    assert all(part in page.inner_text("#payload") for part in SHOWN_PAYLOAD)
    assert SHOWN_REQUESTER in page.inner_text("ol.timeline")
    plain(page.title())
    with site.server.client(PRINCIPALS[APPROVER][0]) as api:
        via_api = api.get(f"/api/interrupts/{quote(t, safe='')}/{quote(i, safe='')}").json()
    assert via_api["payload"] == PAYLOAD  # the API carries the stored text itself
    form_digest = page.get_attribute("form.decide input[name=digest]", "value")
    assert form_digest == via_api["digest"] == digest_of(site.store, t, i)
    screenshot(page, tmp_path / "interrupt.png", request)

    page.click("button[value=approve]")
    page.wait_for_selector(".notice")
    status = page.inner_text("#status")
    plain(status)
    assert f"answered by {SHOWN_APPROVER}" in status
    assert any(SHOWN_APPROVER in step for step in page.locator("ol.timeline li").all_inner_texts())
    (resumed,) = [e for e in site.store.history(t) if e.type == RESUMED]
    assert resumed.actor == APPROVER  # recorded as the principal is named, not as it is shown
    (record,) = site.store.audit(thread_id=t)
    assert (record.outcome, record.actor, record.payload) == ("resumed", APPROVER, PAYLOAD)
    screenshot(page, tmp_path / "answered.png", request)

    page.click(f"a[href='/threads/{quote(t, safe='')}']")
    page.wait_for_selector("h1:has-text('Thread')")
    assert shown(t) in page.inner_text("h1")
    timeline = page.inner_text("ol.timeline")
    plain(timeline)
    assert SHOWN_REQUESTER in timeline and SHOWN_APPROVER in timeline
    assert all(part in timeline for part in SHOWN_PAYLOAD)
    assert shown(t) in page.title()


def test_the_digest_the_page_shows_is_the_one_the_api_admits(site: Site, page: Any) -> None:
    """An answer sent to the API with the digest read from the page is admitted: the page's digest covers the stored value."""
    t = hostile_thread("api")
    i = mint(site.store, t, actor=REQUESTER, **PAYLOAD)
    page.goto(f"{site.server.url}/interrupts/{quote(t, safe='')}/{quote(i, safe='')}")
    digest = page.get_attribute("form.decide input[name=digest]", "value")
    with site.server.client(PRINCIPALS[APPROVER][0]) as api:
        answered = api.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest})
    assert answered.status_code == 200, answered.text
    assert answered.json()["actor"] == APPROVER


def test_a_live_update_shows_the_escapes_too(site: Site, page: Any) -> None:
    """An interrupt raised while the inbox is open arrives through the event stream already revealed."""
    page.wait_for_selector("#live-status.on")
    t = hostile_thread("live")
    mint(site.store, t, actor=REQUESTER, **PAYLOAD)
    card = page.locator(f"li.interrupt[data-thread='{t}']")
    card.wait_for(state="visible")
    listed = card.inner_text()
    plain(listed)
    assert shown(t) in listed and all(part in listed for part in SHOWN_PAYLOAD), listed
