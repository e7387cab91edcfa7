"""A projection row removed (or set back) behind the store's back is not a race (SPEC §12).

Every append chains onto the head the thread's projection row names; without the row a
writer starts at version 0 and collides with the events the log already has, on every
try. The store must say that the projection disagrees with the log and name
`symfonic-store projection rebuild` -- not "a concurrent writer changed the same thread
first; retry" -- and write nothing. Both backends, both stores, the marker path, the
gateway (native interrupts) and the command line.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli
from graph_rig import open_own_rig, open_rig, ready
from native_graphs import node_graph
from test_gateway import gate_for

from symfonic_store import (
    AsyncInterruptStore,
    ConcurrencyConflictError,
    InterruptStore,
    ProjectionMismatchError,
)
from symfonic_store.projection_gaps import refuse_projection_behind

IID = "i-refund000001"
REBUILD = "symfonic-store projection rebuild"


marker = partial(factories.marker, run_id="r1", payload=factories.SEED_PAYLOAD)


async def paused(store: Any, thread_id: str) -> None:
    """A route decision, a mint and the route to the interrupt: three events, one pending."""
    await ready(store.record_route(thread_id, "continue", run_id="r1"))
    await ready(store.mint(thread_id, marker(IID)))
    await ready(store.record_route(thread_id, "interrupt", run_id="r1"))


def tamper(url: str, sql: str) -> None:
    """Plain SQL on the projection, as someone with the table owner's rights would."""
    with InterruptStore(url) as s, s.engine.begin() as conn:
        conn.exec_driver_sql(sql)


def assert_gap_error(exc: BaseException, thread_id: str) -> None:
    assert isinstance(exc, ProjectionMismatchError)
    assert not isinstance(exc, ConcurrencyConflictError)
    assert exc.thread_ids == (thread_id,)
    text = str(exc)
    assert REBUILD in text and "disagrees with the log" in text
    assert "concurrent writer" not in text


@pytest.fixture(params=["sync", "async"])
async def any_store(request: pytest.FixtureRequest, migrated_url: str) -> Any:
    """The sync or the asyncio store on each backend, migrated."""
    s: Any = InterruptStore(migrated_url) if request.param == "sync" else AsyncInterruptStore(migrated_url)
    await ready(s.setup())
    yield s
    await ready(s.aclose() if request.param == "async" else s.close())


async def test_an_append_onto_a_deleted_projection_row_names_the_rebuild_and_writes_nothing(
    any_store: Any, migrated_url: str
) -> None:
    """A route decision, a mint and an answer on a thread whose row was deleted: each is refused as a projection gap, not a race, and no event is added."""
    await paused(any_store, "t-gone")
    tamper(migrated_url, "DELETE FROM symfonic_threads WHERE thread_id = 't-gone'")
    calls = [
        lambda: any_store.record_route("t-gone", "continue", run_id="r1"),
        lambda: any_store.mint("t-gone", marker("i-other0000001")),
        lambda: any_store.resume("t-gone", IID, {"approved": True}, actor="alice"),
        lambda: any_store.resume("t-gone", "i-neverminted01", {"approved": True}, actor="alice"),
        # An expiry and a recorded refusal (the service's policy) said "already expired"
        # and "unknown": the interrupt is pending in the log.
        lambda: any_store.expire("t-gone", IID, reason="cancelled", actor="ops"),
        lambda: any_store.record_refusal("t-gone", IID, {"approved": True}, actor="mallory", error="no role"),
    ]
    for call in calls:
        with pytest.raises(ProjectionMismatchError) as caught:
            await ready(call())
        if "pending" in str(caught.value):  # the answer: told by the resume's own check
            assert REBUILD in str(caught.value) and "no projection row" in str(caught.value)
        else:
            assert_gap_error(caught.value, "t-gone")
    assert len(await ready(any_store.history("t-gone"))) == 3

    assert await ready(any_store.rebuild_projection()) == 3
    await ready(any_store.resume("t-gone", IID, {"approved": True}, actor="alice"))
    assert [e.type for e in await ready(any_store.history("t-gone"))][-1] == "interrupt.resumed"


async def test_a_projection_row_set_back_behind_the_log_is_not_a_race(any_store: Any, migrated_url: str) -> None:
    """A row whose version was set back collides with the log on every try: the error names the row's and the log's versions."""
    await paused(any_store, "t-behind")
    tamper(migrated_url, "UPDATE symfonic_threads SET version = 1 WHERE thread_id = 't-behind'")
    with pytest.raises(ProjectionMismatchError) as caught:
        await ready(any_store.record_route("t-behind", "continue", run_id="r1"))
    assert_gap_error(caught.value, "t-behind")
    assert "version 3" in str(caught.value) and "at version 1" in str(caught.value)
    assert len(await ready(any_store.history("t-behind"))) == 3


def test_a_thread_whose_row_and_log_agree_is_a_race_not_a_gap(store: InterruptStore) -> None:
    """The check after a lost race lets a real race through: the row moved with the log, or neither exists."""
    store.record_route("t-raced", "continue", run_id="r1")
    with store.engine.connect() as conn:
        refuse_projection_behind(conn, ["t-raced", "t-new"])
        assert not conn.in_transaction()


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
async def test_a_gateway_answer_onto_a_deleted_projection_row_is_refused_as_a_gap(
    migrated_url: str, driver: str
) -> None:
    """A LangGraph interrupt answered through the gateway after its thread's row was deleted: the gap is named, the node does not run, nothing is written."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        out = await gate.invoke({}, "t-node", actor="requester")
        (interrupt,) = out["__interrupt__"]
        before = len(await gate.history("t-node"))
        tamper(migrated_url, "DELETE FROM symfonic_threads WHERE thread_id = 't-node'")
        with pytest.raises(ProjectionMismatchError) as caught:
            await gate.answer("t-node", interrupt.id, {"approved": True}, "alice")
        assert_gap_error(caught.value, "t-node")
        assert gate.wires.sent == []
        assert len(await gate.history("t-node")) == before

        await gate.s("rebuild_projection")  # the remedy the error names: then it answers
        await gate.answer("t-node", interrupt.id, {"approved": True}, "alice")
        assert gate.wires.sent == [999]


@pytest.mark.parametrize("opener", [open_rig, open_own_rig], ids=["langgraph-saver", "own-checkpointer"])
@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
async def test_a_marker_graph_step_onto_a_deleted_projection_row_is_refused_as_a_gap(
    migrated_url: str, driver: str, opener: Any
) -> None:
    """The seed agent's next step on a thread whose row was deleted: the router's record fails as a gap (with LangGraph's saver and in the store's own step transaction), nothing is recorded."""
    async with opener(migrated_url, driver) as rig:
        await rig.start("t-agent")
        before = len(await rig.s("history", "t-agent"))
        tamper(migrated_url, "DELETE FROM symfonic_threads WHERE thread_id = 't-agent'")
        with pytest.raises(ProjectionMismatchError) as caught:
            await rig.ask("t-agent", "and another refund", run_id="r2")
        assert_gap_error(caught.value, "t-agent")
        assert len(await rig.s("history", "t-agent")) == before


def test_the_command_line_names_the_rebuild_and_exits_1(store: InterruptStore, migrated_url: str) -> None:
    """`resume` on a thread with a deleted row: exit 1, one line naming `projection rebuild`, never "retry"."""
    store.record_route("t-cli", "continue", run_id="r1")
    tamper(migrated_url, "DELETE FROM symfonic_threads WHERE thread_id = 't-cli'")
    result = run_cli("resume", "t-cli", "i-neverminted01", "--actor", "alice", db=migrated_url)
    line = assert_clean_error(result, 1)
    assert REBUILD in line and "concurrent writer" not in line
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM symfonic_events")).scalar_one() == 1
