"""The notifier's figures on the service's ``/metrics`` (SPEC §14), read from the store's
tables (deliveries happen in ``notify`` processes, not in the service):

- ``symfonic_notify_deliveries_total{subscription,outcome}``: ``delivered``, ``failed``
  (every failed try, a 410 included) and ``dead_lettered``
- ``symfonic_notify_dead_letters{subscription}``: dead letters waiting for ``notify retry``
- ``symfonic_notify_lag_events{subscription}`` and ``symfonic_notify_lag_seconds``: the
  events after its cursor, and the age of the oldest of them (0 when caught up)
- ``symfonic_notify_disabled{subscription}``: 1 while a 410 keeps it disabled
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..store.plan import Op
from . import ledger

if TYPE_CHECKING:
    from ..store import InterruptStore


def delivery_metrics(store: InterruptStore) -> Iterator[Metric]:
    """The metric families of every subscription that has a cursor in the store."""
    rows: list[ledger.Figures] = store.runner.run(Op(ledger.figures, write=False))
    now = time.time()
    deliveries = CounterMetricFamily(
        "symfonic_notify_deliveries", "Notifier deliveries by subscription and outcome.",
        labels=["subscription", "outcome"],
    )
    letters = GaugeMetricFamily(
        "symfonic_notify_dead_letters", "Dead letters waiting for `notify retry`.", labels=["subscription"]
    )
    lag_events = GaugeMetricFamily(
        "symfonic_notify_lag_events", "Events after the subscription's cursor.", labels=["subscription"]
    )
    lag_seconds = GaugeMetricFamily(
        "symfonic_notify_lag_seconds",
        "Age of the oldest event after the subscription's cursor (0 when caught up).",
        labels=["subscription"],
    )
    disabled = GaugeMetricFamily(
        "symfonic_notify_disabled", "1 while a 410 keeps the subscription disabled.", labels=["subscription"]
    )
    for r in rows:
        for outcome, value in (("delivered", r.delivered), ("failed", r.failed), ("dead_lettered", r.dead_lettered)):
            deliveries.add_metric([r.subscription, outcome], value)
        letters.add_metric([r.subscription], r.waiting_letters)
        lag_events.add_metric([r.subscription], r.lag_events)
        age = 0.0 if r.oldest_undelivered is None else max(0.0, now - r.oldest_undelivered.timestamp())
        lag_seconds.add_metric([r.subscription], age)
        disabled.add_metric([r.subscription], 1 if r.disabled else 0)
    yield from (deliveries, letters, lag_events, lag_seconds, disabled)
