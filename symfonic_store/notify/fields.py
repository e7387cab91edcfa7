"""Reading the notifier's config file, value by value: each reader checks one JSON value
and raises :class:`~symfonic_store.errors.InvalidInputError` naming its field
(``subscriptions[1].webhook.url``). Shared by :mod:`.config` and the channels
(:mod:`.channels`), which read their own part of a subscription with them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidInputError


def bad(where: str, problem: str) -> InvalidInputError:
    """The error of the config's field ``where``."""
    return InvalidInputError(f"notify config {where}", problem)


def keys(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    """``value`` as a JSON object holding no key but the ``allowed`` ones."""
    if not isinstance(value, dict):
        raise bad(where, "must be a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise bad(f"{where}.{unknown[0]}" if where else unknown[0],
                  f"unknown key (known: {', '.join(sorted(allowed))})")
    return value


def number(value: Any, where: str, *, minimum: float, integer: bool = False) -> float:
    """``value`` as a number (an integer when ``integer``) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise bad(where, f"must be {'an integer' if integer else 'a number'}")
    if value < minimum:
        raise bad(where, f"must be at least {minimum:g}")
    return float(value)


def url(value: Any, where: str, schemes: tuple[str, ...] | None = None) -> str:
    """``value`` as a URL, of one of ``schemes`` when given."""
    if not isinstance(value, str) or "://" not in value:
        raise bad(where, "must be a URL (scheme://...)")
    scheme = value.split("://", 1)[0].lower()
    if schemes is not None and scheme not in schemes:
        raise bad(where, f"must be an {' or '.join(schemes)} URL, not {scheme}://")
    return value


def safe_target(url: str) -> str:
    """``scheme://host`` of a URL: what may be printed of a URL that carries secrets."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return "(unreadable URL)"
    scheme = parts.scheme or "?"
    return f"{scheme}://{host}" if host else f"{scheme}://"
