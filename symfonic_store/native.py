"""What LangGraph's own interrupts look like to the store: names, decisions, expiry answers.

Pure functions over JSON values, with no LangGraph import: the store, the audit and
the gateway share them. The shapes are the common schemas LangGraph and LangChain users
pause with (SPEC §8):

- ``HITLRequest`` of ``HumanInTheLoopMiddleware`` (``interrupt_mode="batched"``):
  ``{"action_requests": [{"name", "args", ...}], "review_configs": [...]}``, answered
  ``{"decisions": [{"type": "approve" | "edit" | "reject" | "respond", ...}, ...]}``;
- ``ToolApprovalRequest`` (``interrupt_mode="per_call"``):
  ``{"type": "tool_approval", "name", "args", "tool_call_id", ...}``, answered with
  one decision;
- Agent Inbox ``HumanInterrupt``: ``{"action_request": {"action", "args"}, "config",
  "description"}`` (or a list of them), answered ``[{"type": "accept" | "edit" |
  "response" | "ignore", "args": ...}]``;
- a static breakpoint, ``{"next": [node names]}``, answered ``{"approved": true}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BREAKPOINT_PREFIX = "bp-"
"""``interrupt_id`` of a static breakpoint: ``"bp-" + the checkpoint id``."""

MARKER_SOURCE = "marker"
NATIVE_SOURCE = "langgraph"


def is_breakpoint(interrupt_id: str) -> bool:
    return interrupt_id.startswith(BREAKPOINT_PREFIX)


def _is_hitl_request(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("action_requests"), list)


def _is_tool_approval(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "tool_approval"


def _human_interrupts(value: Any) -> list[Mapping[str, Any]] | None:
    """The Agent Inbox ``HumanInterrupt`` dicts of ``value`` (one, or a list), else None."""
    items = value if isinstance(value, list) else [value]
    if items and all(
        isinstance(i, Mapping) and isinstance(i.get("action_request"), Mapping) for i in items
    ):
        return items
    return None


def interrupt_name(value: Any) -> str | None:
    """The name an interrupt's value gives itself (SPEC §8), or None.

    The action names of a ``HITLRequest`` (joined with ``,``), the ``name`` of a per-call
    ``ToolApprovalRequest``, ``action_request.action`` of a ``HumanInterrupt``, a
    ``name`` key, else None.
    """
    if _is_hitl_request(value):
        names = [
            str(a.get("name")) for a in value["action_requests"] if isinstance(a, Mapping)
        ]
        return ",".join(names) or None
    if _is_tool_approval(value):
        name = value.get("name")
        return None if name is None else str(name)
    human = _human_interrupts(value)
    if human is not None:
        action = human[0]["action_request"].get("action")
        return None if action is None else str(action)
    if isinstance(value, Mapping) and isinstance(value.get("name"), str):
        return str(value["name"])
    return None


def action_requests(value: Any) -> list[Any] | None:
    """The action requests of a batched ``HITLRequest`` (one audit record each), else None."""
    if _is_hitl_request(value):
        return list(value["action_requests"])
    return None


def decisions(payload: Any, response: Any, *, breakpoint: bool = False) -> list[str | None]:
    """The decision type of an answer: one per action request of a ``HITLRequest``.

    ``approve``/``edit``/``reject``/``respond`` for HITL middleware, ``accept``/``edit``/
    ``response``/``ignore`` for an Agent Inbox ``HumanResponse``, ``approve``/
    ``reject`` for a breakpoint (earlier releases recorded ``approved``/``rejected``),
    else None.
    """
    if breakpoint:
        approved = isinstance(response, Mapping) and response.get("approved") is True
        return ["approve" if approved else "reject"]
    requests = action_requests(payload)
    if requests is not None:
        answers = response.get("decisions") if isinstance(response, Mapping) else None
        out: list[str | None] = []
        for i in range(len(requests)):
            decision = answers[i] if isinstance(answers, list) and i < len(answers) else None
            out.append(_decision_type(decision))
        return out
    if _is_tool_approval(payload):
        return [_decision_type(response)]
    if _human_interrupts(payload) is not None:
        first = response[0] if isinstance(response, list) and response else response
        return [_decision_type(first)]
    return [None]


def _decision_type(decision: Any) -> str | None:
    if isinstance(decision, Mapping) and isinstance(decision.get("type"), str):
        return str(decision["type"])
    return None


def expiry_answer(payload: Any, reason: str) -> Any:
    """The answer that wakes a graph whose native interrupt expired (SPEC §8).

    A ``reject`` decision saying it expired for HITL middleware (one per action request
    of a ``HITLRequest``; a single one for a per-call ``ToolApprovalRequest``), an
    ``ignore`` response for Agent Inbox (a list when the value is a list), and
    ``{"expired": true, "reason": reason}`` otherwise.
    """
    message = f"expired: {reason}"
    requests = action_requests(payload)
    if requests is not None:
        return {"decisions": [{"type": "reject", "message": message} for _ in requests]}
    if _is_tool_approval(payload):
        return {"type": "reject", "message": message}
    if _human_interrupts(payload) is not None:
        ignore = {"type": "ignore", "args": None}
        return [ignore for _ in payload] if isinstance(payload, list) else ignore
    return {"expired": True, "reason": reason}


def is_marker_value(value: Any) -> bool:
    """Is this the seed node's own ``interrupt()`` value (rule N1)?"""
    return (
        isinstance(value, Mapping)
        and value.get("type") == "interrupt"
        and isinstance(value.get("interrupt_id"), str)
        and "name" in value
        and "payload" in value
    )


def decision_answer(
    payload: Any, approve: bool, *, breakpoint: bool = False, message: str | None = None
) -> Any:
    """The answer an approve or reject button sends, in the schema the interrupt asked in.

    A breakpoint and a seed marker (or any value of no known schema) get
    ``{"approved": bool}``; a ``HITLRequest`` one decision per action request
    (``approve``, or ``reject`` with ``message``); a per-call ``ToolApprovalRequest``
    one decision; an Agent Inbox ``HumanInterrupt`` ``accept`` or ``ignore`` (a list
    when the value is a list).
    """
    if breakpoint:
        return {"approved": approve}
    decision: dict[str, Any] = (
        {"type": "approve"} if approve else {"type": "reject", "message": message or "rejected"}
    )
    requests = action_requests(payload)
    if requests is not None:
        return {"decisions": [dict(decision) for _ in requests]}
    if _is_tool_approval(payload):
        return decision
    if _human_interrupts(payload) is not None:
        response = {"type": "accept" if approve else "ignore", "args": None}
        return [dict(response) for _ in payload] if isinstance(payload, list) else response
    return {"approved": approve}
