"""The webhook sender's event loop is its own (SPEC §14): a notifier is built and run from
inside a running event loop (an async application's startup, a notebook cell), the
calling thread's event loop is never set nor cleared, and ``close()`` leaves no sender
thread behind. Against a receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from factories import mint
from notify_rig import Receiver, http_receiver, write_secret

from symfonic_store import InterruptStore
from symfonic_store.notify import Notifier
from symfonic_store.notify.notifier import PARALLEL


@pytest.fixture
def receiver() -> Any:
    with http_receiver() as r:
        yield r


def two_hooks(folder: Path, url: str) -> dict[str, Any]:
    secret = str(write_secret(folder))
    return {"subscriptions": [{"name": name, "events": ["*"], "webhook": {"url": f"{url}/{name}", "secret_file": secret}}
                              for name in ("erp", "audit")]}


def ours(before: set[threading.Thread]) -> list[str]:
    """The notifier's threads (its workers, its senders') alive now that were not before."""
    return sorted(t.name for t in threading.enumerate() if t not in before and t.name.startswith("symfonic-"))


@pytest.mark.parametrize(("parallel", "to_thread"), [(1, False), (PARALLEL, False), (1, True)])
def test_a_notifier_built_and_run_inside_a_running_event_loop_delivers(
    store: InterruptStore, tmp_path: Path, receiver: Receiver, parallel: int, to_thread: bool
) -> None:
    """Inside ``asyncio.run``: passing the subscriptions in the calling thread (parallel=1)
    or in worker threads, or the pass run off the loop with ``asyncio.to_thread`` (as
    docs/notify.md suggests), every event reaches the receiver."""
    mint(store, "t-1")
    config = two_hooks(tmp_path, receiver.url)

    async def startup() -> int:
        with Notifier(store, config, from_start=True, parallel=parallel) as n:
            report = await asyncio.to_thread(n.run_once) if to_thread else n.run_once()
            return report.total("delivered")

    assert asyncio.run(startup()) == 2
    assert sorted(r.path for r in receiver.requests) == ["/hook/audit", "/hook/erp"]


def test_closing_a_notifier_leaves_the_calling_threads_event_loop_as_it_was(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """A loop the application set stays its current loop through a notifier's whole life."""
    mint(store, "t-1")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        with Notifier(store, two_hooks(tmp_path, receiver.url), from_start=True, parallel=1) as n:
            assert n.run_once().total("delivered") == 2
            assert asyncio.get_event_loop() is loop
        assert asyncio.get_event_loop() is loop
        ran = loop.run_until_complete(asyncio.sleep(0, "usable"))  # sleep-ok: 0 s, the loop still runs
        assert ran == "usable"
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@pytest.mark.parametrize("parallel", [1, PARALLEL])
def test_close_leaves_no_sender_thread_alive(
    store: InterruptStore, tmp_path: Path, receiver: Receiver, parallel: int
) -> None:
    """Each webhook subscription's sender has a thread of its own once it has sent;
    ``close()`` stops and joins it (and the worker threads)."""
    mint(store, "t-1")
    before = set(threading.enumerate())
    n = Notifier(store, two_hooks(tmp_path, receiver.url), from_start=True, parallel=parallel)
    try:
        assert n.run_once().total("delivered") == 2
        senders = [name for name in ours(before) if name.startswith("symfonic-webhook")]
    finally:
        n.close()
    assert len(senders) == 2
    assert ours(before) == []
