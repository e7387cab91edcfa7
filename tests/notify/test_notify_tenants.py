"""A subscription kept to tenants (SPEC §15) is told what a principal of those tenants is
shown: an expiry of its tenant's interrupt, superseded by another tenant's mint on the
same thread, arrives without that mint and without its requester (webhook and Apprise);
on both databases, against a receiver on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from factories import marker
from notify_rig import SECRET, Received, Receiver, http_receiver, write_secret
from standardwebhooks import Webhook

from symfonic_store import EXPIRED, MINTED, InterruptStore
from symfonic_store.notify import Notifier

REQUESTER = "ceo@globex.example"
"""Who minted globex's marker: the expiry of acme's it superseded names them in the log."""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with http_receiver() as r:
        yield r


def test_a_tenants_subscription_is_not_told_another_tenants_requester(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """acme's webhook and chat get acme's mint and its expiry, the expiry with no actor and
    no trace of globex's requester; a subscription of every tenant gets the actor as logged."""
    store.mint("t-shared", marker("i-acme", name="wire"), actor="agent", tenant="acme")
    store.mint("t-shared", marker("i-globex", name="wire"), actor=REQUESTER, tenant="globex")
    (expired,) = [e for e in store.history("t-shared") if e.type == EXPIRED]
    assert expired.actor == REQUESTER and expired.data["superseded_by"] == "i-globex"  # the log keeps both
    base = receiver.url.rsplit("/", 1)[0]
    secret = str(write_secret(tmp_path))
    config = {"subscriptions": [
        {"name": "acme-hook", "tenants": ["acme"], "webhook": {"url": f"{base}/acme", "secret_file": secret}},
        {"name": "acme-chat", "tenants": ["acme"], "apprise": f"{base.replace('http://', 'json://')}/chat"},
        {"name": "all-hook", "webhook": {"url": f"{base}/all", "secret_file": secret}},
        {"name": "star-hook", "tenants": ["*"], "webhook": {"url": f"{base}/star", "secret_file": secret}},
    ]}
    with Notifier(store, config, from_start=True) as n:
        report = n.run_once()
    assert {name: t.delivered for name, t in report.subscriptions.items()} == {
        "acme-hook": 2, "acme-chat": 2, "all-hook": 3, "star-hook": 3}
    by_path: dict[str, list[Received]] = {}
    for request in receiver.requests:
        by_path.setdefault(request.path, []).append(request)
    acme = [Webhook(SECRET).verify(r.body, r.headers) for r in by_path["/acme"]]
    assert [(b["type"], b["data"]["interrupt_id"], b["data"]["actor"]) for b in acme] == [
        (MINTED, "i-acme", "agent"), (EXPIRED, "i-acme", None)]
    chat = [r.json() for r in by_path["/chat"]]
    assert [c["title"] for c in chat] == [f"{MINTED}: wire", f"{EXPIRED}: wire"]
    assert "by agent" in chat[0]["message"] and "by " not in chat[1]["message"]
    for request in by_path["/acme"] + by_path["/chat"]:
        sent = request.body.decode()
        assert REQUESTER not in sent and "i-globex" not in sent and expired.hash not in sent
    for path in ("/all", "/star"):
        everyone = [r.json() for r in by_path[path]]
        assert [(b["type"], b["data"]["actor"]) for b in everyone] == [
            (MINTED, "agent"), (EXPIRED, REQUESTER), (MINTED, REQUESTER)]
