"""What a LangGraph ``StateSnapshot`` says a thread waits on (pure: no store, no graph call).

The gateway records these after every call, and the store's checkpointer and the wakers
read them: LangGraph's own ``Interrupt`` objects, the seed node's marker among them, and
static breakpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import native

ALL = "*"
"""LangGraph's ``interrupt_before="*"`` / ``interrupt_after="*"``: every node."""


def _nodes(value: Any) -> frozenset[str] | str:
    if value == ALL:
        return ALL
    return frozenset(str(n) for n in value or ())


def _hits(declared: frozenset[str] | str, nodes: Iterable[str]) -> bool:
    names = set(nodes)
    return bool(names) and (declared == ALL or bool(names & set(declared)))


@dataclass(frozen=True, slots=True)
class Stops:
    """The static breakpoints a run declares: node names (or ``"*"``) to stop before and
    after, LangGraph's ``interrupt_before`` / ``interrupt_after``."""

    before: frozenset[str] | str = frozenset()
    after: frozenset[str] | str = frozenset()

    @classmethod
    def of(cls, graph: Any, call: Mapping[str, Any] | None = None) -> Stops:
        """What a call of ``graph`` with keyword arguments ``call`` stops at: the call's
        ``interrupt_before`` / ``interrupt_after`` when given, else the compiled graph's
        (``interrupt_before_nodes`` / ``interrupt_after_nodes``), as LangGraph decides."""
        call = call or {}
        return cls(
            _nodes(call.get("interrupt_before") or getattr(graph, "interrupt_before_nodes", None)),
            _nodes(call.get("interrupt_after") or getattr(graph, "interrupt_after_nodes", None)),
        )

    def declares(self, next_nodes: Iterable[str], written_by: Iterable[str] = ()) -> bool:
        """Is a pause before ``next_nodes``, at a checkpoint the nodes ``written_by``
        wrote, one of these breakpoints?"""
        return _hits(self.before, next_nodes) or _hits(self.after, written_by)


def waiting_on(
    snapshot: Any, stops: Stops | None = None, written_by: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """What a ``StateSnapshot`` says the thread waits on: interrupts, else a breakpoint.

    Each item: ``interrupt_id``, ``value``, ``task_id``, ``checkpoint_id``,
    ``checkpoint_ns``, ``breakpoint`` and, for a breakpoint, ``declared``. A static
    breakpoint (``interrupt_before`` / ``interrupt_after``) is a thread with next nodes,
    no interrupts and no failed task: its id is ``"bp-" + checkpoint id`` and its value
    ``{"next": [node names]}``. The same snapshot is also a run in flight (or an
    ``update_state``) between two nodes: ``declared`` says whether ``stops`` has a
    breakpoint there -- a next node it stops before, or a node of ``written_by`` (the
    nodes whose step wrote the checkpoint) it stops after; without ``stops``, every such
    pause is taken for declared. The store mints only a declared one (SPEC §8).
    """
    configurable = (getattr(snapshot, "config", None) or {}).get("configurable") or {}
    checkpoint_id = configurable.get("checkpoint_id")
    checkpoint_ns = configurable.get("checkpoint_ns", "")
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for task in getattr(snapshot, "tasks", ()) or ():
        for iv in getattr(task, "interrupts", ()) or ():
            if iv.id in seen:
                continue
            seen.add(iv.id)
            items.append(
                {
                    "interrupt_id": iv.id,
                    "value": iv.value,
                    "task_id": task.id,
                    "checkpoint_id": checkpoint_id,
                    "checkpoint_ns": checkpoint_ns,
                    "breakpoint": False,
                }
            )
    for iv in getattr(snapshot, "interrupts", ()) or ():
        if iv.id not in seen:
            seen.add(iv.id)
            items.append(
                {
                    "interrupt_id": iv.id,
                    "value": iv.value,
                    "task_id": None,
                    "checkpoint_id": checkpoint_id,
                    "checkpoint_ns": checkpoint_ns,
                    "breakpoint": False,
                }
            )
    tasks = getattr(snapshot, "tasks", ()) or ()
    if (
        not items
        and checkpoint_id
        and getattr(snapshot, "next", ())
        and not any(getattr(t, "error", None) for t in tasks)
    ):
        items.append(
            {
                "interrupt_id": native.BREAKPOINT_PREFIX + str(checkpoint_id),
                "value": {"next": list(snapshot.next)},
                "task_id": None,
                "checkpoint_id": checkpoint_id,
                "checkpoint_ns": checkpoint_ns,
                "breakpoint": True,
                "declared": stops is None or stops.declares(snapshot.next, written_by),
            }
        )
    return items


def marker_interrupt(waiting: list[dict[str, Any]], interrupt_id: str) -> dict[str, Any] | None:
    """The waiting interrupt the seed node raised for the marker ``interrupt_id`` (N1)."""
    for w in waiting:
        value = w["value"]
        if native.is_marker_value(value) and value["interrupt_id"] == interrupt_id:
            return w
    return None
