"""The interrupt protocol: markers, the ack sentinel, staleness predicates and routing.

Pure functions only, no I/O. This is the contract between a tool (which raises an
interrupt by returning a ``_interrupt_pending`` marker), the router (which decides
whether the marker is still current) and the interrupt node (which pauses the graph and
turns the person's answer back into state).

The generic-interrupt predicate and the ask_user (elicitation) predicate are written
out twice on purpose: the two pause paths share no code, so a regression in one
cannot change how the other routes.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .errors import InvalidInputError

INTERRUPT_ACK_SENTINEL = "__symfonic_interrupt_ack__"
"""Key carried by ``Command(resume=...)`` when the response would otherwise be misread.

LangGraph reads ``Command(resume={})`` as an empty map of interrupt ids (nothing to
resume with) and re-fires the interrupt forever; it also reads any dict whose keys all
look like 32-hex interrupt ids as such a map. Adding this key avoids both readings, and
the interrupt node strips it so it never reaches the model.
"""

PENDING_KEY = "_interrupt_pending"
ASK_USER_PENDING_KEY = "_ask_user_pending"
RESPONSE_KEY = "_interrupt_response"

Route = Literal["interrupt", "elicitation", "continue", "finish"]
ROUTES: tuple[Route, ...] = ("interrupt", "elicitation", "continue", "finish")

MARKER_KEYS = ("name", "interrupt_id", "payload", "tool_call_id", "run_id", "minted_at")

_INTERRUPT_MAP_KEY = re.compile(r"[0-9a-f]{32}")


def new_interrupt_id() -> str:
    """Return a fresh client-correlation id: ``"i-"`` followed by 12 hex digits."""
    return "i-" + uuid.uuid4().hex[:12]


def build_interrupt_marker(
    *,
    name: str,
    interrupt_id: str,
    payload: dict[str, Any],
    tool_call_id: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Build the state update a tool or node returns to raise an interrupt.

    ``minted_at`` is stamped from the wall clock unconditionally, so a TTL can bound an
    abandoned interrupt even when no ``run_id`` is in scope (the usual case inside a
    tool body). Pass ``run_id`` when the caller has one.
    """
    return {
        PENDING_KEY: {
            "name": name,
            "interrupt_id": interrupt_id,
            "payload": payload,
            "tool_call_id": tool_call_id,
            "run_id": run_id,
            "minted_at": time.time(),
        }
    }


def interrupt_pending_is_current(
    state: Mapping[str, Any], ttl_seconds: float | None = None
) -> bool:
    """Is ``state["_interrupt_pending"]`` from this run and young enough to honour?

    Nothing clears the marker but the interrupt node, which only the router reaches;
    an abandoned marker would otherwise re-route every later turn of the thread.

    Rules, in order: a falsy marker is not current (P1); a truthy non-dict is current
    (P2); a marker ``run_id`` that is set and differs from ``state["run_id"]`` is stale
    (P3); with a TTL, a numeric ``minted_at`` older than ``ttl_seconds`` -- strictly --
    is stale (P4); anything else is current (P5).
    """
    # Deliberately written out again in ask_user_pending_is_current (see its docstring).
    if not isinstance(state, Mapping):
        raise InvalidInputError("state", f"must be a mapping, got {type(state).__name__}")
    if ttl_seconds is not None and not isinstance(ttl_seconds, int | float):
        raise InvalidInputError("ttl_seconds", f"must be a number or None, got {type(ttl_seconds).__name__}")
    pending = state.get(PENDING_KEY)
    if not pending:
        return False
    if not isinstance(pending, dict):
        return True
    return marker_staleness(pending, state.get("run_id"), ttl_seconds) is None


def ttl_passed(minted_at: Any, ttl_seconds: float, now: float | None = None) -> bool:
    """Rule P4 alone: is a numeric ``minted_at`` older than ``ttl_seconds`` -- strictly?

    A non-numeric ``minted_at`` never is. ``now`` defaults to the wall clock. The one
    statement of the TTL predicate: the marker rules, the native rules and the sweep
    all ask it (the elicitation predicate keeps its own copy on purpose, see below).
    """
    if not isinstance(minted_at, int | float):
        return False
    try:
        age = (time.time() if now is None else now) - minted_at
    except OverflowError:  # an int beyond any float: endlessly old, or young
        age = -math.inf if minted_at > 0 else math.inf
    return age > ttl_seconds


def marker_staleness(
    marker: Mapping[str, Any],
    run_id: str | None,
    ttl_seconds: float | None,
    now: float | None = None,
) -> Literal["run_id", "ttl"] | None:
    """Rules P3 then P4 on a dict marker: ``"run_id"`` when the marker names another run
    than ``run_id`` (the state's), ``"ttl"`` when its TTL passed, else ``None``."""
    marker_run = marker.get("run_id")
    if marker_run is not None and marker_run != run_id:
        return "run_id"
    if ttl_seconds is not None and ttl_passed(marker.get("minted_at"), ttl_seconds, now):
        return "ttl"
    return None


def ask_user_pending_is_current(
    state: Mapping[str, Any], ttl_seconds: float | None = None
) -> bool:
    """Is ``state["_ask_user_pending"]`` (the elicitation pause) still current?

    The same rules P1-P5 as :func:`interrupt_pending_is_current`, deliberately written
    out again rather than shared: the elicitation path and the generic interrupt path
    must not be able to break each other.
    """
    # Deliberately interrupt_pending_is_current's checks again (see the docstring).
    if not isinstance(state, Mapping):
        raise InvalidInputError("state", f"must be a mapping, got {type(state).__name__}")
    if ttl_seconds is not None and not isinstance(ttl_seconds, int | float):
        raise InvalidInputError("ttl_seconds", f"must be a number or None, got {type(ttl_seconds).__name__}")
    elicitation = state.get(ASK_USER_PENDING_KEY)
    if not elicitation:
        return False
    if not isinstance(elicitation, dict):
        return True
    asked_in_run = elicitation.get("run_id")
    if asked_in_run is not None and asked_in_run != state.get("run_id"):
        return False
    if ttl_seconds is not None:
        asked_at = elicitation.get("minted_at")
        if isinstance(asked_at, int | float):
            try:
                waited = time.time() - asked_at
            except OverflowError:  # an int beyond any float: endlessly old, or young
                waited = -math.inf if asked_at > 0 else math.inf
            if waited > ttl_seconds:
                return False
    return True


def stale_reason(state: Mapping[str, Any], ttl_seconds: float | None = None) -> str | None:
    """Why a dict marker in ``state`` is stale: ``"run_id"``, ``"ttl"``, or ``None``.

    Follows the order of the predicate: the run_id rule is checked before the TTL, so
    a marker that fails both is reported as ``"run_id"``. Returns ``None`` when there is
    no dict marker or it is current.
    """
    pending = state.get(PENDING_KEY)
    if not pending or not isinstance(pending, dict):
        return None
    if marker_staleness(pending, state.get("run_id"), None) is not None:
        return "run_id"  # P3 needs no TTL
    if interrupt_pending_is_current(state, ttl_seconds):
        return None
    return "ttl"


def tools_condition(state: Mapping[str, Any]) -> Literal["continue", "finish"]:
    """``"continue"`` when the last message is an AI message with tool calls, else ``"finish"``."""
    if not isinstance(state, Mapping):
        raise InvalidInputError("state", f"must be a mapping, got {type(state).__name__}")
    messages = state.get("messages") or []
    if not isinstance(messages, Sequence):
        raise InvalidInputError(
            "state.messages", f"must be a list of messages, got {type(messages).__name__}"
        )
    if messages:
        last = messages[-1]
        if _is_ai_message(last) and last.tool_calls:
            return "continue"
    return "finish"


def _is_ai_message(value: Any) -> bool:
    # An AIMessage exists only once LangChain is imported: no need to import it here
    # (the store and the CLI start without LangChain).
    messages = sys.modules.get("langchain_core.messages")
    return messages is not None and isinstance(value, messages.AIMessage)


def interrupt_condition(state: Mapping[str, Any], ttl_seconds: float | None = None) -> Route:
    """Route a step: ``"interrupt"`` over ``"elicitation"`` over the tools condition.

    ``ttl_seconds`` applies to both pause markers; without it only the run_id rule
    bounds them.
    """
    if interrupt_pending_is_current(state, ttl_seconds):
        return "interrupt"
    if ask_user_pending_is_current(state, ttl_seconds):
        return "elicitation"
    return tools_condition(state)


# --- the resume value -------------------------------------------------------------


def normalize_response(value: Any, *, json_ready: bool = False) -> Any:
    """Turn a resume value into the response the agent sees (rule N2).

    A dict loses the ack sentinel; an object with ``model_dump()`` becomes its dump,
    as is (a dict for an ordinary model); anything else becomes
    ``{"value": str(value)}``. With ``json_ready`` a pydantic model is dumped in JSON
    mode (datetimes as ISO text, and so on), as the store records it: the one
    normaliser of both the store's front door and the interrupt node.
    """
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != INTERRUPT_ACK_SENTINEL}
    if hasattr(value, "model_dump"):
        if json_ready:
            try:
                return value.model_dump(mode="json")
            except TypeError:  # a model_dump() without pydantic's ``mode``
                pass
        return value.model_dump()
    return {"value": str(value)}


def encode_resume(response: dict[str, Any]) -> dict[str, Any]:
    """The value to put in ``Command(resume=...)`` so LangGraph cannot misread it (N5).

    An empty response, or one whose keys all look like 32-hex interrupt ids, travels
    with the ack sentinel added; :func:`normalize_response` strips it again.
    """
    if not response or all(
        isinstance(k, str) and _INTERRUPT_MAP_KEY.fullmatch(k) for k in response
    ):
        return {**response, INTERRUPT_ACK_SENTINEL: True}
    return dict(response)


def expired_resume_value(reason: str) -> dict[str, Any]:
    """The resume value that wakes a graph whose interrupt expired (``sweep`` wake-ups)."""
    return {"expired": True, "reason": reason}


def response_updates(pending: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """The state update the interrupt node returns once answered (rules N3, N4).

    The marker is always cleared. A tool-originated interrupt answers its tool call with
    exactly one ``ToolMessage``; any other interrupt leaves ``_interrupt_response``.
    """
    from langchain_core.messages import ToolMessage

    name = pending["name"]
    tool_call_id = pending.get("tool_call_id") or None
    updates: dict[str, Any] = {PENDING_KEY: None}
    if tool_call_id:
        updates["messages"] = [
            ToolMessage(
                content=json.dumps(response, default=str),
                tool_call_id=tool_call_id,
                name=f"interrupt:{name}",
            )
        ]
    else:
        updates[RESPONSE_KEY] = {
            "name": name,
            "interrupt_id": pending["interrupt_id"],
            "response": response,
        }
    return updates


def interrupt_value(pending: Mapping[str, Any]) -> dict[str, Any]:
    """The value the node hands to LangGraph's ``interrupt()`` (rule N1)."""
    return {
        "type": "interrupt",
        "name": pending["name"],
        "interrupt_id": pending["interrupt_id"],
        "payload": pending.get("payload", {}),
        "tool_call_id": pending.get("tool_call_id") or None,
    }


__all__ = [
    "ASK_USER_PENDING_KEY",
    "INTERRUPT_ACK_SENTINEL",
    "MARKER_KEYS",
    "PENDING_KEY",
    "RESPONSE_KEY",
    "ROUTES",
    "Route",
    "ask_user_pending_is_current",
    "build_interrupt_marker",
    "encode_resume",
    "expired_resume_value",
    "interrupt_condition",
    "interrupt_pending_is_current",
    "interrupt_value",
    "new_interrupt_id",
    "normalize_response",
    "response_updates",
    "stale_reason",
    "tools_condition",
]
