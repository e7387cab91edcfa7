"""The webhook channel: a Standard Webhooks endpoint (SPEC §14), each event POSTed as
signed JSON (httpx, signed by ``standardwebhooks``).

Config: ``"webhook": {"url", "secret_file", "timeout_seconds"}`` -- an ``http(s)`` URL,
a file holding the ``whsec_`` secret (relative to the config's folder), the send's
timeout (default 10 s).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import fields
from ..message import webhook_body
from .base import Channel, Delivery, Outcome, Sender, need, register

DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Webhook:
    """A subscription's webhook: where, the signing secret, the send's timeout."""

    url: str
    secret: str = field(repr=False)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def target(self) -> str:
        return fields.safe_target(self.url)

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url,)

    def timeout_field(self, where: str) -> str:
        return f"{where}.webhook.timeout_seconds"

    def sender(self, where: str) -> Sender:
        return WebhookSender(self)


def _secret(raw: dict[str, Any], where: str, base: Path) -> str:
    path_value = raw.get("secret_file")
    if not isinstance(path_value, str) or not path_value:
        raise fields.bad(f"{where}.secret_file", "must name the file holding the whsec_ secret")
    path = Path(path_value)
    if not path.is_absolute():
        path = base / path
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise fields.bad(f"{where}.secret_file", f"cannot be read ({exc.strerror or exc})") from None
    if not secret.startswith("whsec_") or len(secret) <= len("whsec_"):
        raise fields.bad(f"{where}.secret_file", "must hold a secret that starts with whsec_ (base64 after it)")
    try:
        base64.b64decode(secret[len("whsec_"):], validate=True)
    except (binascii.Error, ValueError):
        raise fields.bad(f"{where}.secret_file", "the secret after whsec_ is not base64") from None
    return secret


def parse(value: Any, where: str, base: Path) -> Webhook:
    """The ``webhook`` key's value (see the module docstring).

    Raises:
        InvalidInputError: a key is missing, unknown or wrong; the message names it.
    """
    hook = fields.keys(value, where, {"url", "secret_file", "timeout_seconds"})
    url = fields.url(hook.get("url"), f"{where}.url", ("http", "https"))
    timeout = DEFAULT_TIMEOUT
    if "timeout_seconds" in hook:
        timeout = fields.number(hook["timeout_seconds"], f"{where}.timeout_seconds", minimum=0.1)
    return Webhook(url, _secret(hook, where, base), timeout)


class WebhookSender:
    """POSTs signed JSON; 2xx delivered, 410 gone, anything else (a redirect too) failed.

    ``timeout_seconds`` bounds the whole send, from the connection to the response's last
    byte (httpx's own timeouts bound each read, so a receiver trickling a byte at a time
    would keep a send open for ever): the request runs under :func:`asyncio.wait_for` on
    an event loop of the sender's own, in a daemon thread of its own (started at the first
    send, stopped and joined by :meth:`close`), and a send past its deadline is cancelled,
    which closes its connection. The calling thread's event loop is never used nor
    changed: a sender works from inside a running loop (an async application, a notebook)
    as well as from a plain thread."""

    def __init__(self, hook: Webhook) -> None:
        httpx = need("httpx")
        standardwebhooks = need("standardwebhooks")
        self._signer = standardwebhooks.Webhook(hook.secret)
        self._url = hook.url
        self._where = hook.target
        self._httpx = httpx
        self._timeout = hook.timeout
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None

    def _started(self) -> tuple[asyncio.AbstractEventLoop, Any]:
        """The sender's loop (running in its thread) and HTTP client, started if need be."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_serve, args=(loop,), name="symfonic-webhook-sender", daemon=True)
                thread.start()
                try:
                    client = asyncio.run_coroutine_threadsafe(_async_client(self._httpx, self._timeout), loop).result()
                except BaseException:
                    loop.call_soon_threadsafe(loop.stop)
                    thread.join()
                    raise
                self._loop, self._thread, self._client = loop, thread, client
            return self._loop, self._client

    def deliver(self, delivery: Delivery, *, within: float) -> Outcome:
        """The event's webhook body (:func:`~..message.webhook_body`), sent."""
        body = webhook_body(delivery.event, delivery.interrupt, delivery.inbox_url)
        return self.send(delivery.msg_id, body, now=delivery.now, within=within)

    def send(self, msg_id: str, body: dict[str, Any], *, now: datetime, within: float | None = None) -> Outcome:
        """One POST, done within ``within`` seconds (the hook's timeout when None or longer)."""
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        stamp = now.astimezone(UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(stamp.timestamp())),
            "webhook-signature": self._signer.sign(msg_id, stamp, data),
        }
        limit = self._timeout if within is None else max(0.0, min(within, self._timeout))
        if limit <= 0:
            return Outcome("failed", f"{self._where}: no time left before the lease ends")
        loop, client = self._started()
        # The deadline is kept on the sender's loop (wait_for cancels the request there,
        # closing its connection); this thread only waits for that outcome.
        sent = asyncio.run_coroutine_threadsafe(_post(client, self._url, data.encode(), headers, limit), loop)
        try:
            response = sent.result()
        except (TimeoutError, self._httpx.TimeoutException):
            return Outcome("failed", f"{self._where}: timed out")
        except self._httpx.HTTPError as exc:
            return Outcome("failed", f"{self._where}: {type(exc).__name__}")
        except BaseException:
            sent.cancel()  # this thread was interrupted: the request is not left running
            raise
        code = response.status_code
        if 200 <= code < 300:
            return Outcome("delivered", f"HTTP {code}")
        if code == 410:
            return Outcome("gone", f"{self._where}: HTTP 410 Gone")
        if 300 <= code < 400:
            return Outcome("failed", f"{self._where}: HTTP {code} (redirects are not followed)")
        return Outcome("failed", f"{self._where}: HTTP {code}")

    def close(self) -> None:
        """Close the HTTP client, stop the sender's loop and join its thread."""
        with self._lock:
            loop, thread, client = self._loop, self._thread, self._client
            self._loop = self._thread = self._client = None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The sender's thread: its loop runs until stopped, then is closed here."""
    asyncio.set_event_loop(loop)  # this thread's only
    try:
        loop.run_forever()
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


async def _async_client(httpx: Any, timeout: float) -> Any:
    """The sender's client, made on its loop."""
    return httpx.AsyncClient(follow_redirects=False, timeout=timeout)


async def _post(client: Any, url: str, content: bytes, headers: dict[str, str], limit: float) -> Any:
    """One POST, cancelled (its connection closed) when it outlasts ``limit`` seconds."""
    return await asyncio.wait_for(client.post(url, content=content, headers=headers), limit)


CHANNEL = register(Channel("webhook", parse), built_in=True)
