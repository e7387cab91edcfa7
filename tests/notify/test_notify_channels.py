"""The channel registry: a channel is one module and one registration.

A throwaway ``memo`` channel (it keeps what it is sent in a list) is registered at test
time and unregistered after each test. The config file reads its key, the notifier
delivers to it in log order with the same ids and redaction as the built-in channels, its
timeout bounds the lease, the command line hides its URLs; unregistered, its key is an
unknown one again. The old import paths of the senders still work, with a warning.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from factories import mint

from symfonic_store import InterruptStore
from symfonic_store.errors import InvalidInputError
from symfonic_store.notify import Notifier, parse_config, webhook_id
from symfonic_store.notify.channels import (
    Channel,
    Delivery,
    Outcome,
    Sender,
    channels,
    registered,
    unregister,
)
from symfonic_store.notify.channels.apprise import AppriseSender
from symfonic_store.notify.channels.webhook import Webhook

SENT: list[Delivery] = []


@dataclass(frozen=True, slots=True)
class Memo:
    """The memo channel's destination: a made-up URL and a timeout."""

    url: str = field(repr=False)
    timeout: float = 2.0

    @property
    def target(self) -> str:
        return "memo://"

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url,)

    def timeout_field(self, where: str) -> str:
        return f"{where}.memo.timeout"

    def sender(self, where: str) -> Sender:
        return MemoSender()


class MemoSender:
    """Keeps every delivery; an event whose interrupt is named ``refused`` fails."""

    def deliver(self, delivery: Delivery, *, within: float) -> Outcome:
        assert 0 < within <= 2.0
        if delivery.interrupt is not None and delivery.interrupt.name == "refused":
            return Outcome("failed", "memo://: refused")
        SENT.append(delivery)
        return Outcome("delivered", "memo")

    def close(self) -> None:
        pass


def parse_memo(value: Any, where: str, base: Path) -> Memo:
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        raise InvalidInputError(f"notify config {where}.url", "must be a string")
    return Memo(value["url"], float(value.get("timeout", 2.0)))


@pytest.fixture
def memo() -> Iterator[Channel]:
    """The throwaway channel, registered for one test."""
    SENT.clear()
    with registered(Channel("memo", parse_memo)) as channel:
        yield channel
    assert "memo" not in [c.key for c in channels()]


def memo_config(**extra: Any) -> dict[str, Any]:
    return {"subscriptions": [{"name": "desk", "events": ["*"], "memo": {"url": "memo://k:s3cret@desk/"}, **extra}]}


def test_a_registered_channel_receives_the_log_in_order(store: InterruptStore, memo: Channel) -> None:
    """The notifier sends each event to the registered channel once, in log order, with its stable id and inbox link."""
    first = mint(store, "t-1", name="refund")
    store.resume("t-1", first["interrupt_id"], {"approved": True}, actor="alice")
    with Notifier(store, memo_config(), from_start=True, inbox_url="https://inbox.example") as n:
        report = n.run_once()
        assert n.status()[0]["target"] == "memo://"
    events = store.events()
    assert report.total("delivered") == 2
    assert [d.event.position for d in SENT] == [e.position for e in events]
    assert [d.msg_id for d in SENT] == [webhook_id("desk", e.position) for e in events]
    assert all(d.interrupt is not None and d.interrupt.name == "refund" for d in SENT)
    assert SENT[0].inbox_url == "https://inbox.example"


def test_a_registered_channels_failure_is_retried_like_any_other(store: InterruptStore, memo: Channel) -> None:
    """A failed send records its try and holds the subscription back, as for a webhook."""
    mint(store, "t-1", name="refused")
    with Notifier(store, memo_config(), from_start=True) as n:
        report = n.run_once()
        (row,) = n.status()
    assert (report.total("delivered"), report.total("failed")) == (0, 1)
    assert row["last_error"] == "memo://: refused" and row["state"].startswith("retrying")


def test_a_channels_timeout_bounds_the_lease(store: InterruptStore, memo: Channel) -> None:
    """A lease not above the channel's own timeout is refused, naming the channel's field."""
    config = memo_config()
    config["subscriptions"][0]["memo"]["timeout"] = 90
    with pytest.raises(InvalidInputError, match=r"90 s, subscriptions\[0\]\.memo\.timeout"):
        Notifier(store, config)


def test_the_config_reads_exactly_one_channel_of_those_registered(memo: Channel) -> None:
    """A subscription names one channel: none or two is an error that lists them all."""
    for sub in ({"name": "x"}, {"name": "x", "memo": {"url": "u"}, "apprise": "json://h"}):
        with pytest.raises(InvalidInputError, match="needs exactly one of webhook, apprise or memo"):
            parse_config({"subscriptions": [sub]})
    with pytest.raises(InvalidInputError, match=r"subscriptions\[0\]\.memo\.url"):
        parse_config({"subscriptions": [{"name": "x", "memo": {}}]})


def test_an_unregistered_channels_key_is_unknown() -> None:
    """Without the registration, the key is refused like any unknown key; built-in channels cannot be removed."""
    with pytest.raises(InvalidInputError, match=r"subscriptions\[0\]\.memo.*unknown key"):
        parse_config(memo_config())
    with pytest.raises(ValueError, match="built in"):
        unregister("webhook")
    with pytest.raises(ValueError, match="already"), registered(Channel("retry", parse_memo)):
        pass


def test_the_command_line_hides_a_channels_urls(memo: Channel, tmp_path: Path) -> None:
    """The URLs a destination declares are the secrets the command line keeps out of its error lines."""
    from symfonic_store.cli.app import Session
    from symfonic_store.cli.commands.notify import _config  # the function under test
    from symfonic_store.notify.config import load_config

    path = tmp_path / "notify.json"
    path.write_text(json.dumps(memo_config()), encoding="utf-8")
    session = Session()
    _config(session, path)
    assert {"memo://k:s3cret@desk/", "s3cret"} <= session.secrets
    assert load_config(path).subscriptions[0].destination == Memo("memo://k:s3cret@desk/")


def test_the_old_import_paths_still_work_with_a_warning(tmp_path: Path) -> None:
    """``notify.senders`` and a subscription's ``webhook``/``apprise`` give the moved names, each with a DeprecationWarning."""
    (tmp_path / "s").write_text("whsec_" + "QUJD" * 8)
    config = parse_config({"subscriptions": [
        {"name": "a", "webhook": {"url": "https://h/x", "secret_file": "s"}},
        {"name": "b", "apprise": ["json://h/"]}]}, base=tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from symfonic_store.notify.senders import AppriseSender as Old
        from symfonic_store.notify.senders import Outcome as OldOutcome

        hook, apprise = config.subscriptions
        assert hook.webhook == Webhook("https://h/x", "whsec_" + "QUJD" * 8, 10.0) and hook.apprise == ()
        assert apprise.apprise == ("json://h/",) and apprise.webhook is None
    assert Old is AppriseSender and OldOutcome is Outcome
    assert len([w for w in caught if issubclass(w.category, DeprecationWarning)]) == 6
