"""Where a delivery goes: a Standard Webhooks endpoint (httpx, signed by
``standardwebhooks``) or Apprise URLs (SPEC §14). Each returns an :class:`Outcome`;
none raises for the receiver's failures, and no error text carries a URL's secrets
(only the scheme and host are ever shown)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
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
        self._where = safe_target(hook.url)
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
