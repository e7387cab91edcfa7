"""OpenTelemetry spans, when OpenTelemetry is there (SPEC §14).

``span(name, **attributes)`` is a context manager: with ``opentelemetry-api`` installed
and a tracer provider configured, it opens a span named ``name`` carrying the attributes
(ids only, never payloads); otherwise it does nothing, and nothing of OpenTelemetry is
imported when the package is missing. An exception leaving the block is recorded on the
span and raised again.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

TRACER = "symfonic_store"
_AVAILABLE: bool | None = None


def _available() -> bool:
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = importlib.util.find_spec("opentelemetry") is not None and (
            importlib.util.find_spec("opentelemetry.trace") is not None
        )
    return _AVAILABLE


def _tracer() -> Any | None:
    """The tracer of the configured provider, or None (no API, or no provider set)."""
    if not _available():
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    # The API's default stands in until the application sets a provider: nothing to record.
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(TRACER)


@contextmanager
def span(name: str, **attributes: str | int | float | bool | None) -> Iterator[Any | None]:
    """A span named ``name`` with ``attributes`` (None values left out), or nothing.

    Yields the span (to add attributes found inside), or None when no span is recorded.
    """
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    kept = {k: v for k, v in attributes.items() if v is not None}
    with tracer.start_as_current_span(name, attributes=kept) as opened:
        yield opened
