"""Deprecated: the senders moved to :mod:`symfonic_store.notify.channels` (one module a
channel: :mod:`~.channels.webhook`, :mod:`~.channels.apprise`). The old names still
import from here, with a :class:`DeprecationWarning`; see CHANGELOG.md."""

from __future__ import annotations

import warnings
from typing import Any

from .config import Subscription

_MOVED = {
    "EXTRA": "symfonic_store.notify.channels.base",
    "need": "symfonic_store.notify.channels.base",
    "Outcome": "symfonic_store.notify.channels.base",
    "WebhookSender": "symfonic_store.notify.channels.webhook",
    "APPRISE_TIMEOUT": "symfonic_store.notify.channels.apprise",
    "AppriseSender": "symfonic_store.notify.channels.apprise",
}


def __getattr__(name: str) -> Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"symfonic_store.notify.senders.{name} moved to {home}", DeprecationWarning, stacklevel=2)
    import importlib

    return getattr(importlib.import_module(home), name)


def sender_for(sub: Subscription, index: int) -> Any:
    """Deprecated: ``sub.destination.sender(f"subscriptions[{index}]")``."""
    warnings.warn("sender_for is deprecated: use Subscription.destination.sender(where)",
                  DeprecationWarning, stacklevel=2)
    return sub.destination.sender(f"subscriptions[{index}]")
