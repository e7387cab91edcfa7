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
    tenants: frozenset[str] = frozenset()
    """The tenants whose interrupts it may see (SPEC §15); ``"*"`` among them: every one."""

    @property
    def scope(self) -> frozenset[str | None] | None:
        """The tenants its reads are kept to (``None`` in the set: the interrupts minted
        without a tenant), or None: every interrupt. Without tenants it sees only the
        interrupts minted without one."""
        if ALL_TENANTS in self.tenants:
            return None
        if not self.tenants:
            return frozenset({None})
        return frozenset(self.tenants)

    def sees(self, tenant: str | None) -> bool:
        """May it see an interrupt minted for ``tenant``?"""
        scope = self.scope
        return scope is None or tenant in scope


ALL_TENANTS: Final = "*"
"""A principal's tenant that stands for every tenant (and for the log's events that belong
to no interrupt)."""

