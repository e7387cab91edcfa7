"""One check of everything a store must still be after a crash or a database fault.

``assert_consistent(store)`` asserts, from the raw tables and through the public API:

- every event row is whole: every non-nullable column is set, the type is known, the
  data is a JSON object, the hash is 64 hex digits (no half-written event);
- its audit columns are what its data gives (``symfonic_store.audit_columns.derive``);
- per thread, versions are exactly 1..n and positions grow with them (I2);
- at most one mint and one ending per (thread, interrupt) (I3, I4);
- ``verify()`` finds every hash chain intact (I9);
- each projection row equals the pure ``fold`` of the thread's history, column by
  column, and there is a row for exactly the threads that have events (I6);
- ``state(t)`` for every thread is the same before and after ``rebuild_projection()``,
  which folds exactly as many events as the table holds.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

import sqlalchemy as sa

from symfonic_store import InterruptStore
from symfonic_store.audit_columns import AUDIT_COLUMNS
from symfonic_store.audit_columns import derive as derive_audit_columns
from symfonic_store.db.schema import events as events_table
from symfonic_store.db.schema import open_interrupts as open_interrupts_table
from symfonic_store.db.schema import threads as threads_table
from symfonic_store.db.statements import thread_row
from symfonic_store.events import ENDINGS, EVENT_TYPES, MINTED
from symfonic_store.projection import fold

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_REQUIRED = ("position", "thread_id", "version", "type", "data", "occurred_at", "hash")


def _raw_events(store: InterruptStore) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(events_table).order_by(events_table.c.position))
        return [dict(r._mapping) for r in rows]


def _raw_threads(store: InterruptStore) -> dict[str, dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(threads_table))
        return {r.thread_id: dict(r._mapping) for r in rows}


def _raw_open(store: InterruptStore) -> dict[tuple[str, str], dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(open_interrupts_table))
        return {(r.thread_id, r.interrupt_id): dict(r._mapping) for r in rows}


def _approx(row: dict[str, Any]) -> dict[str, Any]:
    # Floats travel through the database: compare the mint time to the microsecond.
    return {**row, "minted_at": round(row["minted_at"], 6)}


def assert_consistent(store: InterruptStore) -> dict[str, dict[str, Any]]:
    """Assert the store is whole and its projection is the fold; returns ``state`` per thread."""
    raw = _raw_events(store)
    versions: dict[str, list[tuple[int, int]]] = defaultdict(list)
    mints: Counter[tuple[str, str | None]] = Counter()
    endings: Counter[tuple[str, str | None]] = Counter()
    for row in raw:
        missing = [c for c in _REQUIRED if row[c] is None]
        assert not missing, f"event at position {row['position']} lacks {missing}"
        assert row["type"] in EVENT_TYPES, row
        assert isinstance(row["data"], dict), row
        assert _HEX64.match(row["hash"]), row
        assert row["occurred_at"].tzinfo is not None, row
        copies = derive_audit_columns(row["type"], row["data"], row["occurred_at"])
        assert {c: row[c] for c in AUDIT_COLUMNS} == copies, f"audit columns of position {row['position']}"
        versions[row["thread_id"]].append((row["version"], row["position"]))
        key = (row["thread_id"], row["interrupt_id"])
        if row["type"] == MINTED:
            mints[key] += 1
        elif row["type"] in ENDINGS:
            endings[key] += 1
    for thread_id, pairs in versions.items():
        pairs.sort()
        assert [v for v, _ in pairs] == list(range(1, len(pairs) + 1)), (thread_id, pairs)
        positions = [p for _, p in pairs]
        assert positions == sorted(positions), (thread_id, pairs)
    assert all(n == 1 for n in mints.values()), mints
    assert all(n == 1 for n in endings.values()), endings
    assert set(endings) <= set(mints), "an ending for an interrupt that was never minted"

    report = store.verify()
    assert report.ok, str(report)
    assert report.events_checked == len(raw)

    projection = _raw_threads(store)
    assert set(projection) == set(versions), "projection rows != threads with events"
    before: dict[str, dict[str, Any]] = {}
    opened = {k: _approx(v) for k, v in _raw_open(store).items()}
    folded_open: dict[tuple[str, str], dict[str, Any]] = {}
    # The mint's tenant is a column beside the event, not in what history() reads: the
    # fold of the events as read back leaves it None; the rows carry their mint's.
    tenants = {(r["thread_id"], r["interrupt_id"]): r["tenant"] for r in raw if r["type"] == MINTED}
    for thread_id in sorted(versions):
        history = store.history(thread_id)
        folded = fold(history)[thread_id]
        if folded.pending is not None:
            folded.tenant = tenants[(thread_id, folded.pending_interrupt_id)]
        for interrupt_id, opened_row in folded.open.items():
            opened_row["tenant"] = tenants[(thread_id, interrupt_id)]
        row = dict(projection[thread_id])
        assert row.pop("archived_version") is None, thread_id  # nothing archived here
        assert row == thread_row(folded), thread_id
        folded_open.update({(thread_id, i): _approx(r) for i, r in folded.open.items()})
        before[thread_id] = store.state(thread_id)
        assert before[thread_id] == folded.as_state(), thread_id

    assert opened == folded_open, "open LangGraph interrupts != the fold of their mints"

    assert store.rebuild_projection() == len(raw)
    after = {thread_id: store.state(thread_id) for thread_id in sorted(versions)}
    assert after == before
    assert _raw_threads(store) == projection
    assert {k: _approx(v) for k, v in _raw_open(store).items()} == opened
    return before
