"""Who the actor of a LangGraph call is: the one decision, for every place that records one.

Without an Agent Server, the caller names the actor: ``config["configurable"]["actor"]``
(null when absent), a claim the store records as given. A graph served by LangGraph's
Agent Server runs with the user its ``auth`` handler authenticated in
``configurable["langgraph_auth_user_id"]`` (the server sets that key itself and refuses it
from a client): that user is the actor, ``authenticated_by: "agent-server"``, and a
different ``configurable.actor`` the client sent is kept as ``claimed_actor`` only
(SPEC §13). Never authenticated, so the claim stands as without a server: an empty
identity (no auth configured) and LangGraph Studio's built-in user, which ``langgraph dev``
admits without credentials on an ``x-auth-scheme: langsmith`` header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

AGENT_SERVER = "agent-server"
"""``authenticated_by`` of an actor the Agent Server authenticated."""

SERVER_USER_KEY = "langgraph_auth_user_id"
"""Where the Agent Server puts its authenticated user's identity in a run's configurable."""

STUDIO_USER = "langgraph-studio-user"
"""LangGraph Studio's built-in user: admitted by ``langgraph dev`` without credentials."""


@dataclass(frozen=True)
class Actor:
    """The actor of a call and how it was established."""

    name: str | None
    authenticated_by: str | None = None
    claimed: str | None = None
    """What the client claimed in ``configurable.actor`` when it differs from ``name``."""

    def data(self) -> dict[str, str]:
        """What an event's data records beside its actor (nothing when nobody authenticated)."""
        out: dict[str, str] = {}
        if self.authenticated_by is not None:
            out["authenticated_by"] = self.authenticated_by
        if self.claimed is not None:
            out["claimed_actor"] = self.claimed
        return out


def actor_of(config: Any) -> Actor:
    """The actor of a call with ``config`` (a LangGraph ``RunnableConfig`` or None)."""
    configurable = (config or {}).get("configurable") or {}
    claim = configurable.get("actor")
    claimed = None if claim is None else str(claim)
    user = configurable.get(SERVER_USER_KEY)
    if isinstance(user, str) and user.strip() and user != STUDIO_USER:
        return Actor(user, AGENT_SERVER, None if claimed in (None, user) else claimed)
    return Actor(claimed)


TENANT_KEY = "tenant"
"""Where a run's configurable names the tenant of the interrupts it mints (SPEC §15)."""

SERVER_USER_OBJECT_KEY = "langgraph_auth_user"
"""Where the Agent Server puts its authenticated user (an object or a dict) in a run's
configurable: its ``tenant``, when it has one, is the mints' tenant by default."""


def tenant_of(config: Any, default: str | None = None) -> str | None:
    """The tenant of the interrupts a call with ``config`` mints (SPEC §15):
    ``configurable["tenant"]`` (which wins), else ``default`` (the gateway's or the marker
    node's ``tenant=``), else the ``tenant`` of the Agent Server's authenticated user."""
    configurable = (config or {}).get("configurable") or {}
    for value in (configurable.get(TENANT_KEY), default, _server_user_tenant(configurable)):
        if isinstance(value, str) and value:
            return value
    return None


def _server_user_tenant(configurable: Any) -> Any:
    user = configurable.get(SERVER_USER_OBJECT_KEY)
    if user is None or actor_of({"configurable": configurable}).authenticated_by != AGENT_SERVER:
        return None
    if isinstance(user, dict):
        return user.get(TENANT_KEY)
    try:
        return user[TENANT_KEY]  # langgraph-sdk's BaseUser reads fields by key too
    except (KeyError, TypeError, AttributeError):
        return getattr(user, TENANT_KEY, None)


__all__ = [
    "AGENT_SERVER", "SERVER_USER_KEY", "STUDIO_USER", "TENANT_KEY", "Actor", "actor_of",
    "tenant_of",
]
