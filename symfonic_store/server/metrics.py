"""``/metrics``: the store seen by Prometheus (through ``prometheus-client``).

Most figures come from the database, not from this process's own traffic, so they
are true whoever wrote the events (this service, another replica, the CLI, a sweep, a
gateway in an agent's process) and survive a restart. A scrape costs the same at a
thousand open interrupts and at a million (SPEC §17; :mod:`..services.metric_counts`):

- the open counts are kept by the writes (triggers on the projection append ``+1``/``-1``
  rows, no row shared by writers); a scrape reads the totals plus those rows, then moves
  them into the totals; the oldest open age is the first entry of the projection's
  indexes;
- the log's counters are a fold kept in the database with the log position it reaches,
  advanced by whichever process scrapes (one at a time): a scrape folds only the events
  appended since (:class:`LogTail`, a page per transaction; ``symfonic_log_position``
  says how far it got). A new process starts there, not at position 0.

- ``symfonic_open_interrupts{source}``, ``symfonic_oldest_open_interrupt_age_seconds``
  (a pending marker's age counts from its numeric ``minted_at``, else from its mint)
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
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..event_types import all_types
from ..notify.metrics import delivery_metrics
from ..services import metric_counts
from ..store.plan import Op

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ..store import InterruptStore


class LogTail:
    """Keeps the log's counters in the database up to date (:mod:`..services.metric_counts`).

    Each call folds the events appended since the fold's position, page by page, with the
    store's own cursor (``events(after=...)``), so it never skips an event that commits
    late (I11); the position is the database's, shared by every process and replica, so a
    new process folds only what was appended since, never the log from position 0.
    ``position`` is the cursor the fold reached.
    """

    def __init__(self, store: InterruptStore) -> None:
        self.store = store
        self.position = 0

    def catch_up(self, budget: float = 2.0) -> int:
        """Fold what was appended since the fold's position (for at most about ``budget``
        seconds, a page per transaction); returns the cursor reached."""
        deadline = time.monotonic() + budget
        while True:
            self.position, folded = self.store.runner.run(
                Op(metric_counts.fold_page, write=True, appends=False, settled=_caught_up)
            )
            if folded < metric_counts.PAGE or time.monotonic() > deadline:
                return self.position

    def counts(self, scope: frozenset[str | None] | None = None) -> metric_counts.Snapshot:
        """The counters as the database has them (and the open counts of ``scope``)."""
        found: metric_counts.Snapshot = self.store.runner.run(
            Op(partial(metric_counts.snapshot, scope=scope), write=False)
        )
        return found


def _caught_up(conn: Connection) -> tuple[bool, tuple[int, int]]:
    done, position = metric_counts.caught_up(conn)
    return done, (position, 0)


class _StoreCollector(Collector):
    """Reads the store at scrape time (called by ``generate_latest``, in a worker thread)."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        store = self.metrics.store
        tail = self.metrics.tail
        tail.catch_up()
        store.runner.run(
            Op(metric_counts.compact, write=True, appends=False, settled=metric_counts.nothing_to_compact)
        )
        now = time.time()
        counts = tail.counts(self.metrics.scope)
        opened = GaugeMetricFamily(
            "symfonic_open_interrupts", "Interrupts waiting for an answer.", labels=["source"]
        )
        for source in ("marker", "langgraph"):
            opened.add_metric([source], counts.open.get(source, 0))
        yield opened
        yield GaugeMetricFamily(
            "symfonic_oldest_open_interrupt_age_seconds",
            "Age of the oldest interrupt waiting for an answer (0 when none is).",
            value=0.0 if counts.oldest_open is None else max(0.0, now - counts.oldest_open),
        )
        answers, expiries, by_type = counts.answers, counts.expiries, counts.by_type
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
        cumulative, running = [], 0.0
        for le, count in zip(metric_counts.BUCKET_LABELS, counts.buckets, strict=True):
            running += count
            cumulative.append((le, running))
        yield HistogramMetricFamily(
            "symfonic_mint_to_answer_seconds",
            "Time from an interrupt's mint to its admitted answer.",
            buckets=cumulative,
            sum_value=counts.answer_sum,
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
            "symfonic_log_position", "The log position the metrics have folded up to.", value=counts.position
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
