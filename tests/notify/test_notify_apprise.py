"""Apprise delivery (SPEC §14): a short message with the interrupt's name, thread, age and
inbox link, never a payload value; URLs' secrets never shown; tested against a local
``json://`` receiver and a local SMTP server (aiosmtpd), never an outside address."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest
from factories import mint
from notify_rig import Receiver, http_receiver

from symfonic_store import InterruptStore
from symfonic_store.errors import InvalidInputError
from symfonic_store.notify import Notifier

SECRET_AMOUNT = 987654321


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with http_receiver() as r:
        yield r


def json_url(receiver: Receiver) -> str:
    return receiver.url.replace("http://", "json://").rsplit("/", 1)[0] + "/apprise-TOKEN-s3cr3t"


def test_a_json_receiver_gets_a_short_message_without_payload_values(store: InterruptStore, receiver: Receiver) -> None:
    """Name, thread, interrupt, age and the inbox link; the payload's values appear nowhere in what is sent."""
    pending = mint(store, "t 1", name="refund_big", payload={"amount": SECRET_AMOUNT, "iban": "DE-TOPSECRET"})
    config = {"subscriptions": [{"name": "chat", "events": ["interrupt.minted"], "apprise": json_url(receiver)}]}
    with Notifier(store, config, from_start=True, inbox_url="https://inbox.example") as n:
        assert n.run_once().total("delivered") == 1
        (row,) = n.status()
    (request,) = receiver.requests
    sent = request.json()
    assert request.path == "/apprise-TOKEN-s3cr3t"
    assert sent["title"] == "interrupt.minted: refund_big"
    lines = sent["message"].splitlines()
    assert lines[0] == "thread t 1" and lines[1] == f"interrupt {pending['interrupt_id']}"
    assert lines[2].startswith("age ") and lines[-1] == f"https://inbox.example/interrupts/t%201/{pending['interrupt_id']}"
    assert str(SECRET_AMOUNT) not in request.body.decode() and "TOPSECRET" not in request.body.decode()
    assert row["target"] == "json://127.0.0.1" and "s3cr3t" not in str(row)


def test_a_failing_apprise_target_is_retried_and_its_error_shows_no_secret(store: InterruptStore, receiver: Receiver) -> None:
    """A refused notification is a failed try (recorded for its retry); status shows the scheme and host only."""
    receiver.answer = lambda r: 500
    mint(store, "t-1")
    config = {"subscriptions": [{"name": "chat", "apprise": [json_url(receiver)]}]}
    with Notifier(store, config, from_start=True) as n:
        assert n.run_once().total("failed") == 1
        (row,) = n.status()
    assert row["state"].startswith("retrying") and row["last_error"] == "json://127.0.0.1: not delivered"
    assert "s3cr3t" not in str(row)


def test_an_unreadable_apprise_url_is_a_config_error_naming_the_field(store: InterruptStore) -> None:
    """Apprise refuses the URL: InvalidInputError naming subscriptions[0].apprise[0], without the URL's secret."""
    config = {"subscriptions": [{"name": "chat", "apprise": "nosuchscheme://host/tok3n-s3cret"}]}
    with pytest.raises(InvalidInputError, match=r"subscriptions\[0\]\.apprise\[0\]") as raised:
        Notifier(store, config)
    assert "tok3n" not in str(raised.value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def smtp() -> Iterator[tuple[int, list[Message]]]:
    """A local SMTP server (aiosmtpd) keeping the messages it receives."""
    from aiosmtpd.controller import Controller

    got: list[Message] = []

    class Keep:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            got.append(message_from_bytes(envelope.content))
            return "250 OK"

    port = free_port()
    controller = Controller(Keep(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, got
    finally:
        controller.stop()


def test_email_reaches_a_local_smtp_server(store: InterruptStore, smtp: tuple[int, list[Message]]) -> None:
    """mailto:// with mode=insecure delivers the short message by SMTP to 127.0.0.1; no payload value in it."""
    port, got = smtp
    mint(store, "t-mail", name="wire_transfer", payload={"amount": SECRET_AMOUNT})
    url = f"mailto://127.0.0.1:{port}?from=notify@example.com&to=approver@example.com&mode=insecure"
    config = {"subscriptions": [{"name": "mail", "apprise": url}]}
    with Notifier(store, config, from_start=True) as n:
        assert n.run_once().total("delivered") == 1
    (message,) = got
    assert message["To"] == "approver@example.com"
    assert "wire_transfer" in str(message["Subject"])
    body = message.get_payload(decode=True) if not message.is_multipart() else message.get_payload(0).get_payload(decode=True)
    assert b"thread t-mail" in body and str(SECRET_AMOUNT).encode() not in body
