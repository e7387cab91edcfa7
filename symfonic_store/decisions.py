"""What an answer decided (SPEC §12): the vocabulary, the built-in rules, a user's rule.

Pure functions over JSON values. The store records the decision of every admitted answer
in the hashed event data (``data["decision"]``, or ``data["decisions"]``: one per action
request of a batched HITL request); the audit reports it, and derives it with the
built-in rules where an older event recorded none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from . import native
from .errors import InvalidInputError

VOCABULARY: Final = ("approve", "reject", "edit", "respond", "accept", "ignore", "response")
"""The decision words: HITL middleware (``approve``, ``reject``, ``edit``, ``respond``) and
Agent Inbox (``accept``, ``edit``, ``response``, ``ignore``)."""

LEGACY: Final = {"approved": "approve", "rejected": "reject"}
"""Breakpoint decisions as earlier releases recorded them, and the words reported now."""

DecisionRule = Callable[[str | None, Any], str | None]
"""``fn(name, response) -> str | None``: a decision word, or None for the built-in rules."""

_WORD = re.compile(r"[a-z0-9_]{1,32}")
_KEYS: Final = ("decision", "type", "action")


def reported(word: Any) -> str | None:
    """A stored decision as the audit reports it: the old breakpoint words as new ones."""
    if not isinstance(word, str):
        return None
    return LEGACY.get(word, word)


def is_reject(word: Any) -> bool:
    """Did a stored breakpoint decision refuse (either release's word)?"""
    return reported(word) == "reject"


def _generic(response: Any) -> str | None:
    """The rules after §8's: a boolean ``approved``; a vocabulary word under a known key."""
    if not isinstance(response, Mapping):
        return None
    approved = response.get("approved")
    if isinstance(approved, bool):
        return "approve" if approved else "reject"
    for key in _KEYS:
        value = response.get(key)
        if isinstance(value, str) and value.lower() in VOCABULARY:
            return value.lower()
    return None


def builtin(payload: Any, response: Any, *, breakpoint: bool = False) -> list[str | None]:
    """The built-in rules, in order: §8's (HITL, Agent Inbox, breakpoints), a boolean
    ``approved``, a vocabulary word as ``decision``/``type``/``action``; else None.

    One decision per action request of a batched HITL request, else a list of one.
    """
    found = native.decisions(payload, response, breakpoint=breakpoint)
    if len(found) == 1 and found[0] is None:
        return [_generic(response)]
    return found


def as_data(found: list[str | None], *, batched: bool) -> dict[str, Any]:
    """The event data that records ``found``: ``decisions`` for a batch, else ``decision``."""
    return {"decisions": found} if batched else {"decision": found[0] if found else None}


def decide(
    rule: DecisionRule | None,
    name: str | None,
    payload: Any,
    response: Any,
    *,
    breakpoint: bool = False,
) -> dict[str, Any]:
    """The decision data of an answer the store may still refuse.

    ``rule`` is asked first; its word stands for every action request of a batch.

    Raises:
        InvalidInputError: ``rule`` raised, or returned something other than None or 1-32
            characters of ``[a-z0-9_]``; nothing is to be written.
    """
    batched = native.action_requests(payload) is not None
    if rule is not None:
        try:
            word = rule(name, response)
        except Exception as exc:
            raise InvalidInputError(
                "decisions",
                f"the decisions function raised {type(exc).__name__}; the answer was refused "
                "and nothing was written",
            ) from exc
        if word is not None:
            if not isinstance(word, str) or _WORD.fullmatch(word) is None:
                raise InvalidInputError(
                    "decisions",
                    "the decisions function must return None or 1-32 characters of "
                    "[a-z0-9_]; the answer was refused and nothing was written",
                )
            count = len(native.action_requests(payload) or [None])
            return as_data([word] * count, batched=batched)
    return as_data(builtin(payload, response, breakpoint=breakpoint), batched=batched)


def decide_unrefusable(
    rule: DecisionRule | None,
    name: str | None,
    payload: Any,
    response: Any,
) -> dict[str, Any]:
    """As :func:`decide`, for an answer LangGraph already took: what ``rule`` got wrong
    is recorded (``decision: null``, ``decision_error``) instead of refusing."""
    try:
        return decide(rule, name, payload, response)
    except InvalidInputError as exc:
        return {"decision": None, "decision_error": exc.problem}
