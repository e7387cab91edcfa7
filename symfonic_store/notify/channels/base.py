"""What a notification channel is: the part of a subscription it reads from the config
file (a :class:`Destination`), the :class:`Sender` that delivers one event there, and
the :class:`Channel` registration that ties its config key to them.

A channel never raises for its receiver's failures: a send returns an :class:`Outcome`,
and no detail it gives carries a URL's secrets (scheme and host only:
:func:`~symfonic_store.notify.fields.safe_target`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from ...events import StoredEvent
from ..message import Interrupt

EXTRA = "pip install '.[notify]' in a checkout of symfonic-store"


def need(module: str) -> Any:
    """Import an optional dependency of the notifier, saying what to install without it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"the notifier needs {module.split('.')[0]}: {EXTRA}") from exc


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one send ended: ``delivered`` moves the subscription's cursor past the event,
    ``failed`` is tried again after a backoff, ``gone`` disables the subscription."""

    kind: Literal["delivered", "failed", "gone"]
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event to send to one subscription (already redacted for its tenants)."""

    msg_id: str
    """The same on every retry, from every process (:func:`~..message.webhook_id`)."""
    event: StoredEvent
    interrupt: Interrupt | None
    """What the notifier knows of the interrupt the event concerns (from its mint)."""
    inbox_url: str | None
    """The approval service's address, for links (:func:`~..message.inbox_url`)."""
    now: datetime


class Sender(Protocol):
    """Delivers to one subscription's destination; one per subscription, made by the
    notifier when it starts and closed when it closes."""

    def deliver(self, delivery: Delivery, *, within: float) -> Outcome:
        """Send ``delivery``, done (or given up as failed) within ``within`` seconds."""
        ...

    def close(self) -> None:
        """Release what the sender holds (connections, threads, processes)."""
        ...


class Destination(Protocol):
    """A subscription's channel part, as its :attr:`Channel.parse` read it."""

    @property
    def timeout(self) -> float:
        """Seconds one send may take, from the connection to the last byte (the
        notifier's lease must be longer)."""
        ...

    @property
    def target(self) -> str:
        """Where it delivers, secrets left out (scheme and host only)."""
        ...

    @property
    def urls(self) -> tuple[str, ...]:
        """The addresses it sends to, whose secrets are never shown (the command line
        hides them from its error lines)."""
        ...

    def timeout_field(self, where: str) -> str:
        """Where its timeout is set, for an error about it (``where``: the subscription)."""
        ...

    def sender(self, where: str) -> Sender:
        """The sender to it (``where`` names the subscription in errors).

        Raises:
            InvalidInputError: the channel's library refuses the destination.
            ImportError: the channel's optional dependency is not installed.
        """
        ...


@dataclass(frozen=True, slots=True)
class Channel:
    """A channel's registration: its key in a subscription of the config file and the
    function that reads the key's value."""

    key: str
    parse: Callable[[Any, str, Path], Destination]
    """``parse(value, where, base)``: the key's JSON value as a destination; ``where``
    names the field in errors (``subscriptions[0].webhook``); relative paths are read
    from ``base``, the config file's folder.

    Raises:
        InvalidInputError: the value is wrong; the message names the field.
    """


SUBSCRIPTION_KEYS = frozenset({"name", "events", "interrupts", "tenants", "retry"})
"""A subscription's keys that are not a channel's."""
_REGISTRY: dict[str, Channel] = {}
_BUILT_IN: list[str] = []


def register(channel: Channel, *, built_in: bool = False) -> Channel:
    """Add a channel to the registry; returns it.

    Raises:
        ValueError: the key is taken, by a channel or by a subscription's own keys.
    """
    if channel.key in _REGISTRY or channel.key in SUBSCRIPTION_KEYS:
        raise ValueError(f"notify channel {channel.key!r} is already a subscription's key")
    _REGISTRY[channel.key] = channel
    if built_in:
        _BUILT_IN.append(channel.key)
    return channel


def unregister(key: str) -> None:
    """Remove a channel :func:`register` added (a built-in one stays).

    Raises:
        ValueError: ``key`` is a built-in channel.
        KeyError: no channel has that key.
    """
    if key in _BUILT_IN:
        raise ValueError(f"notify channel {key!r} is built in")
    del _REGISTRY[key]


@contextmanager
def registered(channel: Channel) -> Iterator[Channel]:
    """``channel`` registered inside the ``with`` block, unregistered after it."""
    register(channel)
    try:
        yield channel
    finally:
        unregister(channel.key)


def channels() -> tuple[Channel, ...]:
    """The registered channels, built-in ones first, in registration order."""
    return tuple(_REGISTRY.values())
