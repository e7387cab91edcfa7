"""The inbox's edit form for a tool call that LangChain's ``HumanInTheLoopMiddleware``
holds for review: the tool's name and one field per argument. Pure.

The middleware asks in two shapes and expects its answer in the matching one:

- a batched ``HITLRequest`` ``{"action_requests": [{"name", "args", ...}],
  "review_configs": [{"action_name", "allowed_decisions"}]}``, answered with
  ``{"decisions": [...]}``, one decision per action request, in order;
- a per-call ``ToolApprovalRequest`` ``{"type": "tool_approval", "name", "args", ...}``,
  answered with one decision.

An edit is ``{"type": "edit", "edited_action": {"name": ..., "args": {...}}}``. The
name is always the requested tool's (taken from the stored request, never from the
form: an edit changes arguments, not which tool runs), and the arguments' keys are the
requested ones; only their values come from the form, each as JSON.

A batched request's review config says which decisions each tool allows: the form
offers ``edit`` only where it is allowed, and every other action of the batch gets its
own choice among the allowed ``approve`` / ``reject``. A per-call request carries no
review config in its value (the graph's ``response_schema`` holds it), so the form is
offered and the graph itself refuses an edit its tool does not allow (the answer is then
recorded as not taken and the interrupt stays open).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ... import native
from ...visible import INVISIBLE

EDIT = "edit"
CHOICES = ("approve", "edit", "reject")
"""The decisions the form can send for an action (``respond`` needs a message: use the
JSON answer for it)."""


class BadEdit(ValueError):
    """A field of the edit form that cannot be sent (its message says which and why)."""


@dataclass(frozen=True, slots=True)
class ArgField:
    """One argument of a tool call as a form field."""

    key: str
    """The argument's name, as the tool call gave it."""
    field: str
    """The form field's name: by position, so no argument name reaches the form's keys."""
    value: str
    """The argument's current value as JSON text."""


@dataclass(frozen=True, slots=True)
class ActionForm:
    """One tool call of the request, as the form shows it."""

    index: int
    tool: str
    description: str | None
    args: tuple[ArgField, ...]
    choices: tuple[str, ...]
    """The decisions offered for it, of :data:`CHOICES`; ``edit`` among them when allowed."""
    choice_field: str

    @property
    def editable(self) -> bool:
        return EDIT in self.choices


@dataclass(frozen=True, slots=True)
class EditForm:
    """The form for one HITL interrupt: its tool calls, and whether it is a batch."""

    batched: bool
    actions: tuple[ActionForm, ...]


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP: JSON writes a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def field_json(value: Any) -> str:
    """``value`` as the JSON text of an editable field, with every invisible or format
    character (:data:`~symfonic_store.visible.INVISIBLE`) written as a ``\\uXXXX``
    escape: the same JSON value, but a bidi override or a zero-width character in a tool
    argument is visible in the field a reviewer edits and sends (JSON text outside
    strings is ASCII, so only string contents change)."""
    text = json.dumps(value, ensure_ascii=False)
    return "".join(
        _json_escape(c) if unicodedata.category(c) in INVISIBLE else c for c in text
    )


def _args(index: int, args: Any) -> tuple[ArgField, ...] | None:
    if not isinstance(args, Mapping):
        return None
    return tuple(
        ArgField(str(key), f"arg-{index}-{position}", field_json(value))
        for position, (key, value) in enumerate(args.items())
    )


def _allowed(payload: Mapping[str, Any], tool: str) -> tuple[str, ...]:
    """The form's choices for ``tool`` from the request's review configs (none found: none)."""
    for config in payload.get("review_configs") or ():
        if isinstance(config, Mapping) and config.get("action_name") == tool:
            allowed = config.get("allowed_decisions")
            if isinstance(allowed, list):
                return tuple(c for c in CHOICES if c in allowed)
    return ()


def edit_form(payload: Any) -> EditForm | None:
    """The edit form for an interrupt's value, or None when it has nothing to edit (not a
    HITL request, or no tool call in it allows ``edit``)."""
    requests = native.action_requests(payload)
    if requests is not None and isinstance(payload, Mapping):
        actions = []
        for index, request in enumerate(requests):
            if not isinstance(request, Mapping):
                return None
            tool = str(request.get("name"))
            args = _args(index, request.get("args"))
            if args is None:
                return None
            description = request.get("description")
            actions.append(ActionForm(
                index, tool, None if description is None else str(description), args,
                _allowed(payload, tool), f"choice-{index}",
            ))
        if not any(a.editable for a in actions):
            return None
        return EditForm(True, tuple(actions))
    if isinstance(payload, Mapping) and payload.get("type") == "tool_approval":
        args = _args(0, payload.get("args"))
        if args is None:
            return None
        description = payload.get("description")
        tool = str(payload.get("name"))
        return EditForm(False, (ActionForm(
            0, tool, None if description is None else str(description), args, (EDIT,), "choice-0",
        ),))
    return None


def _edited(action: ActionForm, form: Mapping[str, str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for arg in action.args:
        text = form.get(arg.field, "")
        try:
            args[arg.key] = json.loads(text)
        except (ValueError, RecursionError):
            raise BadEdit(
                f"The argument {arg.key!r} of {action.tool!r} is not JSON: {text[:80]!r} "
                '(a string needs quotes: "acct-2"; a number does not: 15). Nothing was sent.'
            ) from None
    return {"type": EDIT, "edited_action": {"name": action.tool, "args": args}}


def edit_answer(payload: Any, form: Mapping[str, str], *, reject_message: str) -> Any:
    """The answer the submitted edit form sends, in the shape the middleware expects.

    Raises:
        BadEdit: the interrupt has no edit form, a choice is missing or not offered, or an
            edited argument is not JSON.
    """
    shape = edit_form(payload)
    if shape is None:
        raise BadEdit("This interrupt has no tool call that may be edited. Nothing was sent.")
    decisions: list[dict[str, Any]] = []
    for action in shape.actions:
        choice = EDIT if not shape.batched else form.get(action.choice_field, "")
        if choice not in action.choices:
            offered = " or ".join(action.choices) or "nothing here"
            raise BadEdit(
                f"Choose what to do with {action.tool!r} (call {action.index + 1}): "
                f"{offered}. Nothing was sent."
            )
        if choice == EDIT:
            decisions.append(_edited(action, form))
        elif choice == "reject":
            decisions.append({"type": "reject", "message": reject_message})
        else:
            decisions.append({"type": choice})
    return {"decisions": decisions} if shape.batched else decisions[0]


def drafts(form: Mapping[str, str]) -> dict[str, str]:
    """What the person typed into the edit form, to show it again beside an error."""
    return {k: v for k, v in form.items() if k.startswith(("arg-", "choice-"))}
