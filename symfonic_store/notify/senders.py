"""Where a delivery goes: a Standard Webhooks endpoint (httpx, signed by
``standardwebhooks``) or Apprise URLs (SPEC §14). Each returns an :class:`Outcome`;
none raises for the receiver's failures, and no error text carries a URL's secrets
(only the scheme and host are ever shown)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
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
    """POSTs signed JSON; 2xx delivered, 410 gone, anything else (a redirect too) failed."""

    def __init__(self, hook: Webhook) -> None:
        httpx = need("httpx")
        standardwebhooks = need("standardwebhooks")
        self._signer = standardwebhooks.Webhook(hook.secret)
        self._url = hook.url
        self._where = safe_target(hook.url)
        self._httpx = httpx
        self._client = httpx.Client(follow_redirects=False, timeout=hook.timeout)

    def send(self, msg_id: str, body: dict[str, Any], *, now: datetime) -> Outcome:
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        stamp = now.astimezone(UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(stamp.timestamp())),
            "webhook-signature": self._signer.sign(msg_id, stamp, data),
        }
        try:
            response = self._client.post(self._url, content=data.encode(), headers=headers)
        except self._httpx.TimeoutException:
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
        self._client.close()


class AppriseSender:
    """One Apprise object per subscription, called from its own worker thread (Apprise
    blocks); a call that outlasts ``timeout`` counts as failed."""

    def __init__(self, urls: tuple[str, ...], where: str, timeout: float = APPRISE_TIMEOUT) -> None:
        apprise = need("apprise")
        self._apprise = apprise.Apprise()
        for i, url in enumerate(urls):
            if not self._apprise.add(url):
                raise InvalidInputError(
                    f"notify config {where}.apprise[{i}]",
                    f"Apprise does not read this URL ({safe_target(url)}...)",
                )
        self._where = ", ".join(safe_target(u) for u in urls)
        self._timeout = timeout
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="symfonic-apprise")

    def send(self, title: str, body: str) -> Outcome:
        future = self._worker.submit(self._apprise.notify, body=body, title=title)
        try:
            ok = future.result(timeout=self._timeout)
        except FutureTimeout:
            return Outcome("failed", f"{self._where}: timed out")
        except Exception as exc:  # a plugin's own failure, never shown with its URL
            return Outcome("failed", f"{self._where}: {type(exc).__name__}")
        if ok:
            return Outcome("delivered", "apprise")
        return Outcome("failed", f"{self._where}: not delivered")

    def close(self) -> None:
        self._worker.shutdown(wait=True)


def sender_for(sub: Subscription, index: int) -> WebhookSender | AppriseSender:
    if sub.webhook is not None:
        return WebhookSender(sub.webhook)
    return AppriseSender(sub.apprise, f"subscriptions[{index}]")
