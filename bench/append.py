"""Benchmark 1 -- append: mint-then-resume cycles through the public API on SQLite.

Peers, measured in the same run on the same disk, at ``synchronous=FULL`` (the store's
default) and ``NORMAL``:

(a) raw ``sqlite3`` writing the same rows by hand into the store's own schema (same
    indexes, triggers and pragmas): per event one ``BEGIN IMMEDIATE``, the event row
    (JSON data, SHA-256 hash chain), the projection row, ``COMMIT``;
(b) the ``eventsourcing`` library saving equivalent events (an aggregate minted, then
    resumed), one per transaction.

Targets: >= 0.75x (a) at FULL, >= 0.5x (a) at NORMAL, >= 1.0x (b) at both.
Each contender runs ``rounds`` times, interleaved; the best round of each is compared.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from bench.harness import parser, rate, report, say, scratch_dir, timed
from symfonic_store import InterruptStore, build_interrupt_marker, new_interrupt_id
from symfonic_store.events import GENESIS_HASH, MINTED, RESUMED

PAYLOAD = {"action": "refund", "amount": 420, "order": "1181", "currency": "EUR"}
RESPONSE = {"approved": True, "note": "ok"}


def marker(run_id: str) -> dict[str, Any]:
    return build_interrupt_marker(
        name="approval_required",
        interrupt_id=new_interrupt_id(),
        payload=PAYLOAD,
        tool_call_id="call_1",
        run_id=run_id,
    )["_interrupt_pending"]


# --- the store --------------------------------------------------------------------


def run_store(path: Path, mode: str, cycles: int) -> float:
    store = InterruptStore(f"sqlite:///{path}", sqlite_synchronous=mode)
    store.setup()
    markers = [(f"thread-{uuid.uuid4().hex[:10]}", marker("run-1")) for _ in range(cycles)]

    def work() -> None:
        for thread_id, m in markers:
            store.mint(thread_id, m)
            store.resume(thread_id, m["interrupt_id"], RESPONSE, actor="alice")

    seconds, _ = timed(work)
    store.close()
    return seconds


# --- (a) raw sqlite3 ---------------------------------------------------------------


def _hash(prev: str, row: tuple[Any, ...], data: dict[str, Any], at: datetime) -> str:
    thread_id, version, type_, interrupt_id, run_id, actor = row
    body = json.dumps(
        [prev, thread_id, version, type_, interrupt_id, run_id, actor, data, at.isoformat()],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(body.encode()).hexdigest()


INSERT_EVENT = (
    "INSERT INTO symfonic_events (thread_id, version, type, interrupt_id, run_id, actor, "
    "data, occurred_at, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_THREAD = (
    "INSERT INTO symfonic_threads (thread_id, version, last_hash, run_id, pending, "
    "pending_interrupt_id, pending_run_id, pending_minted_at, pending_since) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE_THREAD = (
    "UPDATE symfonic_threads SET version = ?, last_hash = ?, pending = NULL, "
    "pending_interrupt_id = NULL, pending_run_id = NULL, pending_minted_at = NULL, "
    "pending_since = NULL WHERE thread_id = ?"
)


def run_raw(path: Path, mode: str, cycles: int) -> float:
    InterruptStore(f"sqlite:///{path}").setup()  # the store's schema: same indexes, triggers
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA synchronous={mode}")
    markers = [(f"thread-{uuid.uuid4().hex[:10]}", marker("run-1")) for _ in range(cycles)]

    def work() -> None:
        for thread_id, m in markers:
            iid = m["interrupt_id"]
            at = datetime.now(UTC)
            key = (thread_id, 1, MINTED, iid, m["run_id"], None)
            h1 = _hash(GENESIS_HASH, key, m, at)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(INSERT_EVENT, (*key, json.dumps(m), at.replace(tzinfo=None).isoformat(" "), h1))
            conn.execute(
                INSERT_THREAD,
                (thread_id, 1, h1, m["run_id"], json.dumps(m), iid, m["run_id"], m["minted_at"], m["minted_at"]),
            )
            conn.execute("COMMIT")
            at = datetime.now(UTC)
            data = {"response": RESPONSE}
            key = (thread_id, 2, RESUMED, iid, None, "alice")
            h2 = _hash(h1, key, data, at)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(INSERT_EVENT, (*key, json.dumps(data), at.replace(tzinfo=None).isoformat(" "), h2))
            conn.execute(UPDATE_THREAD, (2, h2, thread_id))
            conn.execute("COMMIT")

    seconds, _ = timed(work)
    conn.close()
    return seconds


# --- (b) eventsourcing --------------------------------------------------------------


class Interrupt(Aggregate):
    """The peer's equivalent of an interrupt: minted, then resumed."""

    @event("Minted")
    def __init__(self, thread_id: str, marker: dict[str, Any]) -> None:
        self.thread_id = thread_id
        self.marker = marker
        self.response: dict[str, Any] | None = None

    @event("Resumed")
    def resume(self, actor: str, response: dict[str, Any]) -> None:
        self.actor = actor
        self.response = response


class Approvals(Application[uuid.UUID]):
    pass



def run_eventsourcing(path: Path, mode: str, cycles: int) -> float:
    from eventsourcing.sqlite import SQLiteConnectionPool

    # eventsourcing sets WAL itself but leaves `synchronous` at SQLite's default (FULL):
    # give its connections the same pragma as the other contenders.
    original = SQLiteConnectionPool._create_connection

    def with_pragma(self: Any) -> Any:
        connection = original(self)
        connection._sqlite_conn.execute(f"PRAGMA synchronous={mode}")
        return connection

    SQLiteConnectionPool._create_connection = with_pragma  # type: ignore[method-assign]
    try:
        app = Approvals(
            env={
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": str(path),
                "IS_SNAPSHOTTING_ENABLED": "n",
            }
        )
        markers = [(f"thread-{uuid.uuid4().hex[:10]}", marker("run-1")) for _ in range(cycles)]

        def work() -> None:
            for thread_id, m in markers:
                interrupt = Interrupt(thread_id, m)
                app.save(interrupt)
                interrupt.resume("alice", RESPONSE)
                app.save(interrupt)

        seconds, _ = timed(work)
        app.close()
    finally:
        SQLiteConnectionPool._create_connection = original  # type: ignore[method-assign]
    return seconds


CONTENDERS = {"store": run_store, "raw sqlite3": run_raw, "eventsourcing": run_eventsourcing}
GOALS = {"FULL": 0.75, "NORMAL": 0.5}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__.splitlines()[1])
    p.add_argument("--cycles", type=int, default=None, help="mint+resume cycles per round")
    p.add_argument("--rounds", type=int, default=None)
    args = p.parse_args(argv)
    cycles = args.cycles or (200 if args.quick else 2000)
    rounds = args.rounds or (1 if args.quick else 3)
    events = 2 * cycles
    say(f"[1] append: {cycles} mint+resume cycles ({events} events, one transaction each), "
        f"best of {rounds} interleaved rounds")
    for mode in ("FULL", "NORMAL"):
        best: dict[str, float] = {}
        with scratch_dir() as tmp:
            for r in range(rounds):
                for name, fn in CONTENDERS.items():
                    seconds = fn(tmp / f"{name.replace(' ', '_')}-{mode}-{r}.db", mode, cycles)
                    best[name] = min(best.get(name, float("inf")), seconds)
                    say(f"  {mode:6} round {r + 1} {name:14} {rate(events, seconds):>10} events")
        ours = events / best["store"]
        raw = events / best["raw sqlite3"]
        es = events / best["eventsourcing"]
        say(f"  {mode}: store {ours:,.0f}/s, raw sqlite3 {raw:,.0f}/s, eventsourcing {es:,.0f}/s")
        goal = GOALS[mode]
        report("1 append", f"vs raw sqlite3, synchronous={mode}", f"{ours:,.0f} events/s vs "
               f"{raw:,.0f}/s", ratio=ours / raw, goal=f">= {goal}x", met=ours / raw >= goal)
        report("1 append", f"vs eventsourcing, synchronous={mode}", f"{ours:,.0f} events/s vs "
               f"{es:,.0f}/s", ratio=ours / es, goal=">= 1.0x", met=ours / es >= 1.0)


if __name__ == "__main__":
    main()
