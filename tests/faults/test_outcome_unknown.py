"""An answer whose process died after the graph may have acted is never hidden (SPEC §12).

A claim whose lease ran out without the checkpoint showing the answer taken is recorded
``outcome_unknown`` by any sweep; the interrupt refuses answers until an operator settles
it (``store.settle`` / ``symfonic-store settle``). Every answer carries an answer id,
stable per interrupt, in the run's config. Every case runs on SQLite and PostgreSQL,
with the sync and the async store.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cli_helpers import run_cli
from freezegun import freeze_time
from graph_rig import ready
from langgraph.graph import END, START, StateGraph
from langgraph.types import RunnableConfig, interrupt
from native_graphs import State, Wires, node_graph
from test_gateway import DRIVERS, Gate, gate_for, of_type

from symfonic_store import (
    InterruptAlreadyResolvedError,
    InterruptOutcomeUnknownError,
    InterruptStore,
    InvalidInputError,
)
from symfonic_store.langgraph.answer_id import answer_id


async def unknown_outcome(gate: Gate, thread_id: str) -> str:
    """Pause the wire graph, claim its interrupt as alice, let her process die, sweep after the lease."""
    (paused,) = (await gate.invoke({}, thread_id))["__interrupt__"]
    await gate.s("claim", thread_id, paused.id, {"approved": True}, actor="alice")
    with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
        report = await gate.s("sweep")
    assert report.claims_settled == [(thread_id, paused.id, "outcome_unknown")]
    return str(paused.id)


@pytest.mark.parametrize("driver", DRIVERS)
async def test_settled_as_not_taken_the_interrupt_is_open_again(migrated_url: str, driver: str) -> None:
    """settle not_taken: recorded with settled_by, and the next answer is admitted and runs the node."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        i = await unknown_outcome(gate, "t-settle-no")
        with pytest.raises(InterruptOutcomeUnknownError):
            await gate.answer("t-settle-no", i, {"approved": True}, "bob")
        await gate.s("settle", "t-settle-no", i, outcome="not_taken", actor="ops")
        events = await gate.history("t-settle-no")
        settled = of_type(events, "interrupt.resume_rejected")[-1]
        assert (settled.actor, settled.data["why"], settled.data["settled_by"]) == ("alice", "not_taken", "ops")
        assert (await gate.open("t-settle-no"))[0].get("outcome_unknown") is None
        await gate.answer("t-settle-no", i, {"approved": True}, "bob")
        (resumed,) = of_type(await gate.history("t-settle-no"), "interrupt.resumed")
        assert resumed.actor == "bob" and "settled_by" not in resumed.data
        assert gate.wires.sent == [999]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_settled_as_taken_the_claimants_answer_is_the_answer(migrated_url: str, driver: str) -> None:
    """settle taken: interrupt.resumed by the claimant with her answer and decision, settled_by the operator; later answers are refused."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        i = await unknown_outcome(gate, "t-settle-yes")
        await gate.s("settle", "t-settle-yes", i, outcome="taken", actor="ops")
        (resumed,) = of_type(await gate.history("t-settle-yes"), "interrupt.resumed")
        assert resumed.actor == "alice" and resumed.data["settled_by"] == "ops"
        assert resumed.data["response"] == {"approved": True} and resumed.data["decision"] == "approve"
        with pytest.raises(InterruptAlreadyResolvedError):
            await gate.answer("t-settle-yes", i, {"approved": True}, "bob")
        (record,) = await gate.s("audit", thread_id="t-settle-yes")
        assert record.outcome == "resumed" and record.actor == "alice"


@pytest.mark.parametrize("driver", DRIVERS)
async def test_settling_what_is_not_of_unknown_outcome_is_refused(migrated_url: str, driver: str) -> None:
    """An open interrupt, one merely in progress, an unknown thread, a bad outcome: InvalidInputError, nothing written."""
    async with gate_for(migrated_url, driver, node_graph) as gate:
        (paused,) = (await gate.invoke({}, "t-not-unknown"))["__interrupt__"]
        before = len(await gate.history("t-not-unknown"))
        with pytest.raises(InvalidInputError, match="no answer of unknown outcome"):
            await gate.s("settle", "t-not-unknown", paused.id, outcome="taken", actor="ops")
        await gate.s("claim", "t-not-unknown", paused.id, {"approved": True}, actor="alice")
        with pytest.raises(InvalidInputError, match="no answer of unknown outcome"):
            await gate.s("settle", "t-not-unknown", paused.id, outcome="not_taken", actor="ops")
        with pytest.raises(InvalidInputError, match="no answer of unknown outcome"):
            await gate.s("settle", "t-nowhere", paused.id, outcome="taken", actor="ops")
        with pytest.raises(InvalidInputError, match="outcome"):
            await gate.s("settle", "t-not-unknown", paused.id, outcome="maybe", actor="ops")
        assert len(await gate.history("t-not-unknown")) == before


async def test_the_settle_command(migrated_url: str) -> None:
    """symfonic-store sweep says what is of unknown outcome; settle --as not-taken records the operator; settling again is exit 2."""
    async with gate_for(migrated_url, "invoke", node_graph) as gate:
        (paused,) = (await gate.invoke({}, "t-cli"))["__interrupt__"]
        i = paused.id
        gate.store.claim("t-cli", i, {"approved": True}, actor="alice")
        with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
            swept = run_cli("sweep", db=migrated_url)
        assert swept.returncode == 0, swept.stderr
        assert "1 abandoned answer(s) of unknown outcome" in swept.stdout + swept.stderr
        done = run_cli("settle", "t-cli", i, "--as", "not-taken", "--actor", "ops", db=migrated_url)
        assert done.returncode == 0, done.stderr
        assert "open again" in done.stdout
        settled = of_type(await gate.history("t-cli"), "interrupt.resume_rejected")[-1]
        assert settled.data["settled_by"] == "ops" and settled.data["why"] == "not_taken"
        again = run_cli("settle", "t-cli", i, "--as", "taken", "--actor", "ops", db=migrated_url)
        assert again.returncode == 2 and "no answer of unknown outcome" in again.stderr
        bad = run_cli("settle", "t-cli", i, "--as", "perhaps", "--actor", "ops", db=migrated_url)
        assert bad.returncode == 2


def answer_id_graph(checkpointer: Any, wires: Wires) -> Any:
    """A node that notes the answer id of every run, and raises on the answer "bad"."""

    def approve(state: State, config: RunnableConfig) -> dict[str, Any]:
        answer = interrupt({"name": "wire_approval", "amount": 5})
        wires.ids.append(config["configurable"].get("symfonic_answer_id"))  # type: ignore[attr-defined]
        if answer == "bad":
            raise ValueError("cannot read the answer")
        return {"answers": [answer]}

    wires.ids = []  # type: ignore[attr-defined]
    builder = StateGraph(State)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer, name="answer-ids")


@pytest.mark.parametrize("driver", DRIVERS)
async def test_every_answer_to_an_interrupt_carries_the_same_answer_id(migrated_url: str, driver: str) -> None:
    """A refused answer and the admitted one: the node sees one answer id, the interrupt's, on every delivery."""
    async with gate_for(migrated_url, driver, answer_id_graph) as gate:
        (paused,) = (await gate.invoke({}, "t-ids"))["__interrupt__"]
        with pytest.raises(Exception, match="did not take"):
            await gate.answer("t-ids", paused.id, "bad", "mallory")
        await gate.answer("t-ids", paused.id, {"approved": True}, "alice")
        ids = gate.wires.ids  # type: ignore[attr-defined]
        assert len(ids) == 2 and ids[0] is not None and set(ids) == {answer_id("t-ids", paused.id)}
        assert answer_id("t-ids", paused.id) != answer_id("t-ids", "other")
        await ready(None)


def test_a_sweep_with_another_graphs_waker_never_calls_an_answer_taken(store: InterruptStore) -> None:
    """Graph "payments" minted; its answerer died before the graph ran. A sweep given another graph's waker (which never saw the thread) records the outcome unknown, never `resumed`."""
    from langgraph.checkpoint.memory import InMemorySaver

    from symfonic_store import InterruptGateway
    from symfonic_store.events import RESUME_REJECTED, RESUMED

    def build(name: str) -> Any:
        def node(state: State) -> dict[str, Any]:
            interrupt({"name": "approve"})
            return {}

        graph = StateGraph(State)
        graph.add_node("n", node)
        graph.add_edge(START, "n")
        graph.add_edge("n", END)
        return graph.compile(checkpointer=InMemorySaver(), name=name)

    payments = InterruptGateway(build("payments"), store)
    other = InterruptGateway(build("other"), store)
    (paused,) = payments.invoke({}, {"configurable": {"thread_id": "t-pay"}})["__interrupt__"]
    store.claim("t-pay", paused.id, {"approved": True}, actor="alice")  # alice's process dies here
    with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
        report = store.sweep(on_expired=other.waker())
    assert report.claims_settled == [("t-pay", paused.id, "outcome_unknown")]
    types = [(e.type, e.actor, e.data.get("why")) for e in store.history("t-pay")]
    assert (RESUMED, "alice", None) not in types
    assert types[-1] == (RESUME_REJECTED, "alice", "outcome_unknown")
