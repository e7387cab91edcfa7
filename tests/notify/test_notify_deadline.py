"""A send's deadline (SPEC §14, wave 4): ``timeout_seconds`` bounds a whole send, from the
connection to the last byte, below the subscription's lease; a slow receiver holds up
only its own subscription. Against receivers on 127.0.0.1 that answer a byte at a time."""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from factories import mint
from notify_rig import http_receiver, trickling_receiver, write_secret

from symfonic_store import InterruptStore
from symfonic_store.errors import InvalidInputError
from symfonic_store.notify import Notifier, ledger
from symfonic_store.notify.channels.apprise import AppriseSender
from symfonic_store.store.plan import Op


def hook(folder: Path, name: str, url: str, timeout: float) -> dict[str, Any]:
    return {"name": name, "events": ["*"],
            "webhook": {"url": url, "secret_file": str(write_secret(folder)), "timeout_seconds": timeout}}


def test_a_trickling_receiver_is_cut_off_at_the_deadline_and_the_send_retried_later(
    store: InterruptStore, tmp_path: Path
) -> None:
    """A byte every 0.2 s never trips a per-read timeout of 1 s; the send's deadline ends
    it: a failed try recorded for its retry, and the notifier closed the connection
    (the receiver had bytes left to trickle)."""
    mint(store, "t-1")
    with trickling_receiver(pace=0.2, most=200) as slow:
        config = {"subscriptions": [hook(tmp_path, "slow", slow.url, 1.0)]}
        with Notifier(store, config, from_start=True) as n:
            report = n.run_once()
            (row,) = n.status()
        assert slow.closed_by_client.wait(30)
        assert not slow.ran_out.is_set()
    assert (report.total("failed"), report.total("delivered")) == (1, 0)
    assert row["state"].startswith("retrying") and row["last_error"] == "http://127.0.0.1: timed out"
    assert row["position"] == 0  # the event waits for its retry


@pytest.mark.parametrize("how", ["run_once", "run"])
def test_a_fast_receiver_gets_its_event_while_a_slow_one_still_trickles(
    store: InterruptStore, tmp_path: Path, how: str
) -> None:
    """Subscriptions are passed in parallel: the fast one's event arrives while the slow
    one (listed first) is mid-trickle; released, the slow one is delivered too."""
    mint(store, "t-1")
    with trickling_receiver(pace=0.2, most=300) as slow, http_receiver() as fast:
        config = {"subscriptions": [hook(tmp_path, "slow", slow.url, 50.0), hook(tmp_path, "fast", fast.url, 5.0)]}
        with Notifier(store, config, from_start=True, lease_seconds=60, poll_seconds=0.05) as n:
            stop = threading.Event()
            reports: list[Any] = []
            worker = threading.Thread(
                target=(lambda: reports.append(n.run_once())) if how == "run_once" else (lambda: n.run(stop))
            )
            worker.start()
            try:
                assert slow.trickling.wait(30)
                (got,) = fast.wait_for(1, timeout=30)
                assert not (slow.closed_by_client.is_set() or slow.ran_out.is_set())  # still trickling
            finally:
                slow.release.set()
                try:
                    if how == "run":
                        _wait_delivered(n, "slow")
                finally:
                    stop.set()
                    worker.join(60)
            assert not worker.is_alive()
            rows = {r["name"]: r for r in n.status()}
    assert got.json()["data"]["thread_id"] == "t-1"
    assert (rows["slow"]["delivered"], rows["fast"]["delivered"]) == (1, 1)
    if how == "run_once":
        assert reports[0].total("delivered") == 2


def _wait_delivered(n: Notifier, name: str) -> None:
    """Until ``name`` has delivered one event (its cursor row says so), 30 s at most."""
    done = threading.Event()
    for _ in range(600):
        if {r["name"]: r["delivered"] for r in n.status()}[name] >= 1:
            return
        done.wait(0.05)  # sleep-ok: polling another thread's progress through the store
    raise AssertionError(f"{name} delivered nothing")


def test_an_apprise_send_is_cut_off_at_its_deadline_and_its_connection_closed(tmp_path: Path) -> None:
    """Apprise runs in a worker process the sender kills at the deadline: the notification
    fails as timed out and its connection is closed; the next send works again."""
    with trickling_receiver(pace=0.2, most=200) as slow:
        url = slow.url.replace("http://", "json://")
        sender = AppriseSender((url,), "subscriptions[0]", timeout=3.0)
        try:
            outcome = sender.send("title", "body")
            assert slow.closed_by_client.wait(30) and not slow.ran_out.is_set()
            slow.release.set()
            again = sender.send("title", "body")
        finally:
            sender.close()
    assert (outcome.kind, outcome.detail) == ("failed", "json://127.0.0.1: timed out")
    assert again.kind == "delivered"
    assert len(slow.bodies) == 2


def test_a_timeout_not_below_the_lease_is_refused_naming_the_field(store: InterruptStore, tmp_path: Path) -> None:
    """A send may take its whole timeout: one that could outlive the lease is a config error."""
    config = {"subscriptions": [hook(tmp_path, "a", "http://127.0.0.1:9/a", 5.0),
                                hook(tmp_path, "b", "http://127.0.0.1:9/b", 45.0)]}
    with pytest.raises(InvalidInputError, match=r"lease_seconds.*45 s, subscriptions\[1\]\.webhook\.timeout_seconds"):
        Notifier(store, config, lease_seconds=45)
    Notifier(store, config, lease_seconds=46).close()


def test_a_second_notifier_delivers_nothing_while_the_first_ones_send_is_in_flight(
    store: InterruptStore, tmp_path: Path
) -> None:
    """Two notifiers (two owners, as two processes are) on one store: while the first one's
    send trickles, the lease in the cursor row is the first one's and covers that send's
    whole timeout from its arrival on (the check allows 40 s of slack: the lease is 60 s,
    the timeout 20 s), and the second one's passes are ``busy`` and send nothing; released,
    the first delivers every event, the second then has nothing left. The receiver got
    each event once, never two sends of one event at a time."""
    mint(store, "t-1")
    mint(store, "t-2")
    timeout = 20.0
    with trickling_receiver(pace=0.05, most=100_000) as slow:
        config = {"subscriptions": [hook(tmp_path, "slow", slow.url, timeout)]}
        with Notifier(store, config, from_start=True, lease_seconds=60) as first, \
                Notifier(store, config, lease_seconds=60) as second:
            assert first.owner != second.owner
            reports: list[Any] = []
            worker = threading.Thread(target=lambda: reports.append(first.run_once()))
            worker.start()
            try:
                assert slow.trickling.wait(30)
                arrived = time.time()
                tallies = [second.run_once().subscriptions["slow"] for _ in range(3)]
                row = store.runner.run(Op(partial(ledger.read_cursors, names=["slow"]), write=False))["slow"]
                in_flight = len(slow.bodies)
                assert not (slow.closed_by_client.is_set() or slow.ran_out.is_set())  # still trickling
            finally:
                slow.release.set()
                worker.join(60)
            assert not worker.is_alive()
            after = second.run_once().subscriptions["slow"]
            (status,) = second.status()
    assert [(t.busy, t.delivered, t.failed) for t in tallies] == [(True, 0, 0)] * 3
    assert in_flight == 1
    assert row.lease_owner == first.owner
    assert row.lease_until is not None and row.lease_until >= arrived + timeout
    assert reports[0].subscriptions["slow"].delivered == 2
    assert (after.busy, after.delivered) == (False, 0)
    assert status["delivered"] == 2 and status["position"] == store.events()[-1].position
    assert sorted(json.loads(b)["data"]["thread_id"] for b in slow.bodies) == ["t-1", "t-2"]
    assert slow.most_at_once == 1
