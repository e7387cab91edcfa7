"""Assignment through a real ``symfonic-store serve`` process, wave 4 (SPEC §15 amended), on
SQLite and PostgreSQL: a quorum interrupt goes only to a role, whose principals each vote;
``to`` is trimmed and, with tokens, must name a known principal; a refused assignment is
recorded as ``assign_not_allowed``, not among the audit's attempts nor the answer metrics;
assignments are rate-limited with the answers (``--answer-limit``), on the API and the form.

The server runs with ``--answer-limit 8``; each test but the rate limit's own keeps each
principal well below it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from service_rig import (
    BACKENDS,
    Served,
    answer_path,
    digest_of,
    mint,
    serve,
    served_database,
    write_json,
    write_tokens,
)

from symfonic_store import InterruptStore
from symfonic_store.events import ASSIGNED, RESUME_REJECTED, RESUMED, VOTED

LIMIT = 8
PRINCIPALS: dict[str, tuple[str, list[str]]] = {
    **{name: (f"token-{name}", ["finance"]) for name in ("fin1", "fin2", "fin3")},
    **{name: (f"token-{name}", ["approver"]) for name in ("ann", "bob", "cid", "spam")},
    "lead": ("token-lead", ["lead"]),
}
POLICY = {
    "two_of_finance": {"roles": ["finance"], "quorum": 2},
    "*": {"roles": ["approver", "finance", "lead"], "reassign": ["lead"]},
}


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served_database(request, tmp_path_factory)


@dataclass
class Site:
    server: Served
    store: InterruptStore
    folder: Path

    def as_(self, name: str) -> httpx.Client:
        return self.server.client(PRINCIPALS[name][0])


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("assign")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    policy = write_json(folder / "policy.json", POLICY)
    store = InterruptStore(served_db)
    with serve(served_db, "--tokens", str(tokens), "--policy", str(policy), "--answer-limit", str(LIMIT)) as one:
        yield Site(one, store, folder)
    store.close()


def thread(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def assign_path(thread_id: str, interrupt_id: str) -> str:
    return f"/api/interrupts/{quote(thread_id, safe='')}/{quote(interrupt_id, safe='')}/assign"


def assign(site: Site, name: str, t: str, i: str, to: object) -> httpx.Response:
    with site.as_(name) as client:
        return client.post(assign_path(t, i), json={"to": to})


def answer(site: Site, name: str, t: str, i: str) -> httpx.Response:
    with site.as_(name) as client:
        return client.post(answer_path(t, i), json={"response": {"approved": True}, "digest": digest_of(site.store, t, i)})


def signed_in(site: Site, name: str) -> httpx.Client:
    """A browser-like client signed in through the inbox's token form."""
    client = site.server.client()
    page = client.get("/signin")
    client.post("/signin", data={"token": PRINCIPALS[name][0], "csrf": csrf_of(page.text)})
    return client


def csrf_of(html: str) -> str:
    marker = 'name="csrf" value="'
    start = html.index(marker) + len(marker)
    return html[start:html.index('"', start)]


def post_form(site: Site, name: str, t: str, i: str, to: str) -> httpx.Response:
    """The interrupt page's Assign form, posted by ``name``."""
    client = signed_in(site, name)
    try:
        page = client.get(f"/interrupts/{t}/{i}")
        return client.post(f"/interrupts/{t}/{i}/assign", data={"to": to, "csrf": csrf_of(page.text)})
    finally:
        client.close()


def test_a_quorum_interrupt_is_assigned_only_to_a_role_whose_principals_each_vote(site: Site) -> None:
    """Assigning a quorum interrupt to one principal is 409 with the reason, nothing written
    (API and form); assigned to role:finance, two of its principals vote and resume it."""
    t = thread("quorum")
    i = mint(site.store, t, name="two_of_finance", actor="agent")
    before = site.store.history(t)
    refused = assign(site, "fin1", t, i, "fin2")
    assert refused.status_code == 409, refused.text
    assert "quorum of 2" in refused.json()["error"] and "'fin2'" in refused.json()["error"]
    page = post_form(site, "fin3", t, i, "fin2")
    assert page.status_code == 409 and "quorum of 2" in page.text
    assert site.store.history(t) == before
    moved = post_form(site, "fin3", t, i, " role:finance ")
    assert moved.status_code in (200, 303), moved.text
    (assigned,) = [e for e in site.store.history(t) if e.type == ASSIGNED]
    assert (assigned.actor, assigned.data) == ("fin3", {"to": "finance", "kind": "role"})
    first = answer(site, "fin1", t, i)
    assert first.json() == {"outcome": "voted", "votes": 1, "needed": 2}
    done = answer(site, "fin2", t, i)
    assert done.status_code == 200 and done.json()["approvers"] == ["fin1", "fin2"], done.text
    assert [e.actor for e in site.store.history(t) if e.type == VOTED] == ["fin1", "fin2"]


def test_the_assignee_is_trimmed_and_must_be_a_principal_the_tokens_file_names(site: Site) -> None:
    """``" bob "`` is assigned as ``bob`` (who may then answer); an unknown principal is 400
    naming it, a blank one 400; neither writes anything."""
    t = thread("trim")
    i = mint(site.store, t, name="plain", actor="agent")
    before = site.store.history(t)
    unknown = assign(site, "ann", t, i, "carol")
    assert unknown.status_code == 400 and "'carol'" in unknown.json()["error"], unknown.text
    for blank in ("   ", " role: "):
        assert assign(site, "ann", t, i, blank).status_code == 400
    assert site.store.history(t) == before
    done = assign(site, "ann", t, i, " bob ")
    assert (done.status_code, done.json()) == (200, {"assigned_to": "bob"})
    assert site.store.history(t)[-1].data == {"to": "bob", "kind": "principal"}
    # Who may not assign it learns nothing of which names exist: the same 403 either way.
    refusals = [assign(site, "cid", t, i, name) for name in ("carol", "ann")]
    assert [r.status_code for r in refusals] == [403, 403], [r.text for r in refusals]
    answered = answer(site, "bob", t, i)
    assert answered.status_code == 200 and answered.json()["outcome"] == "resumed", answered.text


def test_a_refused_assignment_is_recorded_as_such_and_is_no_answer_attempt(site: Site) -> None:
    """cid may not reassign (no reassign role): 403, recorded as ``assign_not_allowed`` with
    ``{assign, error}`` and no response; the audit lists no attempt for it, and the metrics
    count no answer; cid's refused answer that follows is the one attempt."""
    t = thread("refused")
    i = mint(site.store, t, name="plain", actor="agent")
    assert assign(site, "lead", t, i, "bob").status_code == 200
    refused = assign(site, "cid", t, i, "ann")
    assert refused.status_code == 403 and "reassign" in refused.json()["error"]
    last = site.store.history(t)[-1]
    assert (last.type, last.actor) == (RESUME_REJECTED, "cid")
    assert set(last.data) == {"why", "assign", "error"}
    assert (last.data["why"], last.data["assign"]) == ("assign_not_allowed", "ann")
    with site.as_("cid") as client:
        assert client.get("/api/audit", params={"thread": t}).json()["items"][0]["attempts"] == []
    assert answer(site, "cid", t, i).status_code == 403  # not the assignee: a refused answer
    with site.as_("cid") as client:
        (record,) = client.get("/api/audit", params={"thread": t}).json()["items"]
        metrics = client.get("/metrics").text
    assert [(a["actor"], a["why"]) for a in record["attempts"]] == [("cid", "not_allowed")]
    assert 'outcome="assign_not_allowed"' not in metrics
    answers = [e for e in site.store.events() if e.type == RESUME_REJECTED and e.data["why"] == "not_allowed"]
    assert f'symfonic_answers_total{{outcome="not_allowed"}} {float(len(answers))}' in metrics


def test_assignments_are_rate_limited_with_the_answers_and_past_the_limit_append_nothing(site: Site) -> None:
    """spam, who may not reassign, sends more assignments than --answer-limit allows: each
    within the limit is refused and recorded (403); past it the API is 429 with Retry-After,
    an answer is 429 too (one budget), the inbox form is 429, and the thread grows no more."""
    t = thread("spam")
    i = mint(site.store, t, name="plain", actor="agent")
    assert assign(site, "lead", t, i, "bob").status_code == 200
    start = len(site.store.history(t))
    with site.as_("spam") as client:
        statuses = [client.post(assign_path(t, i), json={"to": "cid"}).status_code for _ in range(LIMIT)]
        assert statuses == [403] * LIMIT
        assert len(site.store.history(t)) == start + LIMIT
        limited = [client.post(assign_path(t, i), json={"to": "cid"}) for _ in range(3)]
    assert {r.status_code for r in limited} == {429}
    assert all(int(r.headers["Retry-After"]) >= 1 for r in limited)
    assert "too many answers and assignments from 'spam'" in limited[0].json()["error"]
    assert answer(site, "spam", t, i).status_code == 429
    page = post_form(site, "spam", t, i, "cid")
    assert page.status_code == 429 and "Too many answers and assignments" in page.text
    history = site.store.history(t)
    assert len(history) == start + LIMIT
    assert [e.data["why"] for e in history[start:]] == ["assign_not_allowed"] * LIMIT
    assert not [e for e in history if e.type == RESUMED]


def listed(site: Site, name: str, assigned_to: str) -> httpx.Response:
    with site.as_(name) as client:
        return client.get("/api/interrupts", params={"assigned_to": assigned_to, "limit": "100"})


def keys(response: httpx.Response) -> set[tuple[str, str]]:
    assert response.status_code == 200, response.text
    return {(i["thread_id"], i["interrupt_id"]) for i in response.json()["items"]}


def test_the_inbox_filters_by_the_latest_assignment(site: Site) -> None:
    """``GET /api/interrupts?assigned_to=`` (a principal or ``role:<name>``) and the inbox
    page's filter list what is assigned so now: a reassignment moves the interrupt from one
    filter to the other, an answer takes it off; a value that names no one is a 400."""
    t = thread("filter")
    i = mint(site.store, t, name="plain", actor="agent")
    assert (t, i) not in keys(listed(site, "ann", "bob"))
    assert assign(site, "ann", t, i, "bob").status_code == 200
    assert (t, i) in keys(listed(site, "ann", "bob"))
    assert (t, i) in keys(listed(site, "ann", " bob "))
    assert (t, i) not in keys(listed(site, "ann", "role:finance"))
    assert assign(site, "lead", t, i, "role:finance").status_code == 200
    assert (t, i) not in keys(listed(site, "ann", "bob"))
    assert (t, i) in keys(listed(site, "ann", "role:finance"))
    for bad in ("role:", "   ", "x" * 300):
        refused = listed(site, "ann", bad)
        assert refused.status_code == 400 and "assigned_to" in refused.json()["error"], refused.text
    client = signed_in(site, "fin1")
    try:
        page = client.get("/", params={"assigned_to": "role:finance"})
        assert page.status_code == 200 and i in page.text and 'name="assigned_to"' in page.text
        assert i not in client.get("/", params={"assigned_to": "bob"}).text
        assert client.get("/", params={"assigned_to": "role:"}).status_code == 400
    finally:
        client.close()
    assert answer(site, "fin1", t, i).status_code == 200
    assert (t, i) not in keys(listed(site, "ann", "role:finance"))
