"""Where a delivery goes: a Standard Webhooks endpoint (httpx, signed by
``standardwebhooks``) or Apprise URLs (SPEC §14). Each returns an :class:`Outcome`;
none raises for the receiver's failures, and no error text carries a URL's secrets
(only the scheme and host are ever shown)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import InvalidInputError
from .config import Subscription, Webhook, safe_target

EXTRA = "pip install '.[notify]' in a checkout of symfonic-store"
APPRISE_TIMEOUT = 30.0
"""Seconds one Apprise notification may take before it counts as failed."""


def need(module: str) -> Any:
    """Import an optional dependency of the notifier, saying what to install without it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"the notifier needs {module.split('.')[0]}: {EXTRA}") from exc


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Literal["delivered", "failed", "gone"]
    detail: str = ""


class WebhookSender:
    """POSTs signed JSON; 2xx delivered, 410 gone, anything else (a redirect too) failed.

    ``timeout_seconds`` bounds the whole send, from the connection to the response's last
    byte (httpx's own timeouts bound each read, so a receiver trickling a byte at a time
    would keep a send open for ever): the request runs on an event loop of the sender's
    own under :func:`asyncio.wait_for`, and a send past its deadline is cancelled, which
    closes its connection."""

    def __init__(self, hook: Webhook) -> None:
        import asyncio

        httpx = need("httpx")
        standardwebhooks = need("standardwebhooks")
        self._signer = standardwebhooks.Webhook(hook.secret)
        self._url = hook.url
        self._where = safe_target(hook.url)
        self._httpx = httpx
        self._timeout = hook.timeout
        self._loop = asyncio.Runner()
        self._client = self._loop.run(_async_client(httpx, hook.timeout))

    def send(self, msg_id: str, body: dict[str, Any], *, now: datetime, within: float | None = None) -> Outcome:
        """One POST, done within ``within`` seconds (the hook's timeout when None or longer)."""
        import asyncio

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
        post = self._client.post(self._url, content=data.encode(), headers=headers)
        try:
            response = self._loop.run(asyncio.wait_for(post, limit))
        except (TimeoutError, self._httpx.TimeoutException):
            return Outcome("failed", f"{self._where}: timed out")
        except self._httpx.HTTPError as exc:
            return Outcome("failed", f"{self._where}: {type(exc).__name__}")
        code = response.status_code
        if 200 <= code < 300:
            return Outcome("delivered", f"HTTP {code}")
        if code == 410:
            return Outcome("gone", f"{self._where}: HTTP 410 Gone")
        if 300 <= code < 400:
            return Outcome("failed", f"{self._where}: HTTP {code} (redirects are not followed)")
        return Outcome("failed", f"{self._where}: HTTP {code}")

    def close(self) -> None:
        try:
            self._loop.run(self._client.aclose())
        finally:
            self._loop.close()


async def _async_client(httpx: Any, timeout: float) -> Any:
    """The sender's client, made on its loop."""
    return httpx.AsyncClient(follow_redirects=False, timeout=timeout)


class AppriseSender:
    """One worker process per subscription (:mod:`.apprise_worker`) makes its Apprise
    calls; a call that outlasts its deadline counts as failed and the worker is killed
    (its connections closed with it), so no notification goes on after its send ended.
    The next send starts a new worker."""

    def __init__(self, urls: tuple[str, ...], where: str, timeout: float = APPRISE_TIMEOUT) -> None:
        apprise = need("apprise")
        checked = apprise.Apprise()
        for i, url in enumerate(urls):
            if not checked.add(url):
                raise InvalidInputError(
                    f"notify config {where}.apprise[{i}]",
                    f"Apprise does not read this URL ({safe_target(url)}...)",
                )
        self._urls = urls
        self._where = ", ".join(safe_target(u) for u in urls)
        self._timeout = timeout
        self._worker: subprocess.Popen[bytes] | None = None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._worker is not None and self._worker.poll() is None:
            return self._worker
        home = str(Path(__file__).resolve().parents[2])
        code = f"import sys; sys.path.insert(0, {home!r}); from symfonic_store.notify.apprise_worker import main; main()"
        worker = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a plugin's log line may carry a URL's secret
        )
        assert worker.stdin is not None
        worker.stdin.write(json.dumps({"urls": list(self._urls)}).encode() + b"\n")
        worker.stdin.flush()
        self._worker = worker
        return worker

    def send(self, title: str, body: str, *, within: float | None = None) -> Outcome:
        """One notification, done (or its worker killed) within ``within`` seconds (the
        sender's timeout when None or longer)."""
        limit = self._timeout if within is None else max(0.0, min(within, self._timeout))
        if limit <= 0:
            return Outcome("failed", f"{self._where}: no time left before the lease ends")
        deadline = time.monotonic() + limit
        try:
            worker = self._started()
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write(json.dumps({"title": title, "body": body}).encode() + b"\n")
            worker.stdin.flush()
            line = _line_by(worker.stdout.fileno(), deadline)
        except OSError:
            line = b""
        if line is None:
            self._stop(kill=True)
            return Outcome("failed", f"{self._where}: timed out")
        if not line:
            self._stop(kill=True)
            return Outcome("failed", f"{self._where}: the Apprise worker ended")
        answer = json.loads(line)
        if answer.get("ok"):
            return Outcome("delivered", "apprise")
        if answer.get("error"):
            return Outcome("failed", f"{self._where}: {answer['error']}")
        return Outcome("failed", f"{self._where}: not delivered")

    def _stop(self, *, kill: bool) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        if not kill and worker.stdin is not None:
            try:
                worker.stdin.close()  # the worker ends at the end of its input
                worker.wait(timeout=self._timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for pipe in (worker.stdin, worker.stdout):
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        self._stop(kill=False)


def _line_by(fd: int, deadline: float) -> bytes | None:
    """One line read from ``fd`` by ``deadline`` (monotonic): None when it did not come
    in time, ``b""`` at the end of the input."""
    import select

    got = b""
    while not got.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return b""
        got += chunk
    return got


def sender_for(sub: Subscription, index: int) -> WebhookSender | AppriseSender:
    if sub.webhook is not None:
        return WebhookSender(sub.webhook)
    return AppriseSender(sub.apprise, f"subscriptions[{index}]")
