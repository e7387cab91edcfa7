"""One N2 normaliser for the store's front door and the interrupt node (SPEC §1 N2, §4).

A pydantic answer with a ``datetime`` field must be recorded as the same JSON whether it
comes through ``store.resume(...)`` or straight to the graph as
``Command(resume=Model(...))``, bypassing the store: the node admits it with the store's
rules, and the store records JSON (ISO text for the datetime). A node that dumped the
model with plain ``model_dump()`` would hand the store a ``datetime`` object instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pydantic
import pytest
from graph_rig import Rig, open_rig, tool_messages
from langgraph.types import Command

from symfonic_store import RESUMED

DECIDED_AT = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


class Decision(pydantic.BaseModel):
    """An approver's answer as a typed model (module level, so checkpointers can load it)."""

    approved: bool
    decided_at: datetime


@pytest.fixture(params=["invoke", "ainvoke"])
async def rig(request: pytest.FixtureRequest, migrated_url: str) -> AsyncIterator[Rig]:
    """The refund agent with a store and a checkpointer, driven by invoke or ainvoke."""
    async with open_rig(migrated_url, str(request.param)) as r:
        yield r


async def recorded(rig: Rig, thread_id: str) -> object:
    (resumed,) = [e for e in await rig.s("history", thread_id) if e.type == RESUMED]
    return resumed.data["response"]


async def test_a_model_with_a_datetime_is_recorded_alike_by_the_store_and_the_node(rig: Rig) -> None:
    """store.resume(Model) and Command(resume=Model) sent past the store record the same JSON, the datetime as ISO text."""
    answer = Decision(approved=True, decided_at=DECIDED_AT)
    expected = json.loads(answer.model_dump_json())
    assert isinstance(expected["decided_at"], str)

    front = await rig.start("t-front")
    tool_call = (await rig.s("pending", "t-front"))["tool_call_id"]
    command = await rig.s("resume", "t-front", front, answer, actor="alice")
    out_front = await rig.invoke(command, "t-front")

    await rig.start("t-node")
    node_call = (await rig.s("pending", "t-node"))["tool_call_id"]
    out_node = await rig.invoke(Command(resume=answer), "t-node", actor="alice")

    assert await recorded(rig, "t-front") == expected
    assert await recorded(rig, "t-node") == expected
    (front_answer,) = tool_messages(out_front["messages"], tool_call)
    (node_answer,) = tool_messages(out_node["messages"], node_call)
    assert json.loads(front_answer.content) == json.loads(node_answer.content) == expected
    assert rig.ledger.count == 2
