"""OpenTelemetry spans (SPEC §14): ids, never payloads; nothing imported without it.

With a tracer provider of the SDK and its in-memory exporter, a resume, a gateway answer
and a sweep each emit their span carrying the thread and interrupt ids, and no value of
a payload or a response appears in any span. With ``opentelemetry`` not importable (a
meta-path finder refuses it), nothing of it is imported (the store never tries), and the
same calls work.
"""

from __future__ import annotations

import importlib.abc
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from native_graphs import Wires, node_graph
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from symfonic_store import InterruptStore, build_interrupt_marker, tracing
from symfonic_store.langgraph import InterruptGateway

SECRET_PAYLOAD = "payload-value-7f3a"
SECRET_RESPONSE = "response-value-91c2"
POLICY = {"*": {"remind_after": 1, "escalate_after": 2, "escalate_to": ["lead"]}}

_EXPORTER = InMemorySpanExporter()


def _provider() -> TracerProvider:
    """The process's SDK provider, exporting to the in-memory exporter (set once: the API
    lets a process set its provider only once)."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        provider = current
    else:
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not getattr(provider, "_symfonic_test_exporter", False):
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        provider._symfonic_test_exporter = True  # type: ignore[attr-defined]
    return provider


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The finished spans of the test (a configured SDK tracer provider)."""
    _provider()
    tracing.reset()
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()
    tracing.reset()


def named(found: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def leaks(found: Sequence[ReadableSpan]) -> list[str]:
    """Every span whose JSON (attributes, events, status) shows a payload or response value."""
    return [s.name for s in found if SECRET_PAYLOAD in s.to_json() or SECRET_RESPONSE in s.to_json()]


def mint(store: InterruptStore, thread_id: str, interrupt_id: str, *, age: float = 0.0) -> None:
    marker = build_interrupt_marker(
        name="refund", interrupt_id=interrupt_id, payload={"note": SECRET_PAYLOAD}
    )["_interrupt_pending"]
    marker["minted_at"] -= age
    store.mint(thread_id, marker)


def test_a_resume_emits_its_span_with_the_ids_and_no_payload(
    store: InterruptStore, spans: InMemorySpanExporter
) -> None:
    """store.resume: one ``symfonic.resume`` span with the thread and interrupt ids."""
    mint(store, "t-1", "i-1")
    store.resume("t-1", "i-1", {"approved": True, "why": SECRET_RESPONSE}, actor="alice")
    (resumed,) = named(spans.get_finished_spans(), "symfonic.resume")
    assert resumed.attributes is not None
    assert dict(resumed.attributes) == {"symfonic.thread_id": "t-1", "symfonic.interrupt_id": "i-1"}
    assert resumed.status.is_ok
    assert leaks(spans.get_finished_spans()) == []


def test_a_refused_resume_ends_its_span_with_the_error(
    store: InterruptStore, spans: InMemorySpanExporter
) -> None:
    """A resume the store refuses: the span ends with an error status, and still no payload."""
    mint(store, "t-1", "i-1")
    with pytest.raises(Exception, match="unknown|never minted|nothing was minted"):
        store.resume("t-1", "i-2", {"why": SECRET_RESPONSE}, actor="alice")
    (refused,) = named(spans.get_finished_spans(), "symfonic.resume")
    assert not refused.status.is_ok
    assert leaks(spans.get_finished_spans()) == []


def test_a_gateway_answer_emits_its_span_with_the_ids_and_no_payload(
    store: InterruptStore, spans: InMemorySpanExporter
) -> None:
    """InterruptGateway.answer: a ``symfonic.gateway.answer`` span with the ids and the graph."""
    wires = Wires()
    gate = InterruptGateway(node_graph(InMemorySaver(), wires), store)
    out = gate.invoke({}, {"configurable": {"thread_id": "t-g"}})
    (paused,) = out["__interrupt__"]
    gate.answer("t-g", paused.id, {"approved": True, "why": SECRET_RESPONSE}, actor="alice")
    assert wires.sent == [999]
    (answered,) = named(spans.get_finished_spans(), "symfonic.gateway.answer")
    assert answered.attributes is not None
    assert dict(answered.attributes) == {
        "symfonic.thread_id": "t-g", "symfonic.interrupt_id": paused.id, "symfonic.graph": "wire-node",
    }
    assert leaks(spans.get_finished_spans()) == []


def test_a_sweep_emits_its_span_with_counts_and_the_ids_it_touched(
    store: InterruptStore, spans: InMemorySpanExporter
) -> None:
    """store.sweep: a ``symfonic.sweep`` span counting expiries, reminders and escalations,
    with an event per interrupt carrying only its ids."""
    mint(store, "t-old", "i-old", age=7200)
    mint(store, "t-chased", "i-chased", age=30)
    store.sweep(ttl_seconds=3600, policy=POLICY)
    (swept,) = named(spans.get_finished_spans(), "symfonic.sweep")
    assert swept.attributes is not None
    assert swept.attributes["symfonic.expired"] == 1
    assert swept.attributes["symfonic.reminded"] == 1
    assert swept.attributes["symfonic.escalated"] == 1
    events = [(e.name, dict(e.attributes or {})) for e in swept.events]
    assert events == [
        ("interrupt.expired", {"symfonic.thread_id": "t-old", "symfonic.interrupt_id": "i-old"}),
        ("interrupt.reminded", {"symfonic.thread_id": "t-chased", "symfonic.interrupt_id": "i-chased"}),
        ("interrupt.escalated", {"symfonic.thread_id": "t-chased", "symfonic.interrupt_id": "i-chased"}),
    ]
    assert leaks(spans.get_finished_spans()) == []


def test_an_unconfigured_provider_makes_no_span(monkeypatch: pytest.MonkeyPatch) -> None:
    """opentelemetry-api without a provider (its proxy): the shared no-op, no span made."""
    tracing.reset()
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    try:
        with tracing.span("symfonic.test", **{"symfonic.thread_id": "t"}) as made:
            assert made is tracing.NO_SPAN
    finally:
        tracing.reset()


class Refuse(importlib.abc.MetaPathFinder):
    """Refuses ``opentelemetry`` and its submodules, counting the attempts."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname == "opentelemetry" or fullname.startswith("opentelemetry."):
            self.attempts.append(fullname)
            raise ImportError(f"{fullname} refused by the test")
        return None


def test_without_opentelemetry_nothing_is_imported_and_every_call_works(
    store: InterruptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """opentelemetry not importable: resume and sweep work, nothing of it is imported (the
    store never even tries: a configured provider means the application imported it), and
    each span is the shared no-op."""
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    refuse = Refuse()
    monkeypatch.setattr(sys, "meta_path", [refuse, *sys.meta_path])
    tracing.reset()
    try:
        mint(store, "t-1", "i-1", age=30)
        store.resume("t-1", "i-1", {"approved": True}, actor="alice")
        mint(store, "t-2", "i-2", age=30)
        report = store.sweep(policy=POLICY)
        assert len(report.reminded) == len(report.escalated) == 1
        assert refuse.attempts == []  # never tried
        assert not [m for m in sys.modules if m.startswith("opentelemetry")]
        assert tracing.span("a") is tracing.span("b")  # the one shared no-op
        with tracing.span("symfonic.test", **{"symfonic.thread_id": "t"}) as made:
            made.set_attribute("k", 1)
            made.add_event("e", {"k": 1})
            assert made.is_recording() is False
        assert refuse.attempts == []
    finally:
        tracing.reset()
    json.dumps(report.as_dict())  # the report is unaffected


async def test_an_async_gateway_answer_emits_its_span_too(
    astore: Any, spans: InMemorySpanExporter
) -> None:
    """InterruptGateway.aanswer on the async store: the same span, ids only."""
    wires = Wires()
    gate = InterruptGateway(node_graph(InMemorySaver(), wires), astore)
    out = await gate.ainvoke({}, {"configurable": {"thread_id": "t-a"}})
    (paused,) = out["__interrupt__"]
    await gate.aanswer("t-a", paused.id, {"approved": True, "why": SECRET_RESPONSE}, actor="alice")
    assert wires.sent == [999]
    (answered,) = named(spans.get_finished_spans(), "symfonic.gateway.answer")
    assert answered.attributes is not None
    assert answered.attributes["symfonic.interrupt_id"] == paused.id
    assert leaks(spans.get_finished_spans()) == []
