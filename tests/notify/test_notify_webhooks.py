"""Webhook delivery (SPEC §14): Standard Webhooks headers and body, at least once in log
order per subscription, backoff, dead letters, 410, redirects, cursors, filters; on both
databases, against a receiver on 127.0.0.1."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from factories import mint
from freezegun import freeze_time
from notify_rig import SECRET, Receiver, hook_config, http_receiver
from standardwebhooks import Webhook

from symfonic_store import InterruptStore
from symfonic_store.notify import Notifier, webhook_id


@pytest.fixture
def receiver() -> Any:
    with http_receiver() as r:
        yield r


def notifier(store: InterruptStore, tmp_path: Path, receiver: Receiver, **kwargs: Any) -> Notifier:
    config = kwargs.pop("config", None) or hook_config(tmp_path, receiver.url, **kwargs.pop("sub", {}))
    return Notifier(store, config, from_start=kwargs.pop("from_start", True), **kwargs)


def test_a_minted_interrupt_arrives_signed_with_the_body_of_the_spec(store: InterruptStore, tmp_path: Path, receiver: Receiver) -> None:
    """One request per event, verified with standardwebhooks, its id stable, the body holding the spec's keys and a percent-encoded inbox link."""
    pending = mint(store, "t/1 é", name="refund_big", payload={"amount": 7}, actor="agent")
    store.resume("t/1 é", pending["interrupt_id"], {"approved": True}, actor="alice")
    with notifier(store, tmp_path, receiver, inbox_url="https://inbox.example/") as n:
        report = n.run_once()
    assert report.total("delivered") == 2
    minted, resumed = receiver.requests
    body = Webhook(SECRET).verify(minted.body, minted.headers)
    events = store.events()
    assert minted.headers["webhook-id"] == webhook_id("erp", events[0].position)
    assert minted.headers["webhook-id"].startswith("msg_")
    assert body["type"] == "interrupt.minted"
    assert body["timestamp"] == events[0].occurred_at.isoformat()
    assert body["data"] == {
        "thread_id": "t/1 é", "interrupt_id": pending["interrupt_id"], "name": "refund_big",
        "payload": {"amount": 7}, "actor": "agent", "decision": None, "position": events[0].position,
        "inbox_url": f"https://inbox.example/interrupts/t%2F1%20%C3%A9/{pending['interrupt_id']}",
    }
    later = Webhook(SECRET).verify(resumed.body, resumed.headers)
    assert later["type"] == "interrupt.resumed"
    assert later["data"]["name"] == "refund_big" and later["data"]["actor"] == "alice"
    assert later["data"]["decision"] == events[1].data["decision"]
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + "QUJD" * 8).verify(minted.body, minted.headers)


def test_a_new_subscription_starts_at_the_logs_end_unless_from_start(store: InterruptStore, tmp_path: Path, receiver: Receiver) -> None:
    """Events before the first run are not sent (without --from-start); the ones after are, once."""
    mint(store, "t-old")
    with notifier(store, tmp_path, receiver, from_start=False) as n:
        assert n.run_once().total("delivered") == 0
        mint(store, "t-new")
        assert n.run_once().total("delivered") == 1
        assert n.run_once().total("delivered") == 0
    assert [r.json()["data"]["thread_id"] for r in receiver.requests] == ["t-new"]


def test_filters_take_event_types_and_interrupt_names_by_glob_and_tenants_of_none(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """events/interrupts globs choose what is sent; a subscription limited to tenants gets no tenant-less interrupt; the cursor still moves past them."""
    config = hook_config(tmp_path, receiver.url, events=["interrupt.resum*"], interrupts=["refund_*"])
    config["subscriptions"].append({**config["subscriptions"][0], "name": "acme", "tenants": ["acme"]})
    for i, name in enumerate(["refund_a", "wire", "refund_b"]):
        p = mint(store, f"t-{i}", name=name)
        store.resume(f"t-{i}", p["interrupt_id"], {"ok": True}, actor="bob")
    with Notifier(store, config, from_start=True) as n:
        report = n.run_once()
        status = {s["name"]: s for s in n.status()}
    assert report.subscriptions["erp"].delivered == 2 and report.subscriptions["acme"].delivered == 0
    assert [(r.json()["type"], r.json()["data"]["name"]) for r in receiver.requests] == [
        ("interrupt.resumed", "refund_a"), ("interrupt.resumed", "refund_b")]
    last = store.events()[-1].position
    assert status["erp"]["position"] == last and status["acme"]["position"] == last


def test_a_failing_event_holds_the_later_ones_backs_off_and_is_dead_lettered(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """Later events wait behind a failing one; retries wait 1, 2, 4 s (capped); after max_tries it is dead-lettered, counted and listed, and the next event goes; retry re-sends it with the same id."""
    failing = {"t-1"}
    receiver.answer = lambda r: 500 if r.json()["data"]["thread_id"] in failing else 204
    sub = {"retry": {"max_tries": 4, "backoff_seconds": [1, 3]}}
    with freeze_time("2026-12-02 08:00:00") as clock:
        mint(store, "t-1")
        mint(store, "t-2")
        with notifier(store, tmp_path, receiver, sub=sub) as n:
            waits = []
            for _ in range(3):
                assert n.run_once().total("failed") == 1
                state = n.status()[0]["state"]
                assert n.run_once().total("failed") == 0  # not due yet: nothing sent
                waits.append(state)
                clock.tick(3)
            assert waits == ["retrying (try 2 in 1s)", "retrying (try 3 in 2s)", "retrying (try 4 in 3s)"]
            report = n.run_once()
            assert (report.total("failed"), report.total("dead_lettered"), report.total("delivered")) == (1, 1, 1)
            (row,) = n.status()
            assert row["dead_lettered"] == 1 and row["failed"] == 4 and row["delivered"] == 1
            assert [(d["thread_id"], d["tries"], d["error"]) for d in row["dead_letters"]] == [
                ("t-1", 4, "http://127.0.0.1: HTTP 500")]  # scheme and host only
            threads = [r.json()["data"]["thread_id"] for r in receiver.requests]
            assert threads == ["t-1"] * 4 + ["t-2"]
            failing.clear()
            assert n.retry("erp").resent == 1
            assert n.status()[0]["dead_letters"] == []
    ids = {r.headers["webhook-id"] for r in receiver.requests if r.json()["data"]["thread_id"] == "t-1"}
    assert len(ids) == 1


def test_max_age_dead_letters_before_max_tries(store: InterruptStore, tmp_path: Path, receiver: Receiver) -> None:
    """An event failing for longer than max_age_seconds since its first try is given up."""
    receiver.answer = lambda r: 503
    with freeze_time("2026-12-02 08:00:00") as clock:
        mint(store, "t-1")
        with notifier(store, tmp_path, receiver, sub={"retry": {"max_tries": 100, "max_age_seconds": 5, "backoff_seconds": [4, 4]}}) as n:
            assert n.run_once().total("dead_lettered") == 0
            clock.tick(4)
            assert n.run_once().total("dead_lettered") == 0
            clock.tick(4)
            assert n.run_once().total("dead_lettered") == 1
    assert len(receiver.requests) == 3


def test_410_disables_the_subscription_where_it_stands_and_enable_resumes_there(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """Gone disables (recorded, shown), nothing more is sent; enable sends the same event again, then the rest."""
    answers = itertools.chain([410], itertools.repeat(200))
    receiver.answer = lambda r: next(answers)
    mint(store, "t-1")
    mint(store, "t-2")
    with notifier(store, tmp_path, receiver) as n:
        assert n.run_once().subscriptions["erp"].disabled
        assert n.run_once().total("delivered") == 0
        row = n.status()[0]
        assert row["state"] == "disabled" and "410" in row["last_error"]
        assert n.enable("erp") and not n.enable("erp")
        assert n.run_once().total("delivered") == 2
    threads = [r.json()["data"]["thread_id"] for r in receiver.requests]
    assert threads == ["t-1", "t-1", "t-2"]


def test_redirects_are_not_followed(store: InterruptStore, tmp_path: Path, receiver: Receiver) -> None:
    """A 307 to another path is a failure: the receiver sees one request, never the redirect's target."""
    receiver.answer = lambda r: 307 if r.path == "/hook" else 200
    receiver.location = receiver.url.replace("/hook", "/elsewhere")
    mint(store, "t-1")
    with notifier(store, tmp_path, receiver) as n:
        assert n.run_once().total("failed") == 1
        assert "redirects are not followed" in n.status()[0]["last_error"]
    assert [r.path for r in receiver.requests] == ["/hook"]


def test_every_request_has_a_timeout(store: InterruptStore, tmp_path: Path, receiver: Receiver) -> None:
    """A receiver that does not answer makes a failed try after the timeout, recorded for retry."""
    import threading

    receiver.hold = threading.Event()
    mint(store, "t-1")
    sub = {"webhook": {"url": receiver.url, "secret_file": str(tmp_path / "hook.secret"), "timeout_seconds": 0.3}}
    with notifier(store, tmp_path, receiver, sub=sub) as n:
        assert n.run_once().total("failed") == 1
        assert n.status()[0]["last_error"].endswith("timed out")
    receiver.hold.set()


def test_a_subscription_to_votes_and_assignments_is_told_who_voted_what(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """SPEC §15's events reach a subscription that asks for them: the assignment, each
    vote with its voter and decision, and the quorum's resume -- nothing else."""
    pending = mint(store, "t-q", name="refund_big", payload={"amount": 9}, actor="agent")
    i = pending["interrupt_id"]
    store.assign("t-q", i, to="finance", kind="role", actor="lead")
    store.vote("t-q", i, "approve", {"approved": True}, actor="ann")
    store.vote("t-q", i, "approve", {"approved": True}, actor="bob")
    store.resume("t-q", i, {"approved": True}, actor="bob", approvers=("ann", "bob"))
    config = hook_config(tmp_path, receiver.url, events=["interrupt.voted", "interrupt.assigned"])
    with notifier(store, tmp_path, receiver, config=config) as n:
        assert n.run_once().total("delivered") == 3
    bodies = [Webhook(SECRET).verify(r.body, r.headers) for r in receiver.requests]
    assert [(b["type"], b["data"]["actor"], b["data"]["decision"]) for b in bodies] == [
        ("interrupt.assigned", "lead", None),
        ("interrupt.voted", "ann", "approve"),
        ("interrupt.voted", "bob", "approve"),
    ]
    assert {(b["data"]["name"], b["data"]["interrupt_id"]) for b in bodies} == {("refund_big", i)}


def test_from_start_rewinds_a_subscription_once_per_notifier(
    store: InterruptStore, tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A subscription already at the log's end is rewound to its start by a notifier made with from_start (a warning names it and where it was), once: that notifier's next pass sends nothing again."""
    mint(store, "t-old")
    with notifier(store, tmp_path, receiver, from_start=False) as n:
        assert n.run_once().total("delivered") == 0
    with caplog.at_level("WARNING", logger="symfonic_store.notify"), notifier(store, tmp_path, receiver) as n:
        assert n.run_once().total("delivered") == 1
        assert n.run_once().total("delivered") == 0
    assert [r.json()["data"]["thread_id"] for r in receiver.requests] == ["t-old"]
    assert [r.getMessage() for r in caplog.records if "rewound" in r.getMessage()] == [
        "notify: erp rewound to the log's start (it was at position 1): its events are delivered again"
    ]
