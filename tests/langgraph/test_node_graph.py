"""The store-less interrupt node (rules N1-N5) inside real graphs with real checkpointers.

Every test runs on InMemorySaver and on the SQLite checkpointer (a temporary file), and
drives the graph with ``invoke``, ``ainvoke`` and ``astream`` (the ``driver`` fixture).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from graphs import DRIVER_PARAMS, Approval, Driver, dump, marker_graph, open_driver, tool_messages
from langchain_core.messages import ToolMessage

from symfonic_store import INTERRUPT_ACK_SENTINEL
from symfonic_store.protocol import encode_resume


@pytest.fixture(params=DRIVER_PARAMS)
async def driver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Driver]:
    """A real checkpointer and a way of running the graph (invoke / ainvoke / astream)."""
    async with open_driver(request.param, tmp_path) as opened:
        yield opened


NAME = "approval_required"
IID = "i-0123456789ab"
PAYLOAD = {"order": 1181, "amount": 420}
CALL_ID = "call_refund_1"

ORIGINS = [pytest.param(CALL_ID, id="from-tool"), pytest.param(None, id="not-from-tool")]


async def paused(driver: Driver, tool_call_id: str | None = None) -> tuple[Any, dict[str, Any]]:
    """A marker graph run up to its pause; returns the graph and the thread's config."""
    graph = marker_graph(
        driver.checkpointer, name=NAME, interrupt_id=IID, payload=PAYLOAD, tool_call_id=tool_call_id
    )
    config = driver.config()
    first = await driver.run(graph, {"messages": [], "run_id": "run-1"}, config)
    assert first.next == ("interrupt",)
    return graph, config


def answer_of(outcome_values: dict[str, Any], tool_call_id: str | None) -> dict[str, Any]:
    """The response the node injected: the ToolMessage's JSON, or `_interrupt_response["response"]`."""
    if tool_call_id:
        (message,) = tool_messages(outcome_values["messages"])
        result: dict[str, Any] = json.loads(str(message.content))
        return result
    response: dict[str, Any] = outcome_values["_interrupt_response"]["response"]
    return response


# --- N1: what LangGraph surfaces --------------------------------------------------


@pytest.mark.parametrize("tool_call_id", ORIGINS)
async def test_interrupt_value_surfaced(driver: Driver, tool_call_id: str | None) -> None:
    """LangGraph surfaces exactly one interrupt whose value is the five-key N1 dict."""
    graph = marker_graph(
        driver.checkpointer, name=NAME, interrupt_id=IID, payload=PAYLOAD, tool_call_id=tool_call_id
    )
    config = driver.config()
    outcome = await driver.run(graph, {"messages": []}, config)
    assert outcome.interrupt_values == [
        {
            "type": "interrupt",
            "name": NAME,
            "interrupt_id": IID,
            "payload": PAYLOAD,
            "tool_call_id": tool_call_id,
        }
    ]
    assert outcome.next == ("interrupt",)
    assert outcome.values["_interrupt_pending"]["interrupt_id"] == IID


async def test_empty_tool_call_id_surfaces_as_none(driver: Driver) -> None:
    """A marker whose tool_call_id is "" surfaces None and is answered as a non-tool interrupt."""
    graph, config = await paused(driver, tool_call_id="")
    (live,) = (await driver.snapshot(graph, config)).interrupts
    assert live.value["tool_call_id"] is None
    done = await driver.resume(graph, {"ok": True}, config)
    assert tool_messages(done.values.get("messages", [])) == []
    assert done.values["_interrupt_response"]["response"] == {"ok": True}


# --- N3/N4: the resume path -------------------------------------------------------


async def test_tool_resume_gives_one_tool_message(driver: Driver) -> None:
    """A tool-originated resume yields exactly one ToolMessage for that call and clears the marker."""
    graph, config = await paused(driver, tool_call_id=CALL_ID)
    done = await driver.resume(graph, {"approved": True, "note": "ok"}, config)
    assert done.interrupts == []
    assert done.next == ()
    (message,) = done.values["messages"]
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == CALL_ID
    assert message.name == f"interrupt:{NAME}"
    assert json.loads(str(message.content)) == {"approved": True, "note": "ok"}
    assert done.values["_interrupt_pending"] is None
    assert done.values.get("_interrupt_response") is None


async def test_non_tool_resume_sets_interrupt_response(driver: Driver) -> None:
    """A non-tool resume sets `_interrupt_response` to name/id/response, clears the marker, adds no message."""
    graph, config = await paused(driver, tool_call_id=None)
    done = await driver.resume(graph, {"approved": False}, config)
    assert done.interrupts == []
    assert done.values["_interrupt_response"] == {
        "name": NAME,
        "interrupt_id": IID,
        "response": {"approved": False},
    }
    assert done.values["_interrupt_pending"] is None
    assert done.values.get("messages", []) == []


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
async def test_astream_updates_show_the_node_output(saver: str, tmp_path: Path) -> None:
    """Streamed, the interrupt node's one update holds the cleared marker and the ToolMessage."""
    async with open_driver((saver, "astream"), tmp_path) as driver:
        graph, config = await paused(driver, tool_call_id=CALL_ID)
        done = await driver.resume(graph, {"approved": True}, config)
    node_updates = [c["interrupt"] for c in done.chunks if "interrupt" in c]
    assert len(node_updates) == 1
    assert node_updates[0]["_interrupt_pending"] is None
    assert [m.tool_call_id for m in node_updates[0]["messages"]] == [CALL_ID]


# --- N5: the ack sentinel ---------------------------------------------------------


@pytest.mark.parametrize("tool_call_id", ORIGINS)
async def test_ack_sentinel_completes_and_never_leaks(
    driver: Driver, tool_call_id: str | None
) -> None:
    """Resuming with only the sentinel completes with an empty response; the sentinel is in no state."""
    graph, config = await paused(driver, tool_call_id=tool_call_id)
    done = await driver.resume(graph, {INTERRUPT_ACK_SENTINEL: True}, config)
    assert done.interrupts == []
    assert done.next == ()
    assert answer_of(done.values, tool_call_id) == {}
    if tool_call_id:
        assert done.values["messages"][0].content == "{}"
    history = await driver.history_values(graph, config)
    assert len(history) >= 3
    assert INTERRUPT_ACK_SENTINEL not in dump(history)
    assert INTERRUPT_ACK_SENTINEL not in dump(done.chunks)


async def test_sentinel_stripped_from_a_non_empty_answer(driver: Driver) -> None:
    """The sentinel next to real fields is dropped and the fields are kept."""
    graph, config = await paused(driver, tool_call_id=CALL_ID)
    done = await driver.resume(graph, {"approved": True, INTERRUPT_ACK_SENTINEL: True}, config)
    assert answer_of(done.values, CALL_ID) == {"approved": True}
    assert INTERRUPT_ACK_SENTINEL not in dump(await driver.history_values(graph, config))


async def test_empty_resume_refires_the_interrupt(driver: Driver) -> None:
    """`Command(resume={})` does not resume: LangGraph re-fires the interrupt, which is why N5 exists."""
    graph, config = await paused(driver, tool_call_id=CALL_ID)
    again = await driver.resume(graph, {}, config)
    assert [v["interrupt_id"] for v in again.interrupt_values] == [IID]
    assert again.next == ("interrupt",)
    assert again.values["_interrupt_pending"]["interrupt_id"] == IID
    done = await driver.resume(graph, encode_resume({}), config)
    assert done.next == ()
    assert answer_of(done.values, CALL_ID) == {}


def hex_keyed() -> dict[str, Any]:
    return {uuid.uuid4().hex: "approve", uuid.uuid4().hex: {"amount": 420}}


@pytest.mark.parametrize("tool_call_id", ORIGINS)
async def test_hex_keyed_answer_survives_encode_resume(
    driver: Driver, tool_call_id: str | None
) -> None:
    """A dict whose keys all look like 32-hex interrupt ids arrives intact when sent via encode_resume."""
    graph, config = await paused(driver, tool_call_id=tool_call_id)
    answer = hex_keyed()
    done = await driver.resume(graph, encode_resume(answer), config)
    assert done.next == ()
    assert answer_of(done.values, tool_call_id) == answer
    assert INTERRUPT_ACK_SENTINEL not in dump(await driver.history_values(graph, config))


async def test_hex_keyed_answer_sent_raw_is_misread(driver: Driver) -> None:
    """Sent raw, the same dict is read as a map of interrupt ids: nothing resumes and the interrupt re-fires."""
    graph, config = await paused(driver, tool_call_id=CALL_ID)
    again = await driver.resume(graph, hex_keyed(), config)
    assert [v["interrupt_id"] for v in again.interrupt_values] == [IID]
    assert again.next == ("interrupt",)
    assert tool_messages(again.values.get("messages", [])) == []


async def test_raw_map_keyed_by_the_live_interrupt_loses_its_shape(driver: Driver) -> None:
    """A raw dict keyed by the live interrupt's id is unwrapped by LangGraph: the node sees only the inner value."""
    graph, config = await paused(driver, tool_call_id=None)
    (live,) = (await driver.snapshot(graph, config)).interrupts
    done = await driver.resume(graph, {live.id: {"approved": True}}, config)
    assert done.values["_interrupt_response"]["response"] == {"approved": True}
    graph2, config2 = await paused(driver, tool_call_id=None)
    (live2,) = (await driver.snapshot(graph2, config2)).interrupts
    kept = await driver.resume(graph2, encode_resume({live2.id: {"approved": True}}), config2)
    assert kept.values["_interrupt_response"]["response"] == {live2.id: {"approved": True}}


# --- N2: shapes of the answer -----------------------------------------------------


@pytest.mark.parametrize("tool_call_id", ORIGINS)
async def test_pydantic_answer_is_dumped(driver: Driver, tool_call_id: str | None) -> None:
    """A pydantic model answer becomes its model_dump()."""
    graph, config = await paused(driver, tool_call_id=tool_call_id)
    done = await driver.resume(graph, Approval(approved=True, note="fine"), config)
    assert answer_of(done.values, tool_call_id) == {"approved": True, "note": "fine"}
    if not tool_call_id:
        assert isinstance(done.values["_interrupt_response"]["response"], dict)


SCALARS = [
    pytest.param(5, "5", id="int"),
    pytest.param(4.5, "4.5", id="float"),
    pytest.param("yes", "yes", id="str"),
    pytest.param(True, "True", id="bool"),
    pytest.param(["a", 1], "['a', 1]", id="list"),
    pytest.param("", "", id="empty-str"),
    pytest.param(0, "0", id="zero"),
]


@pytest.mark.parametrize(("value", "text"), SCALARS)
@pytest.mark.parametrize("tool_call_id", ORIGINS)
async def test_scalar_answer_becomes_value(
    driver: Driver, tool_call_id: str | None, value: Any, text: str
) -> None:
    """A non-dict, non-model answer becomes {"value": str(answer)}."""
    graph, config = await paused(driver, tool_call_id=tool_call_id)
    done = await driver.resume(graph, value, config)
    assert done.next == ()
    assert answer_of(done.values, tool_call_id) == {"value": text}


async def test_unencodable_values_go_through_str(driver: Driver) -> None:
    """Values JSON cannot encode (datetimes, dates) are rendered with str() in the ToolMessage."""
    graph, config = await paused(driver, tool_call_id=CALL_ID)
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    answer = {"approved": True, "when": when, "nested": {"day": date(2024, 1, 1)}}
    done = await driver.resume(graph, answer, config)
    (message,) = tool_messages(done.values["messages"], CALL_ID)
    assert message.content == json.dumps(answer, default=str)
    assert json.loads(str(message.content)) == {
        "approved": True,
        "when": "2024-01-02 03:04:05+00:00",
        "nested": {"day": "2024-01-01"},
    }


async def test_non_tool_answer_keeps_python_values(driver: Driver) -> None:
    """Without a tool call the response dict is stored as given: a datetime stays a datetime."""
    graph, config = await paused(driver, tool_call_id=None)
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    done = await driver.resume(graph, {"when": when}, config)
    assert done.values["_interrupt_response"]["response"] == {"when": when}
