"""After an escalation the ``escalate_to`` roles may answer; the inbox page leads with it.

The approval service in-process (Starlette's test client on ``create_app``) over the
per-test store of each backend; the sweep escalates with the same policy the service
enforces (SPEC §9, §14). The API's inbox order stays oldest first; the web page lists
escalated interrupts first, marked.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import factories
import pytest
from starlette.testclient import TestClient

from symfonic_store import RESUME_REJECTED, RESUMED, InterruptStore
from symfonic_store.server import Principal, TokenAuth, create_app, interrupt_digest
from symfonic_store.server.approvals import Approvals
from symfonic_store.server.policy import Policy

POLICY = {
    "refund": {"roles": ["finance"], "four_eyes": True, "escalate_after": 600,
               "escalate_to": ["lead"]},
    "*": {"roles": ["finance"]},
}
TOKENS = {"alice": ["finance"], "lena": ["lead"], "bob": ["clerk"]}


def _tokens(path: Path) -> Path:
    path.write_text(json.dumps({
        name: {"token_sha256": hashlib.sha256(f"{name}-token".encode()).hexdigest(), "roles": roles}
        for name, roles in TOKENS.items()
    }))
    return path


@pytest.fixture
def client(store: InterruptStore, tmp_path: Path) -> TestClient:
    app = create_app(store, auth=TokenAuth(_tokens(tmp_path / "tokens.json")), policy=POLICY,
                     rate_limits=None)
    return TestClient(app)


def answer(client: TestClient, who: str, thread_id: str, interrupt_id: str, payload: Any) -> Any:
    return client.post(
        f"/api/interrupts/{thread_id}/{interrupt_id}/answer",
        json={"response": {"approved": True}, "digest": interrupt_digest(thread_id, interrupt_id, payload)},
        headers={"Authorization": f"Bearer {who}-token"},
    )


def mint_old(store: InterruptStore, thread_id: str, interrupt_id: str, *, name: str = "refund",
             age: float, actor: str = "requester") -> dict[str, Any]:
    marker = factories.plain_marker(interrupt_id, name=name, age=age)
    store.mint(thread_id, marker, actor=actor)
    return marker


def test_the_escalation_roles_may_answer_only_after_the_escalation(
    store: InterruptStore, client: TestClient
) -> None:
    """lena (lead) is refused (403, recorded) before the sweep escalates; after it she
    answers (200); bob (clerk) is still refused; four-eyes still holds for the lead."""
    m = mint_old(store, "t-1", "i-1", age=700)
    mint_old(store, "t-2", "i-2", age=700, actor="lena")
    refused = answer(client, "lena", "t-1", "i-1", m["payload"])
    assert refused.status_code == 403 and "finance" in refused.json()["error"]
    report = store.sweep(policy=POLICY)
    assert {(t, i) for t, i, _, _ in report.escalated} == {("t-1", "i-1"), ("t-2", "i-2")}
    assert answer(client, "bob", "t-1", "i-1", m["payload"]).status_code == 403
    assert answer(client, "lena", "t-2", "i-2", m["payload"]).status_code == 403  # her own
    admitted = answer(client, "lena", "t-1", "i-1", m["payload"])
    assert admitted.status_code == 200, admitted.text
    assert admitted.json()["actor"] == "lena"
    kinds = [(e.type, e.actor) for e in store.history("t-1")]
    assert kinds[-1] == (RESUMED, "lena")
    assert (RESUME_REJECTED, "lena") in kinds and (RESUME_REJECTED, "bob") in kinds


def test_an_escalation_under_another_name_does_not_widen_an_entry_without_one(
    store: InterruptStore, tmp_path: Path
) -> None:
    """The "*" entry has no escalate_to: an escalation recorded on its interrupt (by a sweep
    with another policy) lets no one else answer it."""
    mint_old(store, "t-o", "i-o", name="other", age=700)
    store.sweep(policy={"*": {"escalate_after": 1, "escalate_to": ["lead"]}})
    approvals = Approvals(store, policy=Policy.from_dict(POLICY))
    lena = Principal("lena", frozenset({"lead"}))
    assert approvals.escalated("t-o", "i-o", "other") is False
    assert approvals.refusal(lena, "other", "requester", escalated=True) is not None


def test_the_api_keeps_its_order_and_the_page_leads_with_escalated_ones_marked(
    store: InterruptStore, client: TestClient
) -> None:
    """The API lists oldest first whatever was escalated; the inbox page lists the escalated
    interrupt first with its mark; its own page offers lena the answer form."""
    mint_old(store, "t-a", "i-old", name="other", age=900)  # the "*" entry: never escalated
    mint_old(store, "t-b", "i-esc", age=700)
    mint_old(store, "t-c", "i-new", age=10)
    store.sweep(policy=POLICY)
    auth = {"Authorization": "Bearer alice-token"}
    items = client.get("/api/interrupts", headers=auth).json()["items"]
    assert [i["interrupt_id"] for i in items] == ["i-old", "i-esc", "i-new"]
    detail = client.get("/api/interrupts/t-b/i-esc", headers=auth).json()
    assert detail["escalated_to"] == ["lead"] and detail["status"] == "pending"
    assert client.get("/api/interrupts/t-a/i-old", headers=auth).json()["escalated_to"] is None

    page = client.get("/", headers=auth)
    assert page.status_code == 200
    order = re.findall(r'data-interrupt="([^"]+)"', page.text)
    assert order == ["i-esc", "i-old", "i-new"]
    cards = page.text.split('<li class="card interrupt')[1:]
    assert cards[0].startswith(' escalated"') and "escalated to lead" in cards[0]
    assert all("escalated to" not in card for card in cards[1:])

    lena = {"Authorization": "Bearer lena-token"}
    shown = client.get("/interrupts/t-b/i-esc", headers=lena)
    assert 'class="decide"' in shown.text and "You cannot answer this" not in shown.text
    other = client.get("/interrupts/t-c/i-new", headers=lena)
    assert "You cannot answer this" in other.text
    timeline = client.get("/threads/t-b", headers=lena).text
    assert "escalated after 600s to lead" in timeline


def test_the_timeline_says_what_each_recorded(store: InterruptStore, client: TestClient) -> None:
    """The thread page's timeline has a line for the reminder and one for the escalation."""
    mint_old(store, "t-b", "i-b", age=700)
    store.sweep(policy={"refund": {"remind_after": 60, "escalate_after": 600, "escalate_to": ["lead", "cfo"]}})
    timeline = client.get("/threads/t-b", headers={"Authorization": "Bearer alice-token"}).text
    assert "reminded after 60s" in timeline
    assert "escalated after 600s to cfo, lead" in timeline
