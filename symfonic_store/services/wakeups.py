"""Owed wake-ups as an operator sees them: what is owed to which graph, and giving up.

A wake-up is owed to the graph whose name the interrupt's mint recorded; nothing but
``sweep`` with that graph's callback delivers it. When that graph is gone for good, an
operator drops its wake-ups (``symfonic-store wakeups --drop``): the rows stay, with who
dropped them and when, and are no longer owed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from ..db import wakeups as rows
from ..errors import InvalidInputError
from ..store.append import utc_now
from ..sweep_report import graph_label, graph_order


def owed(conn: Connection) -> list[dict[str, Any]]:
    """Every wake-up still owed, by graph (unnamed last)."""
    return rows.owed_wakeups(conn)


def drop(conn: Connection, *, graph: str | None, actor: str) -> list[dict[str, Any]]:
    """Drop every wake-up owed to ``graph``, as ``actor``, now; refuse when none is owed."""
    dropped = rows.drop_wakeups(conn, graph=graph, actor=actor, at=utc_now())
    if not dropped:
        owed_to = rows.owed_by_graph(conn, thread_ids=None)
        known = ", ".join(
            f"{graph_label(g)} ({n})" for g, n in sorted(owed_to.items(), key=graph_order)
        )
        raise InvalidInputError(
            "graph",
            f"no wake-up is owed to {graph_label(graph)}; "
            + (f"owed: {known}" if known else "no wake-up is owed at all"),
        )
    return dropped


def let_go_of(conn: Connection, *, thread_id: str, interrupt_id: str) -> None:
    """A claimed wake-up the sweep's graph does not hold goes back untouched."""
    rows.release_wakeup(conn, thread_id, interrupt_id)
