"""Notifications: the log's events delivered to webhooks and Apprise URLs (SPEC §14).

``Notifier(store, config)`` delivers at least once, in log order per subscription, from a
durable cursor per subscription in the store's tables. Sending needs the ``notify`` extra
(``pip install '.[notify]'`` in a checkout: ``standardwebhooks``, ``apprise``, ``httpx``);
without it, making a :class:`Notifier` raises an ``ImportError`` that says so.
"""

from __future__ import annotations

from .config import NotifyConfig, Retry, Subscription, load_config, parse_config
from .message import webhook_id
from .notifier import Notifier, Report, RetryReport

__all__ = [
    "Notifier",
    "NotifyConfig",
    "Report",
    "Retry",
    "RetryReport",
    "Subscription",
    "load_config",
    "parse_config",
    "webhook_id",
]
