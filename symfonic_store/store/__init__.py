"""The store: the table of operations, the two runners that drive it, the rules.

``ops`` holds every public operation once; ``sync`` and ``aio`` drive them;
``execute`` runs one database step; ``lifecycle`` holds the rules of an interrupt's
life (mint, route, resume, expire), written on :mod:`symfonic_store.append`.
"""

from .aio import AsyncInterruptStore
from .sync import InterruptStore

__all__ = ["AsyncInterruptStore", "InterruptStore"]
