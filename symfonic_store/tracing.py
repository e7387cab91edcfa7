"""OpenTelemetry spans, when the application has them (SPEC §14).

:func:`span` returns a context manager. With ``opentelemetry-api`` installed and a tracer
provider configured (``trace.set_tracer_provider(...)``, or the OpenTelemetry
distribution's auto-configuration), it is a span of the ``symfonic_store`` tracer, made
current, recording an exception that leaves it. Otherwise it is one shared no-op: the
store imports nothing of OpenTelemetry, and a call costs a cached boolean check (the
import is tried once, lazily, at the first span). With the API installed but no provider
configured, that is found out at most once a second (a provider configured later is
used from then on).

Spans carry ids, never payloads or responses: the attributes callers pass are thread and
interrupt ids, counts and names (``symfonic.thread_id``, ``symfonic.interrupt_id``...).
Resumes, gateway answers, sweeps and deliveries use it.
"""

from __future__ import annotations

import contextlib
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

_trace: Any = None
"""``opentelemetry.trace`` once imported; None before the first span or without it."""
_missing = False
"""The import was tried and failed: no span is ever made (the cached boolean)."""
_tracer: tuple[Any, Any] | None = None
"""``(provider, tracer)``: the store's tracer of the provider it was made from."""
_unconfigured_until = 0.0
"""Until this ``time.monotonic()``, the provider is known to be the API's proxy (none
configured): asking again costs microseconds (an environment lookup), so it is asked at
most once per :data:`RECHECK_SECONDS`."""
RECHECK_SECONDS = 1.0


def _load() -> Any:
    global _trace, _missing
    try:
        from opentelemetry import trace
    except ImportError:
        _missing = True
        return None
    _trace = trace
    return trace


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span called ``name`` with ``attributes`` (ids and counts, never payloads; a
    None value is left out), or the no-op (see the module doc)."""
    if _missing:
        return _NOTHING
    global _tracer, _unconfigured_until
    if _unconfigured_until and time.monotonic() < _unconfigured_until:
        return _NOTHING
    trace = _trace if _trace is not None else _load()
    if trace is None:
        return _NOTHING
    # Not configured (the API's proxy provider): a span would only be a non-recording
    # one, so skip making it. Asked again after a while: an application may configure
    # its provider after the store's first span.
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
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
    """Forget the import's outcome, so the next span tries again (for tests)."""
    global _trace, _missing, _tracer, _unconfigured_until
    _trace = None
    _missing = False
    _tracer = None
    _unconfigured_until = 0.0
