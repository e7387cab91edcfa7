"""Request limits: sliding-window rate limits and the body-size limit.

Rate limits are per process (each replica counts its own): failed sign-ins per client
address, answers per principal. They protect the sign-in form from guessing and the
store from a runaway script; they are not a quota system.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass

from starlette.requests import Request


class BodyTooLarge(Exception):
    """The request body is larger than the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"the request body is larger than the limit of {limit} bytes")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes (never read whole).

    Raises:
        BodyTooLarge: ``Content-Length`` says more, or more arrived.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


class SlidingWindow:
    """At most ``limit`` hits per key in any ``period`` seconds."""

    def __init__(self, limit: int, period: float = 60.0) -> None:
        if limit < 1:
            raise ValueError("a rate limit must allow at least one request")
        self.limit = limit
        self.period = period
        self._hits: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _window(self, key: str, now: float) -> deque[float]:
        hits = self._hits.setdefault(key, deque())
        while hits and hits[0] <= now - self.period:
            hits.popleft()
        return hits

    def retry_after(self, key: str) -> int | None:
        """Seconds until ``key`` may try again, or None when it may now (records nothing)."""
        now = time.monotonic()
        with self._lock:
            hits = self._window(key, now)
            if len(hits) < self.limit:
                return None
            return max(1, math.ceil(hits[0] + self.period - now))

    def hit(self, key: str) -> int | None:
        """Count one hit for ``key``; when over the limit, count nothing and return the
        seconds to wait."""
        now = time.monotonic()
        with self._lock:
            if len(self._hits) > 10_000:
                self._forget(now)
            hits = self._window(key, now)
            if len(hits) >= self.limit:
                return max(1, math.ceil(hits[0] + self.period - now))
            hits.append(now)
            return None

    def _forget(self, now: float) -> None:
        for key in [k for k, hits in self._hits.items() if not hits or hits[-1] <= now - self.period]:
            del self._hits[key]


@dataclass(frozen=True, slots=True)
class RateLimits:
    """The service's rate limits, per minute (``serve --rate-limit off``: none)."""

    sign_in_failures: int = 20
    """Failed sign-ins per client address per minute; then 429 until the window slides."""
    answers: int = 120
    """Answers per principal per minute; then 429."""
