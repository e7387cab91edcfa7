"""A log with every kind of audit record, for the tests of the audit columns."""

from __future__ import annotations

import pytest

from symfonic_store import InterruptStore, SymfonicStoreError

HITL = {
    "action_requests": [{"name": "wire", "args": {"to": "x"}}, {"name": "mail", "args": {}}],
    "review_configs": [],
}


def rich_log(store: InterruptStore) -> None:
    """Every kind of audit record: markers resumed, expired, superseded, pending and refused;
    LangGraph interrupts answered in one piece and as a batched HITL request."""
    store.mint("t-m", {"name": "approval", "interrupt_id": "i-1", "payload": {"amount": 5, "ok": True},
                       "minted_at": 1_767_000_000.25})
    with pytest.raises(SymfonicStoreError):
        store.resume("t-m", "i-9", {"approved": True}, actor="mallory")
    store.resume("t-m", "i-1", {"approved": True, "note": "fine"}, actor="alice")
    with pytest.raises(SymfonicStoreError):
        store.resume("t-m", "i-1", {"approved": False}, actor="bob")  # an attempt on i-1
    store.mint("t-m", {"name": "approval", "interrupt_id": "i-2", "minted_at": "not a number"})
    store.mint("t-m", {"name": "approval", "interrupt_id": "i-3", "payload": None})  # supersedes
    store.expire("t-m", "i-3", actor="bob")
    store.mint("t-p", {"name": "pending", "interrupt_id": "i-4", "payload": [1, 2.5, "x"]})
    store.record_waiting(
        "t-n",
        [{"interrupt_id": "n" * 32, "value": HITL, "task_id": "task-1", "checkpoint_id": "cp-1",
          "checkpoint_ns": "", "breakpoint": False},
         {"interrupt_id": "o" * 32, "value": {"type": "tool_approval", "name": "wire"},
          "task_id": "task-2", "checkpoint_id": "cp-1", "checkpoint_ns": "", "breakpoint": False}],
        graph="payments",
    )
    store.claim("t-n", "n" * 32, {"decisions": [{"type": "approve"}, {"type": "reject"}]}, actor="carol")
    store.release("t-n", "n" * 32, error="the graph did not take it")
    store.claim("t-n", "n" * 32, {"decisions": [{"type": "approve"}, {"type": "reject"}]}, actor="carol")
    store.confirm("t-n", "n" * 32)
    store.claim("t-n", "o" * 32, {"type": "approve"}, actor="dave")
    store.confirm("t-n", "o" * 32)
