"""The store's checkpointer for LangGraph's Agent Server, named in ``langgraph.json``.

.. code-block:: json

    {"graphs": {"agent": "./agent.py:graph"},
     "checkpointer": {"path": "symfonic_store.agent_server.checkpointer"}}

The server (``langgraph dev``, ``langgraph up``, LangSmith Deployment) loads
:func:`checkpointer` by that dotted path (langgraph-api 0.16 loads ``package.module.attr``
and ``./file.py:attr``, not ``package.module:attr``) and enters it once per event loop it
runs graphs on. It opens an :class:`~symfonic_store.AsyncInterruptStore` on
``$SYMFONIC_STORE_URL`` with the TTL ``$SYMFONIC_STORE_TTL`` (seconds; unset: none),
migrates it (idempotent; in a thread, so the server's event loop makes no blocking call),
and yields ``store.checkpointer()``: every interrupt of every graph the server runs, and
every answer LangGraph takes, is recorded, with the server's authenticated user as the
actor (:mod:`symfonic_store.langgraph.actor`). The store closes when the server stops.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from . import validation
from .errors import InvalidInputError

URL_ENV = "SYMFONIC_STORE_URL"
TTL_ENV = "SYMFONIC_STORE_TTL"


@dataclass(frozen=True)
class Settings:
    """What the factory reads from the environment."""

    url: str
    ttl_seconds: float | None


def settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The store URL and TTL from ``environ`` (default: the process's environment).

    Raises:
        InvalidInputError: ``SYMFONIC_STORE_URL`` is unset or empty, or
            ``SYMFONIC_STORE_TTL`` is not a finite number of seconds >= 0.
    """
    env = os.environ if environ is None else environ
    url = env.get(URL_ENV, "").strip()
    if not url:
        raise InvalidInputError(
            URL_ENV,
            "must name the store's database for the Agent Server, e.g. "
            "sqlite:///approvals.db or postgresql+psycopg://user@host/db",
        )
    text = env.get(TTL_ENV, "").strip()
    ttl: float | None = None
    if text:
        try:
            ttl = float(text)
        except ValueError:
            ttl = math.nan
        if not math.isfinite(ttl) or ttl < 0:
            raise InvalidInputError(
                TTL_ENV, f"must be a finite number of seconds >= 0, got {validation.shown(text)}"
            )
    return Settings(url, ttl)


def _migrate(url: str) -> None:
    """``setup()`` through the sync store: Alembic reads its scripts; run it in a thread."""
    from .store import InterruptStore

    store = InterruptStore(url)
    try:
        store.setup()
    finally:
        store.close()


@asynccontextmanager
async def checkpointer() -> AsyncIterator[Any]:
    """The store's async checkpointer on ``$SYMFONIC_STORE_URL``, migrated, for the server.

    Raises:
        InvalidInputError: the environment names no URL, or a bad TTL (see :func:`settings`).
        SymfonicStoreError: the database refused the migration (unreachable, misconfigured).
    """
    from .store import AsyncInterruptStore

    found = settings()
    await asyncio.to_thread(_migrate, found.url)
    store = AsyncInterruptStore(found.url, ttl_seconds=found.ttl_seconds)
    try:
        saver = store.checkpointer()
        await saver.setup()
        yield saver
    finally:
        await store.aclose()


__all__ = ["TTL_ENV", "URL_ENV", "Settings", "checkpointer", "settings"]
