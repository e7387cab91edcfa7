"""``store.checkpointer()`` on PostgreSQL: a put is one round trip, as PostgresSaver's (SPEC §16).

Counted on the wire: every connection goes through a relay that counts the times the
server answers after the client spoke (bench/roundtrips.py). A step with nothing to
record sends its BEGIN, the writers' lock, LangGraph's statements, the check of what the
thread waited on at the replaced checkpoint and the COMMIT together; when the thread did
wait there, that check fails the transaction and the step runs again with its records.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from graph_rig import config_for
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.postgres import PostgresSaver
from native_graphs import Wires, node_graph
from psycopg.rows import dict_row

from symfonic_store import InterruptStore
from symfonic_store.langgraph import checkpointer as own

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: bench/
from bench.roundtrips import RoundTrips

pytestmark = pytest.mark.postgres


@pytest.fixture
def wire(migrated_postgres_url: str) -> Iterator[RoundTrips]:
    with RoundTrips(migrated_postgres_url) as relay:
        yield relay


def step(n: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """Checkpoint ``n`` of a thread: a blob channel and an inline one, their versions."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=n))
    version = f"{n + 1:032}.0"
    checkpoint["channel_values"] = {"messages": [f"message {i}" for i in range(n + 1)], "step": n}
    checkpoint["channel_versions"] = {"messages": version, "step": version}
    return checkpoint, {"source": "loop", "step": n, "parents": {}}, {"messages": version, "step": version}


def trips_per_call(saver: Any, wire: RoundTrips, thread_id: str, steps: int) -> list[tuple[int, int]]:
    """(put, put_writes) round trips of each step after the first (the first replaces no checkpoint)."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    counted = []
    for n in range(steps + 1):
        checkpoint, metadata, versions = step(n)
        before = wire.trips
        config = saver.put(config, checkpoint, metadata, versions)
        middle = wire.trips
        saver.put_writes(config, [("messages", [f"reply {n}"]), ("branch:to:agent", None)], f"task-{n}")
        if n > 0:
            counted.append((middle - before, wire.trips - middle))
    return counted


def test_a_put_and_a_tasks_writes_are_one_round_trip_each_as_postgres_savers_are(
    wire: RoundTrips, migrated_postgres_url: str
) -> None:
    """Each put (which also checks what the thread waited on at the checkpoint it replaces) and each put_writes: one round trip, PostgresSaver's count; all of it committed."""
    conninfo = sa.make_url(wire.url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True, row_factory=dict_row) as conn:
        theirs = PostgresSaver(conn)  # type: ignore[arg-type]
        theirs.setup()
        assert trips_per_call(theirs, wire, "theirs", 3) == [(1, 1)] * 3

    store = InterruptStore(wire.url)
    try:
        ours = store.checkpointer()
        ours.setup()
        assert trips_per_call(ours, wire, "ours", 3) == [(1, 1)] * 3
    finally:
        store.close()

    # Committed: read back on a connection of its own (not the relay's).
    reader = InterruptStore(migrated_postgres_url)
    try:
        found = reader.checkpointer().get_tuple({"configurable": {"thread_id": "ours", "checkpoint_ns": ""}})
        assert found is not None
        assert found.checkpoint["channel_values"]["messages"] == [f"message {i}" for i in range(4)]
        assert [w[1:] for w in found.pending_writes or ()] == [("messages", ["reply 3"]), ("branch:to:agent", None)]
    finally:
        reader.close()


def test_a_new_checkpoint_after_one_the_thread_waited_at_runs_again_with_its_records(
    wire: RoundTrips, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New input while an interrupt is open: the one-round-trip put fails on the check, the step runs again and records the interrupt superseded, with the checkpoint."""
    seen: list[bool] = []
    real = own.waited

    def spied(exc: BaseException, backend: Any) -> bool:
        seen.append(real(exc, backend))
        return seen[-1]

    monkeypatch.setattr(own, "waited", spied)
    store = InterruptStore(wire.url)
    try:
        graph = node_graph(store.checkpointer(), Wires())
        config = config_for("t-w", actor="requester")
        graph.invoke({}, config)
        (opened,) = store.open_interrupts("t-w")
        assert seen == []  # nothing was waited on before the interrupt

        graph.invoke({}, config)  # new input: LangGraph stops waiting on the first interrupt
        assert seen == [True]
        history = store.history("t-w")
        (expired,) = [e for e in history if e.type == "interrupt.expired"]
        assert (expired.interrupt_id, expired.data["reason"]) == (opened["interrupt_id"], "superseded")
        (waiting,) = store.open_interrupts("t-w")  # the new input's step raised the interrupt again
        assert waiting["interrupt_id"] != opened["interrupt_id"]
        state = graph.get_state(config)
        assert state.config["configurable"]["checkpoint_id"] == waiting["checkpoint_id"]
    finally:
        store.close()
