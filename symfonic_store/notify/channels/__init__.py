"""The notifier's channels: where a subscription's events go (SPEC §14).

A channel is one module and one registration: a module that reads its key of a
subscription (``parse`` -> a :class:`~.base.Destination`), makes the
:class:`~.base.Sender` that delivers there, and calls
``register(Channel("<key>", parse))``. The config file, the notifier, its lease check
and the command line's secret hiding then know it; nothing else changes. A built-in
channel is also imported below; another one is registered when its module is imported
(or for a while, :func:`~.base.registered`).
"""

from __future__ import annotations

from . import webhook

# isort: split
# Registered after the webhook: config errors list the channels in registration order.
from . import apprise
from .base import (
    Channel,
    Delivery,
    Destination,
    Outcome,
    Sender,
    channels,
    need,
    register,
    registered,
    unregister,
)

__all__ = [
    "Channel",
    "Delivery",
    "Destination",
    "Outcome",
    "Sender",
    "apprise",
    "channels",
    "need",
    "register",
    "registered",
    "unregister",
    "webhook",
]
