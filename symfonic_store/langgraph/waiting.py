"""What a LangGraph ``StateSnapshot`` says a thread waits on (pure: no store, no graph call).

The gateway records these after every call, and the store's checkpointer and the wakers
read them: LangGraph's own ``Interrupt`` objects, the seed node's marker among them, and
static breakpoints.
"""

from __future__ import annotations

from typing import Any

from .. import native


def waiting_on(snapshot: Any) -> list[dict[str, Any]]:
    """What a ``StateSnapshot`` says the thread waits on: interrupts, else a breakpoint.

    Each item: ``interrupt_id``, ``value``, ``task_id``, ``checkpoint_id``,
    ``checkpoint_ns`` and ``breakpoint``. A static breakpoint (``interrupt_before`` /
    ``interrupt_after``) is a thread with next nodes, no interrupts and no failed task:
    its id is ``"bp-" + checkpoint id`` and its value ``{"next": [node names]}``.
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
