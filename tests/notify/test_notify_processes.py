"""Real ``notify`` processes (SPEC §14): killed mid-delivery they lose nothing (the event
is sent again with the same webhook-id), two on one store never deliver one event to one
subscription at the same time, SIGTERM finishes the delivery in flight; on both databases."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import popen_cli, run_process
from factories import mint
from freezegun import freeze_time
from notify_rig import SECRET, Received, http_receiver, write_config, write_secret
from standardwebhooks import Webhook

from symfonic_store import InterruptStore
from symfonic_store.notify import Notifier, webhook_id


def two_subscriptions(folder: Path, url: str) -> dict[str, Any]:
    secret = str(write_secret(folder))
    retry = {"max_tries": 50, "backoff_seconds": [0.05, 0.2]}
    return {"retry": retry, "subscriptions": [
        {"name": "erp", "events": ["*"], "webhook": {"url": url + "/erp", "secret_file": secret}},
        {"name": "minted", "events": ["interrupt.minted"], "webhook": {"url": url + "/minted", "secret_file": secret}},
    ]}


def stop(process: Any) -> None:
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=30)


def test_every_event_arrives_once_per_subscription_across_failures_and_a_killed_notifier(
    store: InterruptStore, migrated_url: str, tmp_path: Path
) -> None:
    """Receiver failures are retried; a notifier killed with SIGKILL while the receiver holds its request loses nothing: a later run sends that event again with the same webhook-id, and after dropping duplicates by id each subscription has every event of its own once, in log order."""
    for i in range(4):
        p = mint(store, f"t-{i}", name=f"refund_{i}")
        store.resume(f"t-{i}", p["interrupt_id"], {"ok": True}, actor="alice")
    events = store.events()
    seen: Counter[tuple[str, str]] = Counter()
    held = threading.Event()
    release = threading.Event()

    def answer(request: Received) -> int:
        key = (request.path, request.headers["webhook-id"])
        seen[key] += 1
        if request.path.endswith("/erp") and request.json()["data"]["position"] == events[5].position and not held.is_set():
            held.set()
            release.wait(60)  # the notifier is killed meanwhile: this answer reaches nobody
            return 200
        return 500 if seen[key] == 1 and request.json()["data"]["position"] % 3 == 0 else 200

    with http_receiver() as receiver:
        receiver.answer = answer
        base = receiver.url.rsplit("/", 1)[0]
        config = write_config(tmp_path, two_subscriptions(tmp_path, base))
        process = popen_cli("notify", "--config", str(config), "--from-start", "--poll-seconds", "0.05", db=migrated_url)
        try:
            assert held.wait(60), "the notifier never reached the held event"
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            stop(process)
            release.set()
        assert process.returncode == -signal.SIGKILL
        killed_id = webhook_id("erp", events[5].position)
        # parallel=1: freezegun's clock does not move in worker threads (it leaves code
        # called from the threading module on the real clock).
        with Notifier(store, config, parallel=1) as n:
            assert {s["name"]: s["state"] for s in n.status()}["erp"] == "delivering"  # the dead process's lease
            assert n.run_once().subscriptions["erp"].busy  # still in force: nobody else delivers
            later = datetime.now(UTC) + timedelta(seconds=61)
            with freeze_time(later) as clock:
                for _ in range(20):
                    n.run_once()
                    clock.tick(1)
            rows = {s["name"]: s for s in n.status()}
        got = list(receiver.requests)
    last = events[-1].position
    assert rows["erp"]["position"] == last and rows["minted"]["position"] == last
    assert rows["erp"]["dead_lettered"] == 0 and rows["minted"]["dead_lettered"] == 0
    for path, wanted in (("/erp", events), ("/minted", [e for e in events if e.type == "interrupt.minted"])):
        mine = [r for r in got if r.path == path]
        for r in mine:
            Webhook(SECRET).verify(r.body, r.headers)
        answered = [r for r in mine if getattr(r, "status", 0) == 200]
        first_seen: list[str] = []
        for r in answered:
            if r.headers["webhook-id"] not in first_seen:
                first_seen.append(r.headers["webhook-id"])
        assert first_seen == [webhook_id(path[1:], e.position) for e in wanted]  # each once, in log order
        assert len(mine) > len(wanted)  # failures were on the wire, and retried
    erp_ids = Counter(r.headers["webhook-id"] for r in got if r.path == "/erp" and getattr(r, "status", 0) == 200)
    assert erp_ids[killed_id] == 2  # the killed delivery came again, same id
    assert sum(erp_ids.values()) == len(events) + 1


def test_two_notify_processes_never_deliver_one_event_to_one_subscription_at_once(
    store: InterruptStore, migrated_url: str, tmp_path: Path
) -> None:
    """Two long-running notifiers on one store: the receiver never has two requests of the subscription in flight, and each event is delivered once, in log order; SIGTERM stops both with exit 0."""
    count = 12

    def slow(request: Received) -> int:
        time.sleep(0.05)  # sleep-ok: a receiver that takes its time: gives the other process every chance to overlap
        return 200

    with http_receiver() as receiver:
        receiver.answer = slow
        config = write_config(tmp_path, {"subscriptions": [
            {"name": "erp", "webhook": {"url": receiver.url, "secret_file": str(write_secret(tmp_path))}}]})
        # The subscription made at the log's start before any event: both processes then
        # start from its cursor (--from-start would have each rewind it once).
        with Notifier(store, config, from_start=True) as n:
            assert n.run_once().total("delivered") == 0
        for i in range(count):
            mint(store, f"t-{i}")
        positions = [e.position for e in store.events()]
        args = ("notify", "--config", str(config), "--poll-seconds", "0.05")
        first = popen_cli(*args, db=migrated_url)
        second = popen_cli(*args, db=migrated_url)
        try:
            receiver.wait_for(count, timeout=90)
            with Notifier(store, config) as n:
                for _ in range(600):  # until the last delivery is recorded (or 60 s)
                    if n.status()[0]["position"] == positions[-1]:
                        break
                    threading.Event().wait(0.1)
            for p in (first, second):
                p.send_signal(signal.SIGTERM)
            codes = [p.wait(60) for p in (first, second)]
        finally:
            stop(first)
            stop(second)
        assert codes == [0, 0]
        assert receiver.most_in_flight == 1
        ids = [r.headers["webhook-id"] for r in receiver.requests]
    assert ids == [webhook_id("erp", p) for p in positions]


def test_sigterm_finishes_the_delivery_in_flight_and_records_it(store: InterruptStore, migrated_url: str, tmp_path: Path) -> None:
    """SIGTERM while the receiver holds a request: the process waits for the answer, moves the cursor past that event, sends nothing more, exits 0."""
    mint(store, "t-1")
    mint(store, "t-2")
    first = store.events()[0].position
    with http_receiver() as receiver:
        receiver.hold = threading.Event()
        config = write_config(tmp_path, {"subscriptions": [
            {"name": "erp", "webhook": {"url": receiver.url, "secret_file": str(write_secret(tmp_path))}}]})
        process = popen_cli("notify", "--config", str(config), "--from-start", db=migrated_url)
        try:
            receiver.wait_for(1)
            process.send_signal(signal.SIGTERM)
            with pytest.raises(Exception, match="timed out|Timeout"):
                process.wait(0.5)  # still waiting for its answer
            receiver.hold.set()
            assert process.wait(60) == 0
        finally:
            stop(process)
        assert len(receiver.requests) == 1
    with Notifier(store, config) as n:
        (row,) = n.status()
    assert row["position"] == first and row["delivered"] == 1 and row["state"] == "ok"
    result = run_process("notify", "status", "--config", str(config), "--format", "json", db=migrated_url)
    assert result.returncode == 0, result.stderr
