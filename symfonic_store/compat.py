"""Every private name of LangGraph and SQLAlchemy that the store relies on, in one place.

The store uses a few names that its dependencies do not promise to keep (LangGraph's
``langgraph._internal`` constants and runnable, SQLAlchemy's event dispatch). Each is
imported or reached here and nowhere else, so an upgrade that moves one breaks this
module -- and its canary test, ``tests/core/test_compat.py`` -- instead of a call deep in
the store.
"""

from __future__ import annotations

# --- LangGraph -----------------------------------------------------------------------


# --- SQLAlchemy ----------------------------------------------------------------------
