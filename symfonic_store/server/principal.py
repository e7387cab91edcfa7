"""The authenticated principal: the only identity an answer over HTTP is recorded with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    """Who the request is, as its credentials prove: a name and the roles it holds."""

    name: str
    roles: frozenset[str] = frozenset()
