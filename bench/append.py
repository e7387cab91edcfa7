"""Benchmark 1 -- append: mint-then-resume cycles through the public API on SQLite.

Peers, measured in the same run on the same disk, at ``synchronous=FULL`` (the store's
default) and ``NORMAL``:

(a) raw ``sqlite3`` writing the same rows by hand into the store's own schema (same
    indexes, triggers and pragmas): per event one ``BEGIN IMMEDIATE``, the event row
    (JSON data, SHA-256 hash chain, and the audit columns the store fills in: the
    mint's name, payload, minted-at and native flag, the answer's response and
    decisions), the projection row, ``COMMIT``;
(b) the ``eventsourcing`` library saving equivalent events (an aggregate minted, then
    resumed), one per transaction.

And the CPU cost, at ``synchronous=OFF`` (a measurement setting that takes the fsync out,
never a default): process CPU time (``time.process_time``) per event, the store against (a).

Targets: >= 0.85x (a) at FULL, >= 0.6x (a) at NORMAL, >= 1.0x (b) at both; CPU per event
at OFF within 2x of (a). Each contender keeps its own database file for the whole mode and
runs short batches of cycles, interleaved (every order of the three in turn); each round
gives one ratio, and the median of those paired ratios decides (:func:`bench.harness.paired`).
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

from bench.harness import Batches, paired, parser, report, say, scratch_dir
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


def markers(count: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` (thread id, marker) pairs, each on a new thread, made before any timing."""
    return [(f"thread-{uuid.uuid4().hex[:10]}", marker("run-1")) for _ in range(count)]


# --- the store --------------------------------------------------------------------


class Store:
    def __init__(self, path: Path, mode: str) -> None:
        self.store = InterruptStore(f"sqlite:///{path}", sqlite_synchronous=mode)
        self.store.setup()

    def batch(self, work: list[tuple[str, dict[str, Any]]]) -> None:
        store = self.store
        for thread_id, m in work:
            store.mint(thread_id, m)
            store.resume(thread_id, m["interrupt_id"], RESPONSE, actor="alice")

    def close(self) -> None:
        self.store.close()


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
    "data, occurred_at, hash, audit_name, audit_payload, audit_minted_at, audit_native, "
    "audit_response, audit_decisions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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


class Raw:
    def __init__(self, path: Path, mode: str) -> None:
        InterruptStore(f"sqlite:///{path}").setup()  # the store's schema: same indexes, triggers
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.execute(f"PRAGMA synchronous={mode}")

    def batch(self, work: list[tuple[str, dict[str, Any]]]) -> None:
        conn = self.conn
        for thread_id, m in work:
            iid = m["interrupt_id"]
            at = datetime.now(UTC)
            key = (thread_id, 1, MINTED, iid, m["run_id"], None)
            h1 = _hash(GENESIS_HASH, key, m, at)
            minted_at = datetime.fromtimestamp(m["minted_at"], UTC).replace(tzinfo=None)
            audit = (m["name"], json.dumps(m["payload"]), minted_at.isoformat(" "), 0, None, None)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                INSERT_EVENT,
                (*key, json.dumps(m), at.replace(tzinfo=None).isoformat(" "), h1, *audit),
            )
            conn.execute(
                INSERT_THREAD,
                (thread_id, 1, h1, m["run_id"], json.dumps(m), iid, m["run_id"], m["minted_at"], m["minted_at"]),
            )
            conn.execute("COMMIT")
            at = datetime.now(UTC)
            decision = "approve" if RESPONSE.get("approved") else "reject"
            data = {"response": RESPONSE, "decision": decision}
            key = (thread_id, 2, RESUMED, iid, None, "alice")
            h2 = _hash(h1, key, data, at)
            audit = (None, None, None, None, json.dumps(RESPONSE), json.dumps([decision]))
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                INSERT_EVENT,
                (*key, json.dumps(data), at.replace(tzinfo=None).isoformat(" "), h2, *audit),
            )
            conn.execute(UPDATE_THREAD, (2, h2, thread_id))
            conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


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


class EventSourcing:
    def __init__(self, path: Path, mode: str) -> None:
        from eventsourcing.sqlite import SQLiteConnectionPool

        # eventsourcing sets WAL itself but leaves `synchronous` at SQLite's default
        # (FULL): give its connections the same pragma as the other contenders. The
        # patch stays until close(), as the pool may open connections later.
        self._pool = SQLiteConnectionPool
        self._original = original = SQLiteConnectionPool._create_connection

        def with_pragma(pool: Any) -> Any:
            connection = original(pool)
            connection._sqlite_conn.execute(f"PRAGMA synchronous={mode}")
            return connection

        SQLiteConnectionPool._create_connection = with_pragma  # type: ignore[method-assign]
        self.app = Approvals(
            env={
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": str(path),
                "IS_SNAPSHOTTING_ENABLED": "n",
            }
        )

    def batch(self, work: list[tuple[str, dict[str, Any]]]) -> None:
        app = self.app
        for thread_id, m in work:
            interrupt = Interrupt(thread_id, m)
            app.save(interrupt)
            interrupt.resume("alice", RESPONSE)
            app.save(interrupt)

    def close(self) -> None:
        self.app.close()
        self._pool._create_connection = self._original  # type: ignore[method-assign]


CONTENDERS = {"store": Store, "raw sqlite3": Raw, "eventsourcing": EventSourcing}
GOALS = {"FULL": 0.85, "NORMAL": 0.6}
CPU_GOAL = 2.0


def measure(mode: str, names: list[str], batches: int, per_batch: int) -> Batches:
    """Each contender on its own file; ``batches`` interleaved rounds (one warm-up first)."""
    with scratch_dir() as tmp:
        opened = {name: CONTENDERS[name](tmp / f"{name.replace(' ', '_')}-{mode}.db", mode)
                  for name in names}
        work = {name: markers((batches + 1) * per_batch) for name in names}
        try:
            return paired(
                {
                    name: lambda i, c=opened[name], w=work[name]: c.batch(
                        w[i * per_batch:(i + 1) * per_batch]
                    )
                    for name in names
                },
                rounds=batches,
            )
        finally:
            for c in opened.values():
                c.close()


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__.splitlines()[1])
    p.add_argument("--cycles", type=int, default=None, help="mint+resume cycles per contender and mode")
    p.add_argument("--batch", type=int, default=None, help="cycles per batch")
    args = p.parse_args(argv)
    per_batch = args.batch or 20
    cycles = args.cycles or (400 if args.quick else 4000)
    batches = max(1, cycles // per_batch)
    events = 2 * per_batch
    say(f"[1] append: {batches * per_batch} mint+resume cycles per contender and mode, one "
        f"transaction per event, in {batches} interleaved rounds of {per_batch} cycles "
        f"({events} events) each; median of the paired per-round ratios")
    for mode in ("FULL", "NORMAL"):
        runs = measure(mode, list(CONTENDERS), batches, per_batch)
        rates = {name: events / runs.median(name) for name in CONTENDERS}
        say(f"  {mode}: median batch rate: store {rates['store']:,.0f} events/s, raw sqlite3 "
            f"{rates['raw sqlite3']:,.0f}/s, eventsourcing {rates['eventsourcing']:,.0f}/s")
        goal = GOALS[mode]
        report("1 append", f"vs raw sqlite3, synchronous={mode}",
               f"{rates['store']:,.0f} events/s vs {rates['raw sqlite3']:,.0f}/s",
               ratio=runs.ratios("raw sqlite3", "store"), goal=f">= {goal}x", at_least=goal)
        report("1 append", f"vs eventsourcing, synchronous={mode}",
               f"{rates['store']:,.0f} events/s vs {rates['eventsourcing']:,.0f}/s",
               ratio=runs.ratios("eventsourcing", "store"), goal=">= 1.0x", at_least=1.0)
    runs = measure("OFF", ["store", "raw sqlite3"], batches, per_batch)
    cpu = {name: runs.median(name, clock="cpu") / events * 1e6 for name in ("store", "raw sqlite3")}
    say(f"  OFF: median CPU per event: store {cpu['store']:.0f} us, raw sqlite3 "
        f"{cpu['raw sqlite3']:.0f} us")
    report("1 append", "CPU per event, synchronous=OFF (measurement only), vs raw sqlite3",
           f"{cpu['store']:.0f} us vs {cpu['raw sqlite3']:.0f} us",
           ratio=runs.ratios("store", "raw sqlite3", clock="cpu"),
           goal=f"<= {CPU_GOAL}x", at_most=CPU_GOAL)


if __name__ == "__main__":
    main()
