"""The store: the plans of its operations, the one runner that drives them, the rules.

Layers, bottom up: :mod:`.append` (one thread's events and projection in a write
transaction), :mod:`.lifecycle`, :mod:`.admission` and :mod:`.settlement` (the rules of
an interrupt's life, written on the append path), :mod:`.plan` (what a plan is: its
steps ``Op``, ``Call`` and ``Emit``), the per-concept plans composed into
:class:`~symfonic_store.store.ops.Operations`, :mod:`.execute` (one ``Op`` in one
transaction: where a transaction begins), :mod:`.runner` (the sync and async drivers of a
plan, and the integration port ``store.runner``), and the two stores :mod:`.sync` and
:mod:`.aio`.

The two stores load on first use, so importing a layer below them (``store.append``
from the services) does not load the runners and the services they call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .aio import AsyncInterruptStore
    from .sync import InterruptStore

_LAZY = {"AsyncInterruptStore": "aio", "InterruptStore": "sync"}


def __getattr__(name: str) -> Any:
    # Deliberately the lazy face of symfonic_store/__init__.py, for this package's two names.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["AsyncInterruptStore", "InterruptStore"]
