"""What the approval service says was decided, and how it knew who decided (SPEC §12),
against a real ``symfonic-store --decisions ... serve`` process on SQLite and PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from symfonic_store.events import MINTED
from symfonic_store.services.audit import AUDIT_FIELDS

PRINCIPALS = {"alice": ("alice-token", ["approver"]), "bob": ("bob-token", ["approver"])}
POLICY = {"two_keys": {"roles": ["approver"], "quorum": 2}}
"""Interrupts named ``two_keys`` are decided by two votes (SPEC §15); other names stay open."""
RULES = '''\
def decide(name, response):
    if isinstance(response, dict) and response.get("ok"):
        return "approve"
    if isinstance(response, dict) and response.get("boom"):
        raise RuntimeError("the rule failed")
    if isinstance(response, dict) and response.get("escalate"):
        return "escalate"
    return None
'''


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per backend for the whole module."""
    yield from served_database(request, tmp_path_factory)


@dataclass
class Site:
    server: Served
    store: InterruptStore


@pytest.fixture(scope="module")
def site(served_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("decisions")
    tokens = write_tokens(folder / "tokens.json", PRINCIPALS)
    (folder / "shop_decisions.py").write_text(RULES)
    policy = write_json(folder / "policy.json", POLICY)
    store = InterruptStore(served_db)
    with serve(served_db, "--tokens", str(tokens), "--policy", str(policy), cwd=folder,
               options=("--decisions", "shop_decisions:decide")) as server:
        yield Site(server, store)
    store.close()


def thread(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def test_a_rejection_over_http_says_reject_and_is_found_by_the_decision_filter(site: Site) -> None:
    """The answer's 200 body carries decision "reject"; GET /api/audit?decision=reject finds it with the requester and service:tokens; the CSV appends the new names."""
    t = thread("no")
    i = mint(site.store, t)
    with site.server.client(PRINCIPALS["alice"][0]) as client:
        done = client.post(answer_path(t, i), json={"response": {"approved": False}, "digest": digest_of(site.store, t, i)})
        assert done.status_code == 200, done.text
        assert done.json()["decision"] == "reject" and done.json()["outcome"] == "resumed"
        found = client.get("/api/audit", params={"thread": t, "decision": "reject"}).json()["items"]
        assert [(r["decision"], r["decision_source"], r["actor"], r["requested_by"], r["authenticated_by"])
                for r in found] == [("reject", "recorded", "alice", "agent", "service:tokens")]
        assert client.get("/api/audit", params={"thread": t, "decision": "approve"}).json()["items"] == []
        sheet = client.get("/api/audit", params={"thread": t, "format": "csv"})
    rows = list(csv.reader(io.StringIO(sheet.text)))
    assert rows[0] == list(AUDIT_FIELDS) and rows[0][-5:-2] == ["requested_by", "decision_source", "authenticated_by"]
    assert rows[1][-5:-2] == ["agent", "recorded", "service:tokens"]
    assert rows[1][-1] == "[]"  # approvers: none


def test_serve_asks_the_decisions_function_and_its_failure_is_400_with_nothing_written(site: Site) -> None:
    """`--decisions` before `serve`: its word is the body's decision; an exception in it is 400 and the interrupt stays pending."""
    t = thread("fn")
    i = mint(site.store, t)
    digest = digest_of(site.store, t, i)
    with site.server.client(PRINCIPALS["alice"][0]) as client:
        failed = client.post(answer_path(t, i), json={"response": {"boom": True}, "digest": digest})
        assert failed.status_code == 400 and "decisions" in failed.json()["error"]
        assert [e.type for e in site.store.history(t)] == [MINTED]
        done = client.post(answer_path(t, i), json={"response": {"escalate": True}, "digest": digest})
    assert done.status_code == 200 and done.json()["decision"] == "escalate"


def test_a_quorum_vote_is_named_by_the_decisions_function_as_an_answer_is(site: Site) -> None:
    """Under a quorum (SPEC §15) the vote's decision is the one the answer would get: the
    function's word counts as an approval; its failure is 400 with nothing written."""
    t = thread("two")
    i = mint(site.store, t, name="two_keys")
    digest = digest_of(site.store, t, i)

    def vote(who: str, response: object) -> Any:
        with site.server.client(PRINCIPALS[who][0]) as client:
            return client.post(answer_path(t, i), json={"response": response, "digest": digest})

    failed = vote("alice", {"boom": True})
    assert failed.status_code == 400 and "decisions" in failed.json()["error"]
    assert [e.type for e in site.store.history(t)] == [MINTED]
    first = vote("alice", {"ok": True})
    assert first.json() == {"outcome": "voted", "votes": 1, "needed": 2}
    done = vote("bob", {"ok": True})
    assert done.status_code == 200 and done.json()["outcome"] == "resumed", done.text
    (record,) = site.store.audit(thread_id=t)
    assert (record.decision, sorted(record.approvers)) == ("approve", ["alice", "bob"])
