"""The default ``replay`` table fits a 120-column terminal, ids and actors whole."""

from __future__ import annotations

import pytest
from cli_helpers import mint_stale, run_cli
from rich.cells import cell_len

from symfonic_store import InterruptStore

COLUMNS = 120
HEADER = ["pos", "ver", "occurred", "event", "actor", "data", "after"]
NATIVE_ID = "5f0c2b7e9a3d41c68e2f7b1a0d9c4e3b"  # the length of a LangGraph interrupt id
RUN = "run-2026-11-29-0042"


@pytest.mark.parametrize("interrupt_id", [None, NATIVE_ID], ids=["store-id", "native-id"])
def test_a_replay_is_one_row_per_event_within_120_columns(
    store: InterruptStore, migrated_url: str, interrupt_id: str | None
) -> None:
    """At COLUMNS=120 the replay stays a table: no wider line, each event a row, ids, actor and run whole."""
    store.record_route("t-refund", "continue", run_id=RUN)
    minted = mint_stale(store, "t-refund", age=30, interrupt_id=interrupt_id, amount=420, note="n" * 400)
    store.record_route("t-refund", "interrupt", interrupt_id=minted, run_id=RUN)
    store.resume("t-refund", minted, {"approved": True}, actor="alice.approver")
    store.record_route("t-refund", "finish", run_id=RUN)
    events = store.history("t-refund")

    shown = run_cli("replay", "t-refund", db=migrated_url, env={"COLUMNS": str(COLUMNS)})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= COLUMNS
    assert HEADER in [line.split() for line in lines], shown.stdout  # a table, not records
    rows = [line.split() for line in lines if line[:1].isdigit()]
    assert [(int(r[0]), int(r[1])) for r in rows] == [(e.position, e.version) for e in events]
    assert [r[3] for r in rows] == [e.type for e in events]
    assert any(minted in line for line in lines)  # whole, never folded
    assert any("alice.approver" in line for line in lines)
    assert any(RUN in line for line in lines)
    assert "…(+" in shown.stdout  # the long payload is cut with its marker, nothing else
