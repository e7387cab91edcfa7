"""What the store records of a graph LangGraph's Agent Server runs (SPEC §13), beyond the actor.

Pure functions over what a checkpointer call is handed, with no import of the server:

- :func:`served_ids`: the run's ``graph_id`` and ``assistant_id``, which the server puts in
  every run's configurable; a mint records them, and an answer sent through the server
  (``serve --langgraph-url``) resumes the thread with that assistant.
- :func:`update_decision`: Agent Inbox's thread-level ignore. Its "Mark as resolved"
  sends ``threads.update_state(thread_id, values=None, as_node=END)``; LangGraph then
  writes a checkpoint (``source: "update"``) that clears the thread's tasks and writes no
  value of its own. The interrupts it closes are superseded with ``decision: "ignore"``,
  and the server's user of that request (:func:`request_user`) as the actor: the update's
  config names no user, but the server's per-request auth context does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import compat
from .actor import AGENT_SERVER, STUDIO_USER

GRAPH_ID_KEY = "graph_id"
"""Where the Agent Server names the run's graph in its configurable."""

ASSISTANT_ID_KEY = "assistant_id"
"""Where the Agent Server names the run's assistant in its configurable."""

IGNORE = "ignore"


def served_ids(configurable: Mapping[str, Any]) -> dict[str, str]:
    """``{"graph_id", "assistant_id"}`` of a run the Agent Server started (empty otherwise:
    both keys must be there, as the server sets them)."""
    graph_id, assistant_id = configurable.get(GRAPH_ID_KEY), configurable.get(ASSISTANT_ID_KEY)
    if isinstance(graph_id, str) and graph_id and isinstance(assistant_id, str) and assistant_id:
        return {GRAPH_ID_KEY: graph_id, ASSISTANT_ID_KEY: assistant_id}
    return {}


def update_decision(metadata: Any, checkpoint: Any, new_versions: Any) -> str | None:
    """``"ignore"`` when a new checkpoint is a state update that wrote no value: every
    channel it changed is empty afterwards (LangGraph's ``update_state(None, as_node=END)``
    consumes the tasks' triggers and writes nothing; an update with values leaves them in
    the checkpoint). Else None.

    Known limits: an ``as_node=END`` update that applies a finished sibling task's output
    (parallel branches) writes that output, and is a plain ``superseded``; an update as the
    interrupted node with ``None`` writes nothing either, and counts as an ignore.
    """
    if not isinstance(metadata, Mapping) or metadata.get("source") != "update":
        return None
    values = (checkpoint or {}).get("channel_values") if isinstance(checkpoint, Mapping) else None
    if not isinstance(values, Mapping):
        return None
    changed = list(new_versions or ())
    if any(channel in values for channel in changed):
        return None
    return IGNORE


def request_user() -> str | None:
    """The user the Agent Server authenticated for the request being served (a state
    update's too, whose config names none), or None: no server, no auth configured (an
    empty identity), or LangGraph Studio's built-in user -- never authenticated (SPEC §13)."""
    user = compat.agent_server_request_user()
    if user is None or getattr(user, "is_authenticated", False) is not True:
        return None
    identity = getattr(user, "identity", None)
    if not isinstance(identity, str) or not identity.strip() or identity == STUDIO_USER:
        return None
    return identity


def update_closing(metadata: Any, checkpoint: Any, new_versions: Any) -> dict[str, Any]:
    """What a new checkpoint records on the interrupts it closes, as keywords of
    ``record_checkpoint_moved``: for the thread-level ignore, ``decision`` and who decided
    (``decided_by``, ``authenticated_by``: the server's user of the request, when there is
    one); else nothing."""
    decision = update_decision(metadata, checkpoint, new_versions)
    if decision is None:
        return {}
    user = request_user()
    return {
        "decision": decision,
        "decided_by": user,
        "authenticated_by": None if user is None else AGENT_SERVER,
    }


__all__ = [
    "ASSISTANT_ID_KEY",
    "GRAPH_ID_KEY",
    "IGNORE",
    "request_user",
    "served_ids",
    "update_closing",
    "update_decision",
]
