"""OpenTelemetry spans, when OpenTelemetry is there (SPEC §14).

``span(name, **attributes)`` is a context manager: with ``opentelemetry-api`` installed
and a tracer provider configured, it opens a span named ``name`` carrying the attributes
(ids only, never payloads; None values left out); otherwise it does nothing. It never
imports OpenTelemetry itself: an application that configured a provider has imported
``opentelemetry.trace`` already, so while that module is not loaded there is nothing to
record, and a span costs one dictionary lookup. An exception leaving the block is
recorded on the span and raised again.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

TRACER = "symfonic_store"
_NOTHING: AbstractContextManager[None] = nullcontext()

Attribute = str | int | float | bool | None


def span(name: str, **attributes: Attribute) -> AbstractContextManager[Any | None]:
    """A span named ``name`` with ``attributes``, or nothing.

    The context manager yields the span (to add attributes found inside), or None when
    no span is recorded.
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return _NOTHING
    provider = trace.get_tracer_provider()
    # The API's stand-ins until the application sets a provider: nothing would be recorded.
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return _NOTHING
    return _recorded(provider.get_tracer(TRACER), name, attributes)


@contextmanager
def _recorded(tracer: Any, name: str, attributes: dict[str, Attribute]) -> Iterator[Any]:
    kept = {k: v for k, v in attributes.items() if v is not None}
    with tracer.start_as_current_span(name, attributes=kept) as opened:
        yield opened
