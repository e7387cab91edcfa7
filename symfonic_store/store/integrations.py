"""What both stores offer beyond their operations: the LangGraph checkpointers.

A module of its own, which the LangGraph package never imports: the stores reach the
integration (lazily, when a checkpointer is asked for), the integration reaches the
store only through its runner port (:mod:`.runner`).
"""

from __future__ import annotations

from typing import Any


class Integrations:
    """What both stores offer that is not a database operation: LangGraph integrations."""

    def recording_checkpointer(self, saver: Any) -> Any:
        """A checkpointer that delegates to ``saver`` and records what bypasses the gateway.

        Every interrupt a graph compiled with it raises, and every answer LangGraph
        consumes, is recorded whoever invoked the graph: the actor is the Agent Server's
        authenticated user when the graph is served (:mod:`symfonic_store.langgraph.actor`),
        else ``config["configurable"]["actor"]`` when given, and such answers carry
        ``via: "direct"`` (see :mod:`symfonic_store.langgraph.recording`). With an
        asyncio store, run the graph with ``ainvoke``/``astream``.
        """
        from ..langgraph.recording import RecordingCheckpointer

        return RecordingCheckpointer(saver, self)  # type: ignore[arg-type]

    def checkpointer(self) -> Any:
        """A LangGraph checkpointer that keeps the graph's checkpoints in this store's database.

        Each step's checkpoint and the events the step caused (route decisions, mints,
        the confirmation of an admitted answer) commit in one transaction: no commit of
        the store's own per step, and no instant at which the audit and the graph's
        state disagree. The checkpoints sit in the tables of LangGraph's own SQLite or
        PostgreSQL saver, written by their SQL and serialised by their JSON-plus
        serialiser (never pickle). Answers are still admitted before the graph runs
        (``resume``, the gateway's claim). It also offers ``copy_thread``,
        ``delete_for_runs`` and ``prune``; none of them deletes an event. On the
        asyncio store it is the async twin (``ainvoke``/``astream``); see
        :mod:`symfonic_store.langgraph.checkpointer`.
        """
        from ..langgraph.checkpointer import checkpointer_for

        return checkpointer_for(self)  # type: ignore[arg-type]
