"""The authenticated principal: the only identity an answer over HTTP is recorded with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

AUTHENTICATED_BY: Final = {
    "tokens": "service:tokens",
    "jwt": "service:jwt",
    "header": "service:trusted-header",
}
"""What an answer records as ``authenticated_by`` (SPEC §12), per authentication mode."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who the request is, as its credentials prove: a name and the roles it holds."""

    name: str
    roles: frozenset[str] = frozenset()
    authenticated_by: str | None = None
    """How the service established ``name`` (``service:jwt``...), recorded with answers."""
