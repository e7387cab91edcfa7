"""OpenTelemetry spans, when the application has them (SPEC §14).

:func:`span` returns a context manager. With ``opentelemetry-api`` installed and a tracer
provider configured (``trace.set_tracer_provider(...)``, or the OpenTelemetry
distribution's auto-configuration), it is a span of the ``symfonic_store`` tracer, made
current, recording an exception that leaves it. Otherwise it is one shared no-op
(:data:`NO_SPAN`, whose methods do nothing).

The store never imports OpenTelemetry itself: an application that configured a provider
has imported ``opentelemetry.trace`` already, so while that module is not loaded there is
nothing to record and a span costs one dictionary lookup. With the module loaded but no
provider set (the API's proxy or no-op provider), nothing would be recorded either.

Spans carry ids, never payloads or responses: the attributes callers pass are thread and
interrupt ids, counts and names (``symfonic.thread_id``, ``symfonic.interrupt_id``...).
Resumes, gateway answers, sweeps and deliveries use it.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Mapping
from typing import Any, Final

TRACER: Final = "symfonic_store"
"""The instrumentation scope of the store's spans."""


class NoSpan:
    """What ``with span(...) as s`` gives without OpenTelemetry: every call does nothing."""

    __slots__ = ()

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        pass

    def is_recording(self) -> bool:
        return False


NO_SPAN: Final = NoSpan()
_NOTHING: Final = contextlib.nullcontext(NO_SPAN)
"""Reusable and reentrant: the one no-op every call returns."""

_tracer: tuple[Any, Any] | None = None
"""``(provider, tracer)``: the store's tracer of the provider it was made from."""
_unconfigured_until = 0.0
"""Until this ``time.monotonic()``, the provider is known to be the API's stand-in (none
configured). Libraries load ``opentelemetry.trace`` without configuring anything, and
asking the API costs microseconds (it reads the environment): ask at most once per
:data:`RECHECK_SECONDS`, so a provider configured later is used within that."""
RECHECK_SECONDS = 1.0


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span called ``name`` with ``attributes`` (ids and counts, never payloads; a
    None value is left out), or the no-op (see the module doc)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return _NOTHING
    global _tracer, _unconfigured_until
    if _unconfigured_until and time.monotonic() < _unconfigured_until:
        return _NOTHING
    provider = trace.get_tracer_provider()
    # The API's stand-ins until the application sets a provider: nothing would be recorded.
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        _unconfigured_until = time.monotonic() + RECHECK_SECONDS
        return _NOTHING
    _unconfigured_until = 0.0
    if _tracer is None or _tracer[0] is not provider:
        _tracer = (provider, provider.get_tracer(TRACER))
    made: contextlib.AbstractContextManager[Any] = _tracer[1].start_as_current_span(
        name, attributes={k: v for k, v in attributes.items() if v is not None}
    )
    return made


def reset() -> None:
    """Forget the cached tracer and provider check (for tests that change the provider)."""
    global _tracer, _unconfigured_until
    _tracer = None
    _unconfigured_until = 0.0
