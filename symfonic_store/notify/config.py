"""The notifier's config file (SPEC §14): subscriptions, their filters and retry limits.

::

    {"retry": {"max_tries": 10, "max_age_seconds": 86400, "backoff_seconds": [1, 600]},
     "subscriptions": [
       {"name": "finance", "events": ["interrupt.minted"], "interrupts": ["refund_*"],
        "tenants": ["acme"], "apprise": "<Apprise URL>"},
       {"name": "erp", "events": ["*"],
        "webhook": {"url": "<URL>", "secret_file": "<F>"}, "retry": {"max_tries": 3}}]}

A bad config raises :class:`~symfonic_store.errors.InvalidInputError` naming the field
(``subscriptions[1].webhook.url``); the command line makes it exit code 2.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from .channels import Destination, channels
from .channels.apprise import AppriseUrls
from .channels.base import SUBSCRIPTION_KEYS
from .channels.webhook import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT  # its old home
from .channels.webhook import Webhook
from .fields import bad, keys, number
from .fields import safe_target as safe_target  # its old home

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True, slots=True)
class Retry:
    """How long a failing event is tried before it becomes a dead letter."""

    max_tries: int = 10
    """Tries in all, the first one counted."""
    max_age_seconds: float = 86400.0
    """Seconds since the event's first failed try after which it is given up."""
    backoff_first: float = 1.0
    backoff_cap: float = 600.0

    def delay(self, tries: int) -> float:
        """Seconds to wait after the ``tries``-th failed try: first, doubling, at most cap."""
        return float(min(self.backoff_cap, self.backoff_first * 2 ** max(0, tries - 1)))


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscription: what it matches and where it goes (its channel's destination:
    a :class:`~.channels.webhook.Webhook`, :class:`~.channels.apprise.AppriseUrls`, or
    a registered channel's)."""

    name: str
    events: tuple[str, ...]
    interrupts: tuple[str, ...] | None
    tenants: tuple[str, ...] | None
    retry: Retry
    destination: Destination

    @property
    def webhook(self) -> Webhook | None:
        """Deprecated: ``destination``, when it is a webhook."""
        warnings.warn("Subscription.webhook is deprecated: read Subscription.destination",
                      DeprecationWarning, stacklevel=2)
        return self.destination if isinstance(self.destination, Webhook) else None

    @property
    def apprise(self) -> tuple[str, ...]:
        """Deprecated: ``destination.urls``, when it is Apprise's."""
        warnings.warn("Subscription.apprise is deprecated: read Subscription.destination",
                      DeprecationWarning, stacklevel=2)
        return self.destination.urls if isinstance(self.destination, AppriseUrls) else ()

    def matches(self, event_type: str, name: str | None, tenant: str | None) -> bool:
        """Does an event of ``event_type`` about interrupt ``name`` of ``tenant`` concern it?

        ``interrupts`` globs need a named interrupt; ``tenants`` (SPEC §15) takes the
        listed tenants' interrupts (``"*"``: every tenant's); an interrupt minted without
        a tenant goes only to subscriptions without ``tenants`` or with ``"*"``.
        """
        if not any(fnmatchcase(event_type, p) for p in self.events):
            return False
        if self.interrupts is not None:
            if name is None or not any(fnmatchcase(name, p) for p in self.interrupts):
                return False
        if self.tenants is not None and "*" not in self.tenants:
            return tenant is not None and tenant in self.tenants
        return True

    @property
    def scope(self) -> frozenset[str | None] | None:
        """The tenants it is kept to, as :mod:`symfonic_store.redaction` reads a scope
        (None: every tenant); what it is sent is redacted as for a principal of them."""
        if self.tenants is None or "*" in self.tenants:
            return None
        return frozenset(self.tenants)

    @property
    def target(self) -> str:
        """Where it delivers, secrets left out: scheme and host only."""
        return self.destination.target


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    subscriptions: tuple[Subscription, ...]
    retry: Retry

    def get(self, name: str) -> Subscription:
        """The subscription called ``name``.

        Raises:
            InvalidInputError: the config has none by that name.
        """
        for s in self.subscriptions:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.subscriptions) or "none"
        raise InvalidInputError("NAME", f"no subscription {name!r} in the config (it has: {known})")


def _retry(value: Any, where: str, base: Retry) -> Retry:
    raw = keys(value, where, {"max_tries", "max_age_seconds", "backoff_seconds"})
    max_tries = base.max_tries
    if "max_tries" in raw:
        max_tries = int(number(raw["max_tries"], f"{where}.max_tries", minimum=1, integer=True))
    max_age = base.max_age_seconds
    if "max_age_seconds" in raw:
        max_age = number(raw["max_age_seconds"], f"{where}.max_age_seconds", minimum=0)
    first, cap = base.backoff_first, base.backoff_cap
    if "backoff_seconds" in raw:
        pair = raw["backoff_seconds"]
        if not isinstance(pair, list) or len(pair) != 2:
            raise bad(f"{where}.backoff_seconds", "must be [first, cap] in seconds")
        first = number(pair[0], f"{where}.backoff_seconds[0]", minimum=0)
        cap = number(pair[1], f"{where}.backoff_seconds[1]", minimum=0)
        if cap < first:
            raise bad(f"{where}.backoff_seconds", "the cap must not be below the first delay")
    return Retry(max_tries=max_tries, max_age_seconds=max_age, backoff_first=first, backoff_cap=cap)


def _globs(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p for p in value):
        raise bad(where, "must be a non-empty list of glob patterns (strings)")
    return tuple(value)


def _subscription(value: Any, where: str, retry: Retry, base: Path) -> Subscription:
    raw = keys(value, where, set(SUBSCRIPTION_KEYS) | {c.key for c in channels()})
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise bad(f"{where}.name", "must be 1 to 128 letters, digits, '_', '.', '-' (starting with a letter or digit)")
    events = _globs(raw.get("events", ["*"]), f"{where}.events")
    interrupts = _globs(raw["interrupts"], f"{where}.interrupts") if "interrupts" in raw else None
    tenants = None
    if "tenants" in raw:
        t = raw["tenants"]
        if not isinstance(t, list) or not all(isinstance(x, str) and x for x in t):
            raise bad(f"{where}.tenants", "must be a list of tenant names (strings)")
        tenants = tuple(t)
    own_retry = _retry(raw["retry"], f"{where}.retry", retry) if "retry" in raw else retry
    named = [c for c in channels() if c.key in raw]
    if len(named) != 1:
        known = [c.key for c in channels()]
        raise bad(where, f"needs exactly one of {', '.join(known[:-1])} or {known[-1]}")
    (channel,) = named
    destination = channel.parse(raw[channel.key], f"{where}.{channel.key}", base)
    return Subscription(name, events, interrupts, tenants, own_retry, destination)


def parse_config(value: Any, *, base: Path | None = None) -> NotifyConfig:
    """A config from its JSON value; relative ``secret_file`` paths are read from ``base``.

    Raises:
        InvalidInputError: a key is missing, unknown or wrong; the message names it.
    """
    raw = keys(value, "", {"retry", "subscriptions"})
    retry = _retry(raw["retry"], "retry", Retry()) if "retry" in raw else Retry()
    subs = raw.get("subscriptions")
    if not isinstance(subs, list) or not subs:
        raise bad("subscriptions", "must be a non-empty list")
    where = base or Path.cwd()
    parsed = tuple(_subscription(s, f"subscriptions[{i}]", retry, where) for i, s in enumerate(subs))
    seen: set[str] = set()
    for i, s in enumerate(parsed):
        if s.name in seen:
            raise bad(f"subscriptions[{i}].name", f"{s.name!r} is used twice")
        seen.add(s.name)
    return NotifyConfig(parsed, retry)


def load_config(path: str | Path) -> NotifyConfig:
    """The config in the JSON file at ``path`` (``secret_file`` paths relative to its folder).

    Raises:
        InvalidInputError: the file is missing, not JSON, or a field is wrong.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError("--config", f"cannot read {file} ({exc.strerror or exc})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError("--config", f"{file} is not JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_config(value, base=file.resolve().parent)
