"""The pure interrupt protocol: markers, ids, the ack sentinel, the predicates P1-P5, tools_condition."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any

import factories
import pytest
from freezegun import freeze_time
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from pydantic import BaseModel

import symfonic_store
from symfonic_store import (
    INTERRUPT_ACK_SENTINEL,
    ask_user_pending_is_current,
    build_interrupt_marker,
    interrupt_pending_is_current,
    new_interrupt_id,
    tools_condition,
)
from symfonic_store.protocol import encode_resume, normalize_response

Predicate = Callable[[Mapping[str, Any], float | None], bool]

# Each predicate with the one state key it reads and the other predicate's key.
PREDICATES = [
    pytest.param(
        interrupt_pending_is_current, "_interrupt_pending", "_ask_user_pending", id="interrupt"
    ),
    pytest.param(
        ask_user_pending_is_current, "_ask_user_pending", "_interrupt_pending", id="ask_user"
    ),
]

FROZEN = "2024-03-01 09:00:00"
TTL = 60


# A dict marker minted now (under the frozen clock), ``fields`` overriding.
marker = partial(factories.plain_marker, interrupt_id="i-0123456789ab", payload={})


# --- build_interrupt_marker, new_interrupt_id, the sentinel -----------------------


def test_sentinel_value() -> None:
    """The ack sentinel is the seed's exact string, exported at the top level."""
    assert INTERRUPT_ACK_SENTINEL == "__symfonic_interrupt_ack__"
    assert symfonic_store.protocol.INTERRUPT_ACK_SENTINEL is INTERRUPT_ACK_SENTINEL


@freeze_time(FROZEN)
def test_build_interrupt_marker_shape_and_clock() -> None:
    """The marker is one `_interrupt_pending` key holding exactly the six seed fields, stamped now."""
    update = build_interrupt_marker(
        name="approval_required",
        interrupt_id="i-abcdefabcdef",
        payload={"order": 1181, "amount": 420},
        tool_call_id="call_1",
        run_id="run-7",
    )
    assert list(update) == ["_interrupt_pending"]
    assert update["_interrupt_pending"] == {
        "name": "approval_required",
        "interrupt_id": "i-abcdefabcdef",
        "payload": {"order": 1181, "amount": 420},
        "tool_call_id": "call_1",
        "run_id": "run-7",
        "minted_at": time.time(),
    }
    assert update["_interrupt_pending"]["minted_at"] == 1709283600.0


def test_build_interrupt_marker_defaults_and_live_clock() -> None:
    """Without a tool call id or run id both are None, and minted_at is read at call time."""
    before = time.time()
    inner = build_interrupt_marker(name="n", interrupt_id="i-000000000000", payload={})[
        "_interrupt_pending"
    ]
    after = time.time()
    assert inner["tool_call_id"] is None
    assert inner["run_id"] is None
    assert set(inner) == {"name", "interrupt_id", "payload", "tool_call_id", "run_id", "minted_at"}
    assert before <= inner["minted_at"] <= after


def test_build_interrupt_marker_keyword_only() -> None:
    """The builder refuses positional arguments, as the seed's signature does."""
    with pytest.raises(TypeError):
        build_interrupt_marker("n", "i-000000000000", {})  # type: ignore[misc]


def test_build_interrupt_marker_minted_at_moves_with_clock() -> None:
    """Two markers built a minute apart carry minted_at values a minute apart."""
    with freeze_time(FROZEN) as frozen:
        first = build_interrupt_marker(name="n", interrupt_id="i-1", payload={})
        frozen.tick(timedelta(seconds=60))
        second = build_interrupt_marker(name="n", interrupt_id="i-1", payload={})
    assert (
        second["_interrupt_pending"]["minted_at"] - first["_interrupt_pending"]["minted_at"] == 60
    )


def test_new_interrupt_id_format_and_uniqueness() -> None:
    """Ids are "i-" plus 12 lowercase hex digits, and a thousand of them never collide."""
    ids = [new_interrupt_id() for _ in range(1000)]
    assert all(re.fullmatch(r"i-[0-9a-f]{12}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_new_interrupt_id_is_uuid4_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The id is the first 12 hex digits of a uuid4."""
    fixed = uuid.UUID("0123456789abcdef0123456789abcdef")
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    assert new_interrupt_id() == "i-0123456789ab"


# --- the predicates: P1 falsy, P2 non-dict ----------------------------------------


FALSY = [
    pytest.param(None, id="None"),
    pytest.param({}, id="empty-dict"),
    pytest.param(0, id="zero"),
    pytest.param(0.0, id="zero-float"),
    pytest.param("", id="empty-str"),
    pytest.param([], id="empty-list"),
    pytest.param(False, id="False"),
]


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
@pytest.mark.parametrize("value", FALSY)
@pytest.mark.parametrize("ttl", [None, TTL])
def test_falsy_marker_is_not_current(
    predicate: Predicate, key: str, other: str, value: Any, ttl: float | None
) -> None:
    """A falsy value under the predicate's key is never current (P1)."""
    assert predicate({key: value, "run_id": "r"}, ttl) is False


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_missing_key_is_not_current(predicate: Predicate, key: str, other: str) -> None:
    """A state without the predicate's key, even an empty state, is not current (P1)."""
    assert predicate({}, None) is False
    assert predicate({"run_id": "r", "messages": []}, TTL) is False


TRUTHY_NON_DICT = [
    pytest.param(True, id="True"),
    pytest.param(1, id="one"),
    pytest.param("pending", id="str"),
    pytest.param(["x"], id="list"),
    pytest.param(("x",), id="tuple"),
    pytest.param(object(), id="object"),
]


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
@pytest.mark.parametrize("value", TRUTHY_NON_DICT)
def test_truthy_non_dict_is_current(predicate: Predicate, key: str, other: str, value: Any) -> None:
    """A truthy non-dict is current, whatever the run id or TTL (P2)."""
    assert predicate({key: value}, None) is True
    assert predicate({key: value, "run_id": "another-run"}, 0) is True


# --- P3 run_id --------------------------------------------------------------------


RUN_ID_CASES = [
    # (marker run_id, state: has run_id?, state run_id, expected)
    pytest.param(None, True, "r-1", True, id="marker-None-state-set"),
    pytest.param(None, False, None, True, id="marker-None-state-missing"),
    pytest.param(None, True, None, True, id="marker-None-state-None"),
    pytest.param("r-1", True, "r-1", True, id="same-run"),
    pytest.param("r-1", True, "r-2", False, id="different-run"),
    pytest.param("r-1", False, None, False, id="marker-set-state-missing"),
    pytest.param("r-1", True, None, False, id="marker-set-state-None"),
    pytest.param("", True, "r-1", False, id="empty-string-is-not-None"),
]


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
@pytest.mark.parametrize(("marker_run", "state_has_run", "state_run", "expected"), RUN_ID_CASES)
def test_run_id_rule(
    predicate: Predicate,
    key: str,
    other: str,
    marker_run: str | None,
    state_has_run: bool,
    state_run: str | None,
    expected: bool,
) -> None:
    """A marker run_id that is set and differs from the state's makes the marker stale (P3)."""
    state: dict[str, Any] = {key: marker(run_id=marker_run)}
    if state_has_run:
        state["run_id"] = state_run
    assert predicate(state, None) is expected


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_marker_without_run_id_key_passes_run_check(
    predicate: Predicate, key: str, other: str
) -> None:
    """A dict marker with no run_id key at all is treated like run_id None (P3, P5)."""
    bare = {"name": "n", "interrupt_id": "i-1"}
    assert predicate({key: bare, "run_id": "r-9"}, None) is True


@freeze_time(FROZEN)
@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_run_id_mismatch_is_stale_even_when_young(
    predicate: Predicate, key: str, other: str
) -> None:
    """A marker from another run is stale although well within the TTL (P3 before P4)."""
    assert predicate({key: marker(run_id="old"), "run_id": "new"}, 3600) is False


# --- P4 TTL -----------------------------------------------------------------------


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_ttl_boundary(predicate: Predicate, key: str, other: str) -> None:
    """Exactly at the TTL the marker is current; one millisecond later it is stale (P4, strict >)."""
    with freeze_time(FROZEN) as frozen:
        state = {key: marker(), "run_id": None}
        assert predicate(state, TTL) is True
        frozen.tick(timedelta(seconds=TTL))
        assert predicate(state, TTL) is True
        frozen.tick(timedelta(milliseconds=1))
        assert predicate(state, TTL) is False
        assert predicate(state, None) is True


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_ttl_zero_and_float(predicate: Predicate, key: str, other: str) -> None:
    """A TTL of 0 keeps a marker current only at its minting instant; float TTLs compare exactly."""
    with freeze_time(FROZEN) as frozen:
        state = {key: marker()}
        assert predicate(state, 0) is True
        frozen.tick(timedelta(milliseconds=1))
        assert predicate(state, 0) is False
        assert predicate(state, 0.001) is True
        assert predicate(state, 0.0009) is False


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_ttl_with_int_minted_at(predicate: Predicate, key: str, other: str) -> None:
    """An integer minted_at is numeric and subject to the TTL like a float (P4)."""
    with freeze_time(FROZEN) as frozen:
        state = {key: marker(minted_at=int(time.time()))}
        frozen.tick(timedelta(seconds=TTL))
        assert predicate(state, TTL) is True
        frozen.tick(timedelta(seconds=1))
        assert predicate(state, TTL) is False


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_ttl_expiry_overrides_matching_run_id(predicate: Predicate, key: str, other: str) -> None:
    """A marker of the current run is still stale once older than the TTL (P4 after P3)."""
    with freeze_time(FROZEN) as frozen:
        state = {key: marker(run_id="r-1"), "run_id": "r-1"}
        frozen.tick(timedelta(seconds=TTL + 1))
        assert predicate(state, TTL) is False
        assert predicate(state, None) is True


NON_NUMERIC_MINTED_AT = [
    pytest.param("2024-03-01T09:00:00Z", id="iso-string"),
    pytest.param("1709283600", id="numeric-string"),
    pytest.param(None, id="None"),
    pytest.param([1709283600], id="list"),
]


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
@pytest.mark.parametrize("minted_at", NON_NUMERIC_MINTED_AT)
def test_non_numeric_minted_at_skips_ttl(
    predicate: Predicate, key: str, other: str, minted_at: Any
) -> None:
    """A non-numeric minted_at skips the TTL check: the marker stays current for ever (P4)."""
    with freeze_time(FROZEN) as frozen:
        state = {key: marker(minted_at=minted_at)}
        frozen.tick(timedelta(days=365))
        assert predicate(state, TTL) is True
        assert predicate(state, 0) is True


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_missing_minted_at_skips_ttl(predicate: Predicate, key: str, other: str) -> None:
    """A marker without minted_at is never stale by age (P4 skipped)."""
    with freeze_time(FROZEN) as frozen:
        bare = {"name": "n", "interrupt_id": "i-1", "payload": {}}
        frozen.tick(timedelta(days=365))
        assert predicate({key: bare}, 0) is True


def test_marker_from_builder_ages_out() -> None:
    """A marker made by build_interrupt_marker is judged by its own minted_at (builder + P4)."""
    with freeze_time(FROZEN) as frozen:
        state = build_interrupt_marker(name="n", interrupt_id="i-1", payload={})
        frozen.tick(timedelta(seconds=TTL))
        assert interrupt_pending_is_current(state, TTL) is True
        frozen.tick(timedelta(microseconds=1000))
        assert interrupt_pending_is_current(state, TTL) is False


# --- isolation of the two keys ----------------------------------------------------


@freeze_time(FROZEN)
@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_predicate_ignores_the_other_key(predicate: Predicate, key: str, other: str) -> None:
    """A current marker under the other predicate's key does not make this one current."""
    assert predicate({other: marker()}, None) is False
    assert predicate({other: marker(), key: None}, TTL) is False
    assert predicate({other: True, key: {}}, None) is False


@pytest.mark.parametrize(("predicate", "key", "other"), PREDICATES)
def test_stale_other_key_does_not_spoil_this_one(
    predicate: Predicate, key: str, other: str
) -> None:
    """A stale marker under the other key leaves this predicate's current marker current."""
    with freeze_time(FROZEN) as frozen:
        old = marker(run_id="old")
        frozen.tick(timedelta(hours=1))
        state = {key: marker(run_id="r"), other: old, "run_id": "r"}
        assert predicate(state, TTL) is True


# --- tools_condition --------------------------------------------------------------


TOOL_CALL = {"name": "refund", "args": {"order": 1}, "id": "call_1"}

TOOLS_CONDITION_CASES = [
    pytest.param([AIMessage("", tool_calls=[TOOL_CALL])], "continue", id="ai-with-calls"),
    pytest.param(
        [
            AIMessageChunk(
                content="",
                tool_call_chunks=[{"name": "refund", "args": "{}", "id": "c", "index": 0}],
            )
        ],
        "continue",
        id="ai-chunk-with-calls",
    ),
    pytest.param([AIMessage("hello")], "finish", id="ai-without-calls"),
    pytest.param([HumanMessage("hi")], "finish", id="human"),
    pytest.param(
        [AIMessage("", tool_calls=[TOOL_CALL]), ToolMessage("ok", tool_call_id="call_1")],
        "finish",
        id="tool-message-last",
    ),
    pytest.param(
        [AIMessage("", tool_calls=[TOOL_CALL]), HumanMessage("never mind")],
        "finish",
        id="calls-not-last",
    ),
    pytest.param(
        [HumanMessage("hi"), AIMessage("", tool_calls=[TOOL_CALL])], "continue", id="calls-last"
    ),
    pytest.param(
        [
            AIMessage(
                "",
                invalid_tool_calls=[
                    {
                        "name": "x",
                        "args": "{",
                        "id": "c",
                        "error": "bad",
                        "type": "invalid_tool_call",
                    }
                ],
            )
        ],
        "finish",
        id="only-invalid-calls",
    ),
    pytest.param([], "finish", id="empty"),
]


@pytest.mark.parametrize(("messages", "expected"), TOOLS_CONDITION_CASES)
def test_tools_condition(messages: list[Any], expected: str) -> None:
    """ "continue" only when the last message is an AI message with tool calls, else "finish"."""
    assert tools_condition({"messages": messages}) == expected


def test_tools_condition_without_messages_key() -> None:
    """A state with no messages at all finishes."""
    assert tools_condition({}) == "finish"


# --- N2/N5 helpers: what the node reads and what a resume should send -------------

HEX = "0123456789abcdef0123456789abcdef"

ENCODE_CASES = [
    pytest.param({}, True, id="empty"),
    pytest.param({HEX: "approve"}, True, id="one-hex-key"),
    pytest.param({HEX: 1, "fedcba9876543210fedcba9876543210": 2}, True, id="all-hex-keys"),
    pytest.param({HEX: 1, "note": "x"}, False, id="mixed-keys"),
    pytest.param({"approved": True}, False, id="plain"),
    pytest.param({HEX.upper(): 1}, False, id="uppercase-hex"),
    pytest.param({HEX[:31]: 1}, False, id="31-hex"),
    pytest.param({HEX + "0": 1}, False, id="33-hex"),
]


@pytest.mark.parametrize(("response", "needs_sentinel"), ENCODE_CASES)
def test_encode_resume_adds_sentinel_only_where_langgraph_would_misread(
    response: dict[str, Any], needs_sentinel: bool
) -> None:
    """encode_resume adds the sentinel exactly for the dicts LangGraph reads as interrupt-id maps."""
    original = dict(response)
    encoded = encode_resume(response)
    assert response == original
    if needs_sentinel:
        assert encoded == {**original, INTERRUPT_ACK_SENTINEL: True}
    else:
        assert encoded == original
        assert encoded is not response
    assert normalize_response(encoded) == original


@pytest.mark.parametrize(("response", "needs_sentinel"), ENCODE_CASES)
def test_encode_resume_agrees_with_langgraphs_map_test(
    response: dict[str, Any], needs_sentinel: bool
) -> None:
    """Our idea of a misreadable dict matches LangGraph's own test for a resume map (drift guard)."""
    from langgraph.pregel._utils import is_xxh3_128_hexdigest

    assert all(is_xxh3_128_hexdigest(k) for k in response) is needs_sentinel
    assert not all(is_xxh3_128_hexdigest(k) for k in encode_resume(response))


class _Answer(BaseModel):
    approved: bool


NORMALIZE_CASES = [
    pytest.param({"a": 1, INTERRUPT_ACK_SENTINEL: True}, {"a": 1}, id="dict-with-sentinel"),
    pytest.param({INTERRUPT_ACK_SENTINEL: True}, {}, id="sentinel-only"),
    pytest.param({"a": None}, {"a": None}, id="dict"),
    pytest.param(_Answer(approved=True), {"approved": True}, id="model"),
    pytest.param(7, {"value": "7"}, id="int"),
    pytest.param("no", {"value": "no"}, id="str"),
    pytest.param(None, {"value": "None"}, id="None"),
]


@pytest.mark.parametrize(("value", "expected"), NORMALIZE_CASES)
def test_normalize_response(value: Any, expected: dict[str, Any]) -> None:
    """N2: dicts lose the sentinel, models are dumped, anything else becomes {"value": str(v)}."""
    assert normalize_response(value) == expected


def test_a_model_whose_dump_is_not_a_dict_is_passed_through_as_the_seed_does() -> None:
    """N2: an object with model_dump() becomes its dump as is, even a RootModel's list."""
    from pydantic import RootModel

    from symfonic_store.protocol import normalize_response

    assert normalize_response(RootModel[list[int]]([1, 2])) == [1, 2]
