"""The inbox's edit form for a HITL tool call, in this process: which calls may be edited,
and the answer the form sends, in the shape HumanInTheLoopMiddleware expects (pure)."""

from __future__ import annotations

import pytest

from symfonic_store.server.inbox.edits import BadEdit, edit_answer, edit_form

BATCH = {
    "action_requests": [
        {"name": "wire", "args": {"amount": 10, "to": "acct-1"}, "description": "Wire?"},
        {"name": "lookup", "args": {"q": "<b>x</b>"}},
    ],
    "review_configs": [
        {"action_name": "wire", "allowed_decisions": ["approve", "edit", "reject"]},
        {"action_name": "lookup", "allowed_decisions": ["approve", "reject"]},
    ],
}
PER_CALL = {"type": "tool_approval", "tool_call_id": "call-0", "name": "wire",
            "args": {"amount": 7}, "description": "Wire?"}


def test_a_batch_offers_edit_only_where_its_review_config_allows_it() -> None:
    """Each action's arguments become JSON fields; edit is a choice only for the tool whose config allows it."""
    form = edit_form(BATCH)
    assert form is not None and form.batched
    wire, lookup = form.actions
    assert (wire.tool, wire.choices, wire.editable) == ("wire", ("approve", "edit", "reject"), True)
    assert [(a.key, a.field, a.value) for a in wire.args] == [
        ("amount", "arg-0-0", "10"), ("to", "arg-0-1", '"acct-1"')
    ]
    assert (lookup.tool, lookup.choices, lookup.editable) == ("lookup", ("approve", "reject"), False)


def test_the_sent_batch_has_one_decision_per_action_and_the_stored_names() -> None:
    """The edited call keeps the requested tool and argument names; fields the form invents are ignored."""
    answer = edit_answer(BATCH, {
        "choice-0": "edit", "arg-0-0": "15", "arg-0-1": '"acct-2"', "arg-0-9": '"extra"',
        "choice-1": "reject",
    }, reject_message="no")
    assert answer == {"decisions": [
        {"type": "edit", "edited_action": {"name": "wire", "args": {"amount": 15, "to": "acct-2"}}},
        {"type": "reject", "message": "no"},
    ]}


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"choice-0": "edit", "arg-0-0": "15 dollars", "arg-0-1": '"a"', "choice-1": "approve"},
         "The argument 'amount' of 'wire' is not JSON"),
        ({"choice-0": "edit", "arg-0-0": "15", "arg-0-1": '"a"'}, "Choose what to do with 'lookup'"),
        ({"choice-0": "edit", "arg-0-0": "15", "arg-0-1": '"a"', "choice-1": "edit"},
         "Choose what to do with 'lookup' (call 2): approve or reject"),
    ],
)
def test_a_form_that_cannot_be_sent_says_why(form: dict[str, str], says: str) -> None:
    """Bad JSON, a missing choice, or a decision the review config does not allow is refused, naming the call."""
    with pytest.raises(BadEdit, match=r"Nothing was sent") as raised:
        edit_answer(BATCH, form, reject_message="no")
    assert says in str(raised.value)


def test_a_per_call_request_is_answered_with_one_edit_decision() -> None:
    """A ToolApprovalRequest gets one edit decision, not a list."""
    form = edit_form(PER_CALL)
    assert form is not None and not form.batched and form.actions[0].choices == ("edit",)
    assert edit_answer(PER_CALL, {"arg-0-0": "8"}, reject_message="no") == {
        "type": "edit", "edited_action": {"name": "wire", "args": {"amount": 8}},
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"amount": 420},
        {**BATCH, "review_configs": [{"action_name": "wire", "allowed_decisions": ["approve"]}]},
        {"action_requests": [{"name": "wire", "args": {"amount": 1}}]},
        [{"action_request": {"action": "wire", "args": {}}, "config": {"allow_edit": True}}],
    ],
)
def test_no_edit_form_without_a_call_that_may_be_edited(payload: object) -> None:
    """A seed marker, a batch whose configs allow no edit (or are missing), and Agent Inbox get no edit form."""
    assert edit_form(payload) is None
    with pytest.raises(BadEdit):
        edit_answer(payload, {}, reject_message="no")


def test_an_edit_field_shows_invisible_characters_as_json_escapes_of_the_same_value() -> None:
    """A bidi override, a zero-width joiner and a tag character in a tool argument are `\\uXXXX` in the field's JSON text, which still reads back as the same value."""
    import json

    from symfonic_store.server.inbox.edits import field_json

    for value in ["\u202e024$", "pay\u200dee", {"k": "x\U000e0001"}, "tab\there\n", "аlice"]:
        text = field_json(value)
        assert json.loads(text) == value
        assert not any(c in text for c in "\u202e\u200d\U000e0001")
    assert field_json("\u202e024$") == '"\\u202e024$"'
