"""The Apprise channel: each event as a short message (:func:`~..message.short_message`)
to Apprise URLs (SPEC §14), sent by a worker process of the subscription's own
(:mod:`symfonic_store.notify.apprise_worker`).

Config: ``"apprise": "<Apprise URL>"`` or a non-empty list of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError
from .. import fields
from ..message import short_message
from .base import Channel, Delivery, Outcome, Sender, need, register

APPRISE_TIMEOUT = 30.0
"""Seconds one Apprise notification may take before it counts as failed."""


@dataclass(frozen=True, slots=True)
class AppriseUrls:
    """A subscription's Apprise URLs (they carry secrets: never shown)."""

    urls: tuple[str, ...] = field(repr=False)

    @property
    def timeout(self) -> float:
        return APPRISE_TIMEOUT

    @property
    def target(self) -> str:
        return ", ".join(fields.safe_target(u) for u in self.urls)

    def timeout_field(self, where: str) -> str:
        return f"{where}, Apprise's timeout"

    def sender(self, where: str) -> Sender:
        return AppriseSender(self.urls, where)


def parse(value: Any, where: str, base: Path) -> AppriseUrls:
    """The ``apprise`` key's value (see the module docstring).

    Raises:
        InvalidInputError: not a URL, nor a non-empty list of them; the message names it.
    """
    urls = [value] if isinstance(value, str) else value
    if not isinstance(urls, list) or not urls:
        raise fields.bad(where, "must be an Apprise URL or a non-empty list of them")
    return AppriseUrls(tuple(fields.url(u, f"{where}[{i}]") for i, u in enumerate(urls)))


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
                    f"Apprise does not read this URL ({fields.safe_target(url)}...)",
                )
        self._urls = urls
        self._where = ", ".join(fields.safe_target(u) for u in urls)
        self._timeout = timeout
        self._worker: subprocess.Popen[bytes] | None = None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._worker is not None and self._worker.poll() is None:
            return self._worker
        home = str(Path(__file__).resolve().parents[3])
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

    def deliver(self, delivery: Delivery, *, within: float) -> Outcome:
        """The event's short message (:func:`~..message.short_message`), sent."""
        title, body = short_message(delivery.event, delivery.interrupt, delivery.inbox_url, now=delivery.now)
        return self.send(title, body, within=within)

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


CHANNEL = register(Channel("apprise", parse), built_in=True)
