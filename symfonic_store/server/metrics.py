"""``/metrics``: the store seen by Prometheus (through ``prometheus-client``).

Most figures come from the event log, not from this process's own traffic, so they
are true whoever wrote the events (this service, another replica, the CLI, a sweep, a
gateway in an agent's process) and survive a restart: a :class:`LogTail` folds every
event once, in pages, from the beginning of the log (bounded work per scrape while it
catches up on a large log; ``symfonic_log_position`` says how far it got).

- ``symfonic_open_interrupts{source}``, ``symfonic_oldest_open_interrupt_age_seconds``
- ``symfonic_answers_total{outcome}``: ``resumed``, and each refusal by its ``why`` (a
  refused assignment is no answer: it is counted only in ``symfonic_events_total``)
- ``symfonic_expiries_total{reason}``
- ``symfonic_events_total{type}``: the log's events by type, every type the registry
  declares (:mod:`symfonic_store.event_types`) listed, 0 when none was appended
- ``symfonic_mint_to_answer_seconds``: a histogram, mint to ``interrupt.resumed``
- ``symfonic_owed_wakeups``: wake-ups expiries still owe their graphs
- ``symfonic_reader_lag_seconds``, ``symfonic_reader_lag_events``,
  ``symfonic_writers_in_flight``: how far gap-safe readers trail the writers (SPEC §11),
  from the store's ``reader_lag()`` (always 0 on SQLite)
- the notifier's deliveries, dead letters and lag by subscription, from its tables
  (:mod:`symfonic_store.notify.metrics`)
- ``symfonic_http_answers_total{code}``: this process's answers by HTTP status
  (412 and 429 are in no log)
"""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..event_types import all_types
from ..events import EXPIRED, MINTED, RESUME_REJECTED, RESUMED, refused_assignment
from ..notify.metrics import delivery_metrics

if TYPE_CHECKING:
    from ..store import InterruptStore

ANSWER_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0,
                  4 * 3600.0, 12 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0)
PAGE = 5000


class LogTail:
    """Folds the event log, once per event, into the counts the metrics show.

    It reads with the store's own cursor (``events(after=...)``), so it never skips an
    event that commits late (I11). ``position`` is the cursor it reached.
    """

    def __init__(self, store: InterruptStore) -> None:
        self.store = store
        self.position = 0
        self.answers: Tally[str] = Tally()
        self.expiries: Tally[str] = Tally()
        self.by_type: Tally[str] = Tally()
        self.buckets = [0] * (len(ANSWER_BUCKETS) + 1)
        self.answer_sum = 0.0
        self._minted: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def catch_up(self, budget: float = 2.0) -> int:
        """Fold what was appended since the last call (for at most about ``budget``
        seconds); returns the cursor reached."""
        with self._lock:
            deadline = time.monotonic() + budget
            while True:
                page = self.store.events(after=self.position, limit=PAGE)
                for event in page:
                    self._fold(event)
                if page:
                    self.position = page[-1].position
                if len(page) < PAGE or time.monotonic() > deadline:
                    return self.position

    def _fold(self, event: Any) -> None:
        key = (event.thread_id, str(event.interrupt_id))
        self.by_type[event.type] += 1
        if event.type == MINTED:
            self._minted[key] = event.occurred_at.timestamp()
        elif event.type == RESUMED:
            self.answers["resumed"] += 1
            minted = self._minted.pop(key, None)
            if minted is not None:
                waited = max(0.0, event.occurred_at.timestamp() - minted)
                self.answer_sum += waited
                index = next((i for i, le in enumerate(ANSWER_BUCKETS) if waited <= le), len(ANSWER_BUCKETS))
                self.buckets[index] += 1
        elif event.type == RESUME_REJECTED and not refused_assignment(event.data):
            self.answers[str(event.data.get("why"))] += 1
        elif event.type == EXPIRED:
            self.expiries[str(event.data.get("reason"))] += 1
            self._minted.pop(key, None)


class _StoreCollector(Collector):
    """Reads the store at scrape time (called by ``generate_latest``, in a worker thread)."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        store = self.metrics.store
        tail = self.metrics.tail
        tail.catch_up()
        now = time.time()
        pending = store.list_pending(tenants=self.metrics.scope)
        by_source: Tally[str] = Tally(str(p.get("source") or "marker") for p in pending)
        opened = GaugeMetricFamily(
            "symfonic_open_interrupts", "Interrupts waiting for an answer.", labels=["source"]
        )
        for source in ("marker", "langgraph"):
            opened.add_metric([source], by_source.get(source, 0))
        yield opened
        ages = [
            now - float(p["minted_at"])
            for p in pending
            if isinstance(p.get("minted_at"), int | float) and not isinstance(p.get("minted_at"), bool)
        ]
        yield GaugeMetricFamily(
            "symfonic_oldest_open_interrupt_age_seconds",
            "Age of the oldest interrupt waiting for an answer (0 when none is).",
            value=max(0.0, max(ages)) if ages else 0.0,
        )
        with tail._lock:
            answers = dict(tail.answers)
            expiries = dict(tail.expiries)
            by_type = dict(tail.by_type)
            buckets = list(tail.buckets)
            total = tail.answer_sum
            position = tail.position
        counted = CounterMetricFamily(
            "symfonic_answers",
            "Answers by outcome: resumed, or the refusal's why (already_resolved, expired, "
            "not_allowed, in_progress, not_taken, outcome_unknown, unknown).",
            labels=["outcome"],
        )
        for outcome in sorted(set(answers) | {"resumed"}):
            counted.add_metric([outcome], answers.get(outcome, 0))
        yield counted
        expired = CounterMetricFamily(
            "symfonic_expiries", "Interrupts declared dead, by reason.", labels=["reason"]
        )
        for reason in sorted(set(expiries) | {"ttl", "run_id", "superseded", "cancelled"}):
            expired.add_metric([reason], expiries.get(reason, 0))
        yield expired
        logged = CounterMetricFamily(
            "symfonic_events", "Events in the log, by type (every registered type, and any other seen).",
            labels=["type"],
        )
        declared = [t.name for t in all_types()]
        for name in (*declared, *sorted(set(by_type).difference(declared))):
            logged.add_metric([name], by_type.get(name, 0))
        yield logged
        cumulative, running = [], 0
        for le, count in zip((*map(str, ANSWER_BUCKETS), "+Inf"), buckets, strict=True):
            running += count
            cumulative.append((le, running))
        yield HistogramMetricFamily(
            "symfonic_mint_to_answer_seconds",
            "Time from an interrupt's mint to its admitted answer.",
            buckets=cumulative,
            sum_value=total,
        )
        yield GaugeMetricFamily(
            "symfonic_owed_wakeups",
            "Wake-ups that expiries still owe their graphs (the next sweep with --graph of that graph delivers them; dropped ones are not owed).",
            value=store.owed_wakeups(),
        )
        lag = store.reader_lag()
        yield GaugeMetricFamily(
            "symfonic_reader_lag_seconds",
            "While committed events wait for an older write transaction before gap-safe "
            "readers may see them: how long the oldest write transaction in flight has been "
            "open (0: none waits, or the server hides its start from this role).",
            value=float(lag.oldest_writer_seconds or 0.0) if lag.events else 0.0,
        )
        yield GaugeMetricFamily(
            "symfonic_reader_lag_events",
            "Committed events gap-safe readers cannot see yet (an older writer is still open).",
            value=lag.events,
        )
        yield GaugeMetricFamily(
            "symfonic_writers_in_flight",
            "The store's write transactions open (that have written) at this scrape.",
            value=lag.writers,
        )
        yield GaugeMetricFamily(
            "symfonic_log_position", "The log position the metrics have folded up to.", value=position
        )
        yield from delivery_metrics(store)


class ServiceMetrics:
    """The service's metrics registry (one per app, so several apps never collide)."""

    def __init__(self, store: InterruptStore) -> None:
        self.store = store
        self.tail = LogTail(store)
        self.registry = CollectorRegistry()
        self.http_answers = Counter(
            "symfonic_http_answers",
            "Answers this process handled, by HTTP status.",
            ["code"],
            registry=self.registry,
        )
        self.registry.register(_StoreCollector(self))
        self.scope: frozenset[str | None] | None = None
        """The tenants the open-interrupt gauges count during a :meth:`render` (SPEC §15)."""
        self._rendering = threading.Lock()

    def answered(self, status: int) -> None:
        self.http_answers.labels(code=str(status)).inc()

    def render(self, scope: frozenset[str | None] | None = None) -> bytes:
        """The Prometheus text exposition (reads the store: call it off the event loop);
        the open interrupts counted are ``scope``'s tenants' (None: all)."""
        with self._rendering:
            self.scope = scope
            try:
                return generate_latest(self.registry)
            finally:
                self.scope = None
