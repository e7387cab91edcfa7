"""What the notifier shows (SPEC §14): ``/metrics`` deliveries by subscription and
outcome, dead letters and lag read from the store's tables; an OpenTelemetry span per
delivery carrying ids, never payloads (the SDK's in-memory exporter)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import mint
from notify_rig import Receiver, hook_config, http_receiver
from prometheus_client.parser import text_string_to_metric_families

from symfonic_store import InterruptStore, tracing
from symfonic_store.notify import Notifier, webhook_id
from symfonic_store.server.metrics import ServiceMetrics

PAYLOAD_SECRET = "payload-value-never-in-a-span"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with http_receiver() as r:
        yield r


def samples(store: InterruptStore) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = ServiceMetrics(store).render().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) if family.name.startswith("symfonic_notify")
        for s in family.samples
    }


def test_metrics_count_deliveries_dead_letters_and_lag_from_the_tables(
    store: InterruptStore, tmp_path: Path, receiver: Receiver
) -> None:
    """A notifier in this process writes only the tables; a fresh ServiceMetrics reads the counts, the waiting dead letter and the lag from them."""
    receiver.answer = lambda r: 500 if r.json()["data"]["thread_id"] == "t-bad" else 200
    mint(store, "t-bad")
    mint(store, "t-ok")
    config = hook_config(tmp_path, receiver.url, retry={"max_tries": 1})
    with Notifier(store, config, from_start=True) as n:
        n.run_once()
    mint(store, "t-late")
    got = samples(store)
    erp = (("subscription", "erp"),)
    assert got[("symfonic_notify_deliveries_total", (("outcome", "delivered"), *erp))] == 1
    assert got[("symfonic_notify_deliveries_total", (("outcome", "failed"), *erp))] == 1
    assert got[("symfonic_notify_deliveries_total", (("outcome", "dead_lettered"), *erp))] == 1
    assert got[("symfonic_notify_dead_letters", erp)] == 1
    assert got[("symfonic_notify_lag_events", erp)] == 1  # t-late waits
    assert got[("symfonic_notify_lag_seconds", erp)] >= 0
    assert got[("symfonic_notify_disabled", erp)] == 0


@pytest.fixture
def spans() -> Iterator[Any]:
    """The SDK's in-memory exporter on the global tracer provider (set here unless one is)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    tracing.reset()  # a provider checked less than a second ago is not asked again
    yield exporter
    processor.shutdown()


def test_a_span_per_delivery_with_ids_and_outcome_never_the_payload(
    store: InterruptStore, tmp_path: Path, receiver: Receiver, spans: Any
) -> None:
    """Each delivery is one span named symfonic.notify.deliver with the subscription, thread, interrupt, position, webhook id and outcome; no attribute holds a payload value."""
    receiver.answer = lambda r: 200
    pending = mint(store, "t-1", payload={"secret": PAYLOAD_SECRET})
    with Notifier(store, hook_config(tmp_path, receiver.url), from_start=True) as n:
        n.run_once()
    (event,) = store.events()
    (span,) = [s for s in spans.get_finished_spans() if s.name == "symfonic.notify.deliver"]
    assert dict(span.attributes) == {
        "symfonic.subscription": "erp", "symfonic.thread_id": "t-1",
        "symfonic.interrupt_id": pending["interrupt_id"], "symfonic.event_type": "interrupt.minted",
        "symfonic.position": event.position, "symfonic.webhook_id": webhook_id("erp", event.position),
        "symfonic.outcome": "delivered",
    }
    assert PAYLOAD_SECRET not in repr(span.to_json())


def test_without_a_provider_or_without_the_api_no_span_is_made_and_nothing_imported() -> None:
    """Fresh interpreters: span() imports nothing of OpenTelemetry and yields the no-op; with the API loaded but no provider set, still the no-op; the notifier's import loads none of it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from symfonic_store import tracing\n"
        "import symfonic_store.notify\n"
        "with tracing.span('x', a=1) as s: assert s is tracing.NO_SPAN\n"
        "assert not any(m.startswith('opentelemetry') for m in sys.modules), 'imported'\n"
        "import opentelemetry.trace\n"
        "with tracing.span('x', a=1) as s: assert s is tracing.NO_SPAN\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
