"""Tenants in the approval service (SPEC §15), against a real server process on SQLite and
PostgreSQL: a principal sees only its tenants' interrupts on every route, in the log and
its stream; another tenant's interrupt is 404 with the body of an unknown one."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from factories import marker
from service_rig import BACKENDS, Served, answer_path, digest_of, serve, served_database

from symfonic_store import EXPIRED, RESUME_REJECTED, InterruptExpiredError, InterruptStore
from symfonic_store.protocol import PENDING_KEY
from symfonic_store.server import create_app
from symfonic_store.server.paging import encode_cursor


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served_database(request, tmp_path_factory)


TOKENS = {
    "ann": ("token-ann", ["acme"]),
    "gus": ("token-gus", ["globex"]),
    "pat": ("token-pat", None),  # no tenants: the untenanted interrupts only
    "root": ("token-root", ["*"]),
}


def write_tokens(path: Path) -> Path:
    data = {}
    for name, (token, tenants) in TOKENS.items():
        entry: dict[str, object] = {"token_sha256": hashlib.sha256(token.encode()).hexdigest(), "roles": []}
        if tenants is not None:
            entry["tenants"] = tenants
        data[name] = entry
    path.write_text(json.dumps(data))
    return path


@dataclass
class Minted:
    thread_id: str
    interrupt_id: str
    name: str
    secret: str


@dataclass
class Site:
    server: Served
    store: InterruptStore
    by_tenant: dict[str | None, Minted]
    tokens: Path

    def as_(self, who: str) -> httpx.Client:
        return self.server.client(TOKENS[who][0])


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("tenants")
    tokens = write_tokens(folder / "tokens.json")
    store = InterruptStore(served_db)
    by_tenant: dict[str | None, Minted] = {}
    for tenant in ("acme", "globex", None):
        label = tenant or "plain"
        minted = Minted(f"t-{label}-{uuid.uuid4().hex[:6]}", f"i-{label}-{uuid.uuid4().hex[:6]}",
                        f"{label}_wire", f"{label.upper()}-SECRET-{uuid.uuid4().hex[:6]}")
        store.mint(minted.thread_id, marker(minted.interrupt_id, name=minted.name, secret=minted.secret),
                   actor="agent", tenant=tenant)
        by_tenant[tenant] = minted
    with serve(served_db, "--tokens", str(tokens), "--rate-limit", "off", cwd=folder) as server:
        yield Site(server, store, by_tenant, tokens)
    store.close()


SEES = {"ann": {"acme"}, "gus": {"globex"}, "pat": {None}, "root": {"acme", "globex", None}}


def _path(*ids: str) -> str:
    return "/".join(quote(i, safe="") for i in ids)


def _stream_text(site: Site, who: str, last: int | None = None) -> str:
    """The event stream from the start, read until ``last`` (else the last event of
    ``site.by_tenant`` that ``who`` may see)."""
    if last is None:
        last = max(
            e.position for e in site.store.events()
            if (e.interrupt_id is None and who == "root")
            or any(e.interrupt_id == m.interrupt_id and t in SEES[who] for t, m in site.by_tenant.items())
        )
    seen = []
    with site.as_(who) as client, client.stream("GET", "/api/events/stream", params={"after": 0}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            seen.append(line)
            if line == f"id: {last}":
                break
    return "\n".join(seen)


ROUTES_WALKED = {
    "/healthz", "/metrics", "/api/interrupts", "/api/interrupts/{rest:path}", "/api/audit",
    "/api/threads/{rest:path}", "/api/events", "/api/events/stream", "/", "/signin", "/signout",
    "/interrupts/{rest:path}", "/threads/{rest:path}", "/audit", "/static",
}


def test_the_walk_covers_every_route_of_the_app(site: Site, tmp_path: Path) -> None:
    """The leak test below walks every route create_app serves: a new route fails here first."""
    from symfonic_store.server.auth import TokenAuth

    built = create_app(site.store, auth=TokenAuth(write_tokens(tmp_path / "tokens.json")))
    assert {getattr(r, "path", None) for r in built.routes} == ROUTES_WALKED


@pytest.mark.parametrize("who", ["ann", "gus", "pat", "root"])
def test_no_route_leaks_another_tenants_interrupt(site: Site, who: str) -> None:
    """Every GET route, the log, its stream and the pages: the principal's interrupts are
    there, no other tenant's id, name or payload is."""
    texts: list[str] = []
    with site.as_(who) as client:
        for path in ("/api/interrupts", "/api/audit", "/api/audit?format=csv", "/api/events?limit=1000",
                     "/metrics", "/", "/audit", "/healthz", "/signin"):
            r = client.get(path)
            assert r.status_code == 200, (path, r.text)
            texts.append(r.text)
        for m in site.by_tenant.values():
            for path in (f"/api/interrupts/{_path(m.thread_id, m.interrupt_id)}",
                         f"/api/threads/{_path(m.thread_id)}/events",
                         f"/interrupts/{_path(m.thread_id, m.interrupt_id)}",
                         f"/threads/{_path(m.thread_id)}"):
                r = client.get(path)
                texts.append(r.text if r.status_code == 200 else "")
    texts.append(_stream_text(site, who))
    everything = "\n".join(texts)
    for tenant, m in site.by_tenant.items():
        shown = tenant in SEES[who]
        for secret in (m.interrupt_id, m.name, m.secret):
            assert (secret in everything) is shown, (who, tenant, secret)


def test_another_tenants_interrupt_is_404_as_an_unknown_one(site: Site) -> None:
    """GET and answer: the same status and body as an id never minted, nothing written."""
    globex = site.by_tenant["globex"]
    before = len(site.store.history(globex.thread_id))
    with site.as_("ann") as ann:
        hidden = ann.get(f"/api/interrupts/{_path(globex.thread_id, globex.interrupt_id)}")
        assert hidden.status_code == 404
        assert hidden.json() == {"error": f"interrupt {globex.interrupt_id!r} on thread {globex.thread_id!r} is unknown"}
        body = {"response": {"approved": True}, "digest": digest_of(site.store, globex.thread_id, globex.interrupt_id)}
        answered = ann.post(answer_path(globex.thread_id, globex.interrupt_id), json=body)
        unknown = ann.post(answer_path(globex.thread_id, "i-never"), json=body)
        assert answered.status_code == unknown.status_code == 404
        assert answered.json() == json.loads(
            unknown.text.replace(json.dumps("i-never")[1:-1], globex.interrupt_id)
        )
        assert ann.get(f"/api/threads/{_path(globex.thread_id)}/events").status_code == 404
    assert len(site.store.history(globex.thread_id)) == before
    with site.as_("gus") as gus:
        assert gus.get(f"/api/interrupts/{_path(globex.thread_id, globex.interrupt_id)}").status_code == 200


def test_audit_and_inbox_keep_each_principal_to_its_tenants(site: Site) -> None:
    ours = {m.interrupt_id for m in site.by_tenant.values()}
    for who, tenants in SEES.items():
        expected = {site.by_tenant[t].interrupt_id for t in tenants}
        with site.as_(who) as client:
            items = [i for i in client.get("/api/interrupts").json()["items"] if i["interrupt_id"] in ours]
            records = [r for r in client.get("/api/audit").json()["items"] if r["interrupt_id"] in ours]
            sheet = list(csv.reader(io.StringIO(client.get("/api/audit", params={"format": "csv"}).text)))
        assert {i["interrupt_id"] for i in items} == expected, who
        assert {r["interrupt_id"] for r in records} == expected, who
        assert {r["interrupt_id"]: r["tenant"] for r in records} == {
            site.by_tenant[t].interrupt_id: t for t in tenants}
        assert sheet[0][-2:] == ["tenant", "approvers"]


def test_a_scoped_inbox_page_is_full_of_its_tenants_and_pages_on_their_cursors(site: Site) -> None:
    """Interrupts of one name minted for acme and globex in turn: ann's pages of two hold
    acme's only, every page but the last full (the scope is applied before the page is
    cut, so a cursor is her own last item's), each once, in the API and in the HTML inbox's
    pages; her page of a globex thread is the page of an unknown thread."""
    name = f"turns_{uuid.uuid4().hex[:6]}"
    minted = []
    for n in range(9):
        tenant = "acme" if n % 3 else "globex"
        thread_id, interrupt_id = f"t-turn-{name}-{n}", f"i-turn-{n}"
        site.store.mint(thread_id, marker(interrupt_id, name=name), actor="agent", tenant=tenant)
        minted.append((tenant, thread_id, interrupt_id))
    try:
        pages: list[list[tuple[str, str]]] = []
        with site.as_("ann") as ann:
            after = None
            while True:
                page = ann.get("/api/interrupts", params={"name": name, "limit": "2",
                                                          **({"after": after} if after else {})}).json()
                pages.append([(i["thread_id"], i["interrupt_id"]) for i in page["items"]])
                after = page["next"]
                if after is None:
                    break
            hidden = ann.get("/api/interrupts", params={"thread": minted[0][1]})
            unknown = ann.get("/api/interrupts", params={"thread": f"t-never-{name}"})
        assert [p for p in pages[:-1] if len(p) != 2] == []
        assert [k for p in pages for k in p] == [(t, i) for tenant, t, i in minted if tenant == "acme"]
        assert (hidden.status_code, hidden.json()) == (unknown.status_code, unknown.json()) == (
            200, {"items": [], "next": None})
        # The HTML inbox pages the same way, on the same cursors (?limit=2, Next page links).
        shown: list[str] = []
        with _signed_in(site, "ann") as browser:
            url: str | None = "/?limit=2"
            while url is not None:
                html = browser.get(url)
                assert html.status_code == 200
                on_page = re.findall(r'data-interrupt="([^"]+)"', html.text)
                assert len(on_page) <= 2
                shown += on_page
                found = re.search(r'href="(/\?[^"]+)" id="next-page"', html.text)
                url = None if found is None else found.group(1).replace("&amp;", "&")
            assert browser.get("/", params={"after": "garbage!"}).status_code == 400
        ours = [i for _, _, i in minted]
        assert [i for i in shown if i in ours] == [i for tenant, _, i in minted if tenant == "acme"]
        assert len(shown) == len(set(shown))
    finally:  # the module's other tests count the open interrupts
        for _, thread_id, interrupt_id in minted:
            site.store.resume(thread_id, interrupt_id, {"approved": False}, actor="root")


def test_events_without_an_interrupt_are_shown_to_all_tenant_principals_only(site: Site) -> None:
    site.store.record_route(f"t-route-{uuid.uuid4().hex[:6]}", "continue")
    with site.as_("root") as root, site.as_("pat") as pat:
        assert any(e["interrupt_id"] is None for e in root.get("/api/events?limit=1000").json()["items"])
        assert all(e["interrupt_id"] is not None for e in pat.get("/api/events?limit=1000").json()["items"])


GLOBEX_REQUESTER = "ceo@globex.example"
"""Who minted globex's marker on the shared thread: its expiry of acme's names them."""


def test_a_thread_whose_tenant_changes_shows_each_tenant_only_its_own_interrupt(site: Site) -> None:
    """acme's marker superseded by globex's on the same thread: acme's principal sees its
    marker expire, never what superseded it -- not in the expiry's ``superseded_by``, not
    as the pending marker of a replayed state (after acme's refused late answer)."""
    thread = f"t-switch-{uuid.uuid4().hex[:6]}"
    first = Minted(thread, f"i-first-{uuid.uuid4().hex[:6]}", "first_wire", f"FIRST-SECRET-{uuid.uuid4().hex[:6]}")
    second = Minted(thread, f"i-second-{uuid.uuid4().hex[:6]}", "second_wire", f"SECOND-SECRET-{uuid.uuid4().hex[:6]}")
    for m, tenant, requester in ((first, "acme", "agent"), (second, "globex", GLOBEX_REQUESTER)):
        site.store.mint(thread, marker(m.interrupt_id, name=m.name, secret=m.secret), actor=requester, tenant=tenant)
    with pytest.raises(InterruptExpiredError):
        site.store.resume(thread, first.interrupt_id, {"approved": True}, actor="ann")
    history = site.store.history(thread)
    (expired,) = [e for e in history if e.type == EXPIRED]
    assert expired.data["superseded_by"] == second.interrupt_id  # the log keeps it
    assert history[-1].type == RESUME_REJECTED and history[-1].interrupt_id == first.interrupt_id

    try:
        _walk_the_switched_thread(site, history, first, second)
    finally:  # the other tests count open interrupts: this one leaves none
        site.store.resume(thread, second.interrupt_id, {"approved": False}, actor="gus")


def _walk_the_switched_thread(site: Site, history: list[Any], first: Minted, second: Minted) -> None:
    thread = first.thread_id
    (expired,) = [e for e in history if e.type == EXPIRED]
    for who, shown in (("ann", {"first"}), ("gus", {"second"}), ("root", {"first", "second"}), ("pat", set())):
        texts: list[str] = []
        with site.as_(who) as client:
            paths = [f"/api/threads/{_path(thread)}/events", f"/threads/{_path(thread)}",
                     "/api/events?limit=1000", "/api/audit", "/api/interrupts", "/"]
            for m in (first, second):
                paths += [f"/api/interrupts/{_path(thread, m.interrupt_id)}",
                          f"/interrupts/{_path(thread, m.interrupt_id)}"]
            for path in paths:
                r = client.get(path)
                texts.append(r.text if r.status_code == 200 else "")
            replay = client.get(f"/api/threads/{_path(thread)}/events")
        paths.append("/api/events/stream")
        if shown:
            ids = {m.interrupt_id for label, m in (("first", first), ("second", second)) if label in shown}
            last = max(e.position for e in history if e.interrupt_id in ids)
            texts.append(_stream_text(site, who, last))
        everything = "\n".join(texts)
        for label, m in (("first", first), ("second", second)):
            secrets = (m.interrupt_id, m.name, m.secret) + ((GLOBEX_REQUESTER,) if label == "second" else ())
            for secret in secrets:
                where = [p for p, t in zip(paths, texts, strict=False) if secret in t]
                assert (secret in everything) is (label in shown), (who, label, secret, where)
        with site.as_(who) as client:  # the actor filter confirms no hidden name either
            by_actor = client.get("/api/audit", params={"actor": GLOBEX_REQUESTER, "thread": thread}).json()
        assert [r["interrupt_id"] for r in by_actor["items"]] == (
            [first.interrupt_id] if who == "root" else []), (who, by_actor)
        if who == "ann":
            steps = replay.json()
            (seen_expiry,) = [s["event"] for s in steps if s["event"]["type"] == EXPIRED]
            assert seen_expiry["data"] == {k: v for k, v in expired.data.items() if k != "superseded_by"}
            assert (expired.actor, seen_expiry["actor"]) == (GLOBEX_REQUESTER, None)
            assert steps[-1]["event"]["type"] == RESUME_REJECTED
            assert steps[-1]["state"][PENDING_KEY] is None  # globex's marker was pending then
        if who == "root":
            assert replay.json()[-1]["state"][PENDING_KEY]["interrupt_id"] == second.interrupt_id


def test_assigning_another_tenants_interrupt_is_404_as_an_unknown_one(site: Site) -> None:
    """The API and the inbox form: the same status and body as an id never minted, and
    nothing is written (no assignment, no recorded refusal)."""
    globex = site.by_tenant["globex"]
    before = len(site.store.history(globex.thread_id))
    with site.as_("ann") as ann:
        hidden = ann.post(f"/api/interrupts/{_path(globex.thread_id, globex.interrupt_id)}/assign", json={"to": "ann"})
        unknown = ann.post(f"/api/interrupts/{_path(globex.thread_id, 'i-never')}/assign", json={"to": "ann"})
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json() == json.loads(unknown.text.replace("i-never", globex.interrupt_id))
    with site.server.client() as browser:
        form = browser.get("/signin")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
        assert csrf
        signed = browser.post("/signin", data={"token": TOKENS["ann"][0], "csrf": csrf.group(1)})
        assert signed.status_code in (302, 303)
        page = browser.get(f"/interrupts/{_path(globex.thread_id, globex.interrupt_id)}")
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert page.status_code == 404 and token
        posted = browser.post(f"/interrupts/{_path(globex.thread_id, globex.interrupt_id)}/assign",
                              data={"to": "ann", "csrf": token.group(1)})
    assert posted.status_code == 404 and globex.name not in posted.text
    assert len(site.store.history(globex.thread_id)) == before


def test_an_open_stream_follows_its_principals_tenants_as_the_tokens_file_changes(site: Site) -> None:
    """ann's tenants taken away (none left: the untenanted ones) while her stream is open:
    the acme interrupt minted after that is not streamed, the untenanted one is."""
    path = site.tokens
    start = site.store.events()[-1].position
    acme = Minted(f"t-late-{uuid.uuid4().hex[:6]}", f"i-late-{uuid.uuid4().hex[:6]}", "late_wire",
                  f"LATE-SECRET-{uuid.uuid4().hex[:6]}")
    plain = Minted(f"t-open-{uuid.uuid4().hex[:6]}", f"i-open-{uuid.uuid4().hex[:6]}", "open_wire", "OPEN")
    seen: list[str] = []
    try:
        with site.as_("ann") as client, client.stream("GET", "/api/events/stream", params={"after": start}) as r:
            assert r.status_code == 200
            _rewrite_tokens(path, {"ann": []})
            for m, tenant in ((acme, "acme"), (plain, None)):
                site.store.mint(m.thread_id, marker(m.interrupt_id, name=m.name, secret=m.secret),
                                actor="agent", tenant=tenant)
            deadline = time.monotonic() + 60
            for line in r.iter_lines():
                seen.append(line)
                if plain.interrupt_id in line or time.monotonic() > deadline:
                    break
    finally:
        _rewrite_tokens(path, {})
        for m in (acme, plain):  # the other tests count open interrupts
            site.store.resume(m.thread_id, m.interrupt_id, {"approved": False}, actor="root")
    text = "\n".join(seen)
    assert plain.interrupt_id in text
    assert acme.interrupt_id not in text and acme.secret not in text


def _rewrite_tokens(path: Path, tenants: dict[str, list[str]]) -> None:
    """The module's tokens file again, with the given principals' tenants replaced; in one
    step (a new file renamed over it), as an operator's deploy would."""
    fresh = path.with_name(path.name + f".{uuid.uuid4().hex[:6]}")
    write_tokens(fresh)
    data = json.loads(fresh.read_text())
    for name, replaced in tenants.items():
        data[name]["tenants"] = replaced
    fresh.write_text(json.dumps(data))
    fresh.replace(path)


# --- tenants from a JWT claim and a trusted header -----------------------------------


def _pem(key: object) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _visible(client: httpx.Client) -> set[str]:
    r = client.get("/api/interrupts")
    assert r.status_code == 200, r.text
    return {i["interrupt_id"] for i in r.json()["items"]}


def test_a_jwt_claim_names_the_principals_tenants_also_in_its_session(
    site: Site, served_db: str, tmp_path: Path
) -> None:
    """--jwt-tenants-claim: a list (or a comma-separated string) of tenants; none: the
    untenanted only; "*": all. A browser session opened with the JWT keeps them."""
    import re
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "key.pem").write_bytes(_pem(key))
    ids = {t: m.interrupt_id for t, m in site.by_tenant.items()}

    def token(sub: str, **claims: object) -> str:
        now = int(time.time())
        body = {"sub": sub, "iss": "idp", "aud": "approvals", "iat": now, "exp": now + 600, **claims}
        return jwt.encode(body, key, algorithm="RS256")

    flags = ("--jwt-public-key", str(tmp_path / "key.pem"), "--jwt-issuer", "idp",
             "--jwt-audience", "approvals", "--jwt-tenants-claim", "org.tenants")
    with serve(served_db, *flags) as server:
        with server.client(token("ann", org={"tenants": ["acme"]})) as c:
            assert _visible(c) == {ids["acme"]}
        with server.client(token("gus", org={"tenants": "globex, acme"})) as c:
            assert _visible(c) == {ids["acme"], ids["globex"]}
        with server.client(token("pat")) as c:
            assert _visible(c) == {ids[None]}
        with server.client(token("root", org={"tenants": ["*"]})) as c:
            assert _visible(c) == set(ids.values())
        with server.client() as browser:
            form = browser.get("/signin")
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
            assert csrf
            signed = browser.post("/signin", data={"token": token("ann", org={"tenants": ["acme"]}),
                                                   "csrf": csrf.group(1)})
            assert signed.status_code in (302, 303)
            page = browser.get("/")
            assert page.status_code == 200
            assert ids["acme"] in page.text and ids["globex"] not in page.text and ids[None] not in page.text


def test_a_trusted_header_names_the_principals_tenants(site: Site, served_db: str) -> None:
    ids = {t: m.interrupt_id for t, m in site.by_tenant.items()}
    flags = ("--trusted-header", "X-Forwarded-User", "--trusted-tenants-header", "X-Forwarded-Tenants",
             "--trusted-proxy", "127.0.0.1/32")
    with serve(served_db, *flags) as server:
        with server.client(headers={"X-Forwarded-User": "gus", "X-Forwarded-Tenants": "globex"}) as c:
            assert _visible(c) == {ids["globex"]}
        with server.client(headers={"X-Forwarded-User": "pat"}) as c:
            assert _visible(c) == {ids[None]}
        with server.client(headers={"X-Forwarded-User": "root", "X-Forwarded-Tenants": "*"}) as c:
            assert _visible(c) == set(ids.values())


def test_metrics_count_the_principals_tenants_open_interrupts(site: Site) -> None:
    import re

    def open_markers(who: str) -> float:
        with site.as_(who) as client:
            text = client.get("/metrics").text
        found = re.search(r'^symfonic_open_interrupts\{source="marker"\} (\S+)$', text, re.M)
        assert found, text
        return float(found.group(1))

    assert {who: open_markers(who) for who in SEES} == {"ann": 1.0, "gus": 1.0, "pat": 1.0, "root": 3.0}


@contextmanager
def _signed_in(site: Site, who: str) -> Iterator[httpx.Client]:
    """A browser signed in to the inbox as ``who`` (the form, its CSRF token, the cookie)."""
    with site.server.client() as browser:
        form = browser.get("/signin")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
        assert csrf
        signed = browser.post("/signin", data={"token": TOKENS[who][0], "csrf": csrf.group(1)})
        assert signed.status_code in (302, 303)
        yield browser


def _superseded_by_globex(site: Site, requester: str, count: int) -> list[tuple[Minted, Minted]]:
    """``count`` threads where acme's marker is superseded by globex's, minted by ``requester``."""
    pairs = []
    for n in range(count):
        tag = uuid.uuid4().hex[:6]
        thread = f"t-swap{n}-{tag}"
        first = Minted(thread, f"i-acme-{tag}", "first_wire", f"FIRST-{tag}")
        second = Minted(thread, f"i-globex-{tag}", "second_wire", f"SECOND-{tag}")
        for m, tenant, actor in ((first, "acme", "agent"), (second, "globex", requester)):
            site.store.mint(thread, marker(m.interrupt_id, name=m.name, secret=m.secret), actor=actor, tenant=tenant)
        pairs.append((first, second))
    return pairs


def _close(site: Site, pairs: list[tuple[Minted, Minted]]) -> None:
    """The other tests count open interrupts: globex's markers are answered."""
    for _, second in pairs:
        site.store.resume(second.thread_id, second.interrupt_id, {"approved": False}, actor="gus")


def test_the_audit_answers_a_hidden_requester_as_it_answers_an_unknown_name(site: Site) -> None:
    """acme's principal filtering the audit by the globex requester whose mints superseded
    two acme markers gets exactly what a name never seen gets: no items, no next cursor
    (JSON, CSV, and no Next link on the inbox's audit page) -- the page is cut from what
    it may see, not from the store's matches."""
    tag = uuid.uuid4().hex[:6]
    hidden, unknown = f"cfo-{tag}@globex.example", f"nobody-{tag}@globex.example"
    pairs = _superseded_by_globex(site, hidden, 2)
    try:
        with site.as_("root") as root:  # the store has two of acme's records under that name
            seen = root.get("/api/audit", params={"actor": hidden, "limit": 1}).json()
        assert [r["interrupt_id"] for r in seen["items"]] == [pairs[0][0].interrupt_id]
        assert seen["next"] is not None
        with site.as_("ann") as ann, _signed_in(site, "ann") as browser:
            for extra in ({"limit": "1"}, {}):
                answers = [ann.get("/api/audit", params={"actor": name, **extra}) for name in (hidden, unknown)]
                assert [a.status_code for a in answers] == [200, 200]
                assert answers[0].json() == answers[1].json() == {"items": [], "next": None}, extra
                sheets = [ann.get("/api/audit", params={"actor": name, "format": "csv", **extra})
                          for name in (hidden, unknown)]
                assert sheets[0].text == sheets[1].text
                assert [s.headers.get("x-next-cursor") for s in sheets] == [None, None]
                pages = [browser.get("/audit", params={"actor": name, **extra}) for name in (hidden, unknown)]
                assert [p.status_code for p in pages] == [200, 200]
                assert ['id="next-page"' in p.text for p in pages] == [False, False], extra
                assert pages[0].text.count("<tr") == pages[1].text.count("<tr")
    finally:
        _close(site, pairs)


@pytest.mark.parametrize("key", [
    [1, "t", "i", 0],
    [None, "t", "i", 0],
    ["2026-01-01T00:00:00+00:00", 7, "i", 0],
    ["2026-01-01T00:00:00+00:00", "t", ["i"], 0],
    ["2026-01-01T00:00:00+00:00", "t", "i", "0"],
    ["2026-01-01T00:00:00+00:00", "t", "i", True],
])
def test_a_forged_audit_cursor_is_400_as_a_malformed_one(site: Site, key: list[Any]) -> None:
    """A cursor of the right encoding and length whose values have other types than the
    audit's keys (compared with them, a 500) is refused as one that is not a cursor."""
    forged = encode_cursor(key)
    with site.as_("root") as root, _signed_in(site, "root") as browser:
        api = root.get("/api/audit", params={"after": forged, "limit": 1})
        malformed = root.get("/api/audit", params={"after": "not*a*cursor", "limit": 1})
        page = browser.get("/audit", params={"after": forged, "limit": 1})
    assert (api.status_code, malformed.status_code) == (400, 400)
    assert api.json() == malformed.json()
    assert page.status_code == 400 and "not a cursor" in page.text


def _streamed(site: Site, who: str, last: int) -> list[dict[str, Any]]:
    """The events the stream sends ``who`` from the start, up to position ``last``."""
    seen: list[dict[str, Any]] = []
    with site.as_(who) as client, client.stream("GET", "/api/events/stream", params={"after": 0}) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[len("data: "):]))
                if seen[-1]["position"] >= last:
                    return seen
    raise AssertionError(f"the stream ended before position {last}")


def test_an_event_shown_redacted_carries_no_hash_and_no_version(site: Site) -> None:
    """acme's principal is shown the expiry of its marker without the globex requester who
    superseded it -- and without the hash and version that would confirm a guessed name or
    count globex's events -- in the thread's replay, the log, its stream and the interrupt;
    the events it is shown whole keep both, and an all-tenants principal sees them."""
    pairs = _superseded_by_globex(site, GLOBEX_REQUESTER, 1)
    ((first, _),) = pairs
    try:
        history = site.store.history(first.thread_id)
        (expired,) = [e for e in history if e.type == EXPIRED]
        assert expired.actor == GLOBEX_REQUESTER
        for who, redacted in (("ann", True), ("root", False)):
            with site.as_(who) as client:
                replay = client.get(f"/api/threads/{_path(first.thread_id)}/events").json()
                log = client.get("/api/events", params={"after": max(0, expired.position - 10), "limit": 1000}).json()
                one = client.get(f"/api/interrupts/{_path(first.thread_id, first.interrupt_id)}").json()
            streamed = _streamed(site, who, expired.position)
            for where, events in (("replay", [s["event"] for s in replay]), ("log", log["items"]),
                                  ("interrupt", one["events"]), ("stream", streamed)):
                (seen,) = [e for e in events if e["position"] == expired.position]
                (mint,) = [e for e in events if e["interrupt_id"] == first.interrupt_id and e["type"] == "interrupt.minted"]
                assert {"hash", "version"} <= set(mint), (who, where)
                if redacted:
                    assert seen["actor"] is None and "superseded_by" not in seen["data"], where
                    assert "hash" not in seen and "version" not in seen, (where, seen)
                    assert expired.hash not in json.dumps(events), where
                else:
                    assert (seen["actor"], seen["hash"], seen["version"]) == (
                        GLOBEX_REQUESTER, expired.hash, expired.version), where
    finally:
        _close(site, pairs)
