"""Tests of the bound, not of a time (SPEC §17): what a read costs the database, measured on
a small fixture and on one 100 times larger, never with a clock.

- :func:`load` writes valid logs straight into the event table (bench/bulk_load.py's rows:
  hash chains, audit columns; plus LangGraph mints, :func:`native_rows`, and threads of any
  events, :func:`thread_rows`) and rebuilds the
  projection from them, then has PostgreSQL gather its statistics, as a real database of
  that size has them.
- :class:`Probe` watches every statement an operation sends (a ``before_cursor_execute``
  listener: the store then runs everything through SQLAlchemy, fast path off) and, before
  each one runs, asks the database what it will touch: on SQLite ``EXPLAIN QUERY PLAN``
  (:attr:`Probe.scans` lists a plan step that reads a whole table of the store), and the
  virtual machine's steps the operation executes (:attr:`Probe.steps`, counted by a
  progress handler: they grow with every row read); on PostgreSQL ``EXPLAIN (ANALYZE,
  BUFFERS, FORMAT JSON)`` of the statement, in a savepoint rolled back (or a transaction,
  outside one), summed into :attr:`Probe.rows` (rows each plan node produced or filtered
  out) and :attr:`Probe.buffers` (shared buffers hit or read).
- :func:`assert_bounded` compares two probes: the large fixture's figures may exceed the
  small one's by a small constant per statement (a B-tree one level deeper), no more.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from symfonic_store import InterruptStore
from symfonic_store.audit_columns import derive as derive_audit_columns
from symfonic_store.db.schema import events
from symfonic_store.events import ASSIGNED, ESCALATED, GENESIS_HASH, MINTED, RESUMED, event_hash
from symfonic_store.native import NATIVE_SOURCE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: bench/
from bench.bulk_load import ThreadSpec, rows

STORE_TABLES = ("symfonic_events", "symfonic_threads", "symfonic_open_interrupts", "symfonic_audit_rows")
"""The tables a bounded read never scans: the log, the projection and the audit's rows."""
SCALE = 100
"""How much larger the large fixture is than the small one."""

__all__ = [
    "SCALE", "Probe", "ThreadSpec", "assert_bounded", "crowded_thread", "load", "native_mint",
    "native_rows", "probe", "thread_rows",
]


# --- fixtures ---------------------------------------------------------------------------


def native_mint(i: int, minted_at: float, *, graph: str = "g", name: str = "approve") -> dict[str, Any]:
    """The data of a LangGraph interrupt's mint (the ``i``-th of ``graph``, named ``name``)."""
    return {
        "name": name, "payload": {"amount": i}, "source": NATIVE_SOURCE,
        "minted_at": minted_at, "tool_call_id": None, "run_id": None,
        "graph": graph, "checkpoint_id": f"c-{i}", "checkpoint_ns": "", "task_id": f"task-{i}",
        "breakpoint": False,
    }


def thread_rows(
    thread_id: str,
    items: Sequence[tuple[str, str | None, str | None, dict[str, Any]]],
    *,
    start: datetime,
    tenant: str | None = None,
) -> Iterator[dict[str, Any]]:
    """One thread's rows, versions 1.. and hash-chained: each ``(type, interrupt_id, actor,
    data)`` of ``items`` in turn, a microsecond apart from ``start``, its mints for
    ``tenant``."""
    prev = GENESIS_HASH
    for version, (type_, interrupt_id, actor, data) in enumerate(items, 1):
        at = start + timedelta(microseconds=version)
        prev = event_hash(
            prev, thread_id=thread_id, version=version, type=type_, interrupt_id=interrupt_id,
            run_id=None, actor=actor, data=data, occurred_at=at,
        )
        yield {
            "thread_id": thread_id, "version": version, "type": type_, "interrupt_id": interrupt_id,
            "run_id": None, "actor": actor, "data": data, "occurred_at": at, "hash": prev,
            **derive_audit_columns(type_, data, at),
            "tenant": tenant if type_ == MINTED else None,
        }


def crowded_thread(
    thread_id: str, markers: int, natives: int, *, start: datetime, tenant: str | None = None,
    stale: int = 0,
) -> list[dict[str, Any]]:
    """A thread crowded with other interrupts: ``markers`` seed markers (``i-{k}``) each
    minted, escalated to ``lead`` and resumed; ``natives`` LangGraph interrupts
    (``n-{k}``) left open, the first ``stale`` of them minted two days before ``start``;
    and last a seed marker ``i-last``, escalated, waiting."""
    at = start.timestamp()
    items: list[tuple[str, str | None, str | None, dict[str, Any]]] = []
    escalation = {"after": 60.0, "to": ["lead"]}
    for k in range(markers):
        iid = f"i-{k:07d}"
        items += [
            (MINTED, iid, "agent", _marker(iid, at + k)),
            (ESCALATED, iid, None, escalation),
            (RESUMED, iid, "bob", {"response": {"approved": True}}),
        ]
    items += [
        (MINTED, f"n-{k:07d}", "agent", native_mint(k, at + markers + k - (2 * 86_400 if k < stale else 0)))
        for k in range(natives)
    ]
    items += [(MINTED, "i-last", "agent", _marker("i-last", at + markers + natives)),
              (ESCALATED, "i-last", None, escalation)]
    return list(thread_rows(thread_id, items, start=start, tenant=tenant))


def _marker(interrupt_id: str, minted_at: float) -> dict[str, Any]:
    return {"name": "approval_required", "interrupt_id": interrupt_id, "payload": {"amount": 1},
            "tool_call_id": None, "run_id": None, "minted_at": minted_at}


def native_rows(
    prefix: str, count: int, *, minted_at: float, graph: str = "g", name: str = "approve",
    tenant: str | None = None, assigned_to: str | None = None,
) -> Iterator[dict[str, Any]]:
    """``count`` threads ``{prefix}-{i}`` of one event each: a LangGraph interrupt's mint
    (``n-{i}``, of ``graph``, named ``name``, for ``tenant``), minted ``minted_at`` plus
    ``i`` microseconds, left open; with ``assigned_to`` (a principal or ``role:<name>``)
    an ``interrupt.assigned`` follows each mint."""
    for i in range(count):
        thread_id = f"{prefix}-{i:07d}"
        at = datetime.fromtimestamp(minted_at, UTC) + timedelta(microseconds=i)
        data = native_mint(i, minted_at + i * 1e-6, graph=graph, name=name)
        interrupt_id = f"n-{i:07d}"
        mint_hash = event_hash(
            GENESIS_HASH, thread_id=thread_id, version=1, type=MINTED,
            interrupt_id=interrupt_id, run_id=None, actor=None, data=data, occurred_at=at,
        )
        yield {
            "thread_id": thread_id, "version": 1, "type": MINTED, "interrupt_id": interrupt_id,
            "run_id": None, "actor": None, "data": data, "occurred_at": at, "hash": mint_hash,
            **derive_audit_columns(MINTED, data, at),
            "tenant": tenant,  # as bench/bulk_load.py's rows: one executemany binds them all
        }
        if assigned_to is not None:
            role = assigned_to.startswith("role:")
            given = {"to": assigned_to[5:] if role else assigned_to, "kind": "role" if role else "principal"}
            later = at + timedelta(microseconds=1)
            yield {
                "thread_id": thread_id, "version": 2, "type": ASSIGNED, "interrupt_id": interrupt_id,
                "run_id": None, "actor": "lead", "data": given, "occurred_at": later,
                "hash": event_hash(
                    mint_hash, thread_id=thread_id, version=2, type=ASSIGNED,
                    interrupt_id=interrupt_id, run_id=None, actor="lead", data=given, occurred_at=later,
                ),
                **derive_audit_columns(ASSIGNED, given, later),
                "tenant": None,
            }


def load(
    store: InterruptStore,
    specs: Sequence[ThreadSpec] = (),
    *,
    extra: Iterator[dict[str, Any]] | Sequence[dict[str, Any]] = (),
    start: datetime | None = None,
) -> None:
    """Write the threads of ``specs`` (bench/bulk_load.py's rows, from ``start``) and the
    rows of ``extra`` into the event table, rebuild the projection, and on PostgreSQL
    ANALYZE the store's tables."""
    insert = events.insert()
    chunk: list[dict[str, Any]] = []
    with store.engine.connect() as conn:
        for row in [*rows(list(specs), start=start), *extra]:
            chunk.append(row)
            if len(chunk) >= 5000:
                with conn.begin():
                    conn.execute(insert, chunk)
                chunk = []
        if chunk:
            with conn.begin():
                conn.execute(insert, chunk)
    store.rebuild_projection()
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            for table in (*STORE_TABLES, "symfonic_claims", "symfonic_wakeups"):
                conn.exec_driver_sql(f"ANALYZE {table}")


# --- probes -----------------------------------------------------------------------------

_DML = re.compile(r"^\s*(SELECT|UPDATE|DELETE|INSERT|WITH)\b", re.IGNORECASE)
_SCAN = re.compile(r"^SCAN (\w+)")


@dataclass
class Probe:
    """What the statements sent while it listened cost (see the module doc)."""

    dialect: str
    statements: list[str] = field(default_factory=list)
    plans: list[tuple[str, list[str]]] = field(default_factory=list)
    """SQLite: each statement and its ``EXPLAIN QUERY PLAN`` steps."""
    steps: int = 0
    """SQLite: virtual machine instructions executed by the operation's statements."""
    rows: int = 0
    """PostgreSQL: rows the plan nodes of the statements produced or filtered out."""
    buffers: int = 0
    """PostgreSQL: shared buffers the statements hit or read."""
    explained: list[tuple[str, int, int]] = field(default_factory=list)
    """PostgreSQL: each statement explained, with its rows and buffers."""

    @property
    def scans(self) -> list[tuple[str, str]]:
        """SQLite: ``(step, statement)`` of every plan step that reads a whole store table
        (a ``SCAN`` without an index, or one through an index without a ``LIMIT`` to stop it)."""
        found = []
        for statement, plan in self.plans:
            for step in plan:
                m = _SCAN.match(step)
                if m is None or m.group(1) not in STORE_TABLES:
                    continue
                if "USING" in step and re.search(r"\bLIMIT\b", statement, re.IGNORECASE):
                    continue
                found.append((step, statement))
        return found


def _pg_figures(node: dict[str, Any]) -> int:
    loops = int(node.get("Actual Loops", 1) or 1)
    own = (
        node.get("Actual Rows", 0)
        + node.get("Rows Removed by Filter", 0)
        + node.get("Rows Removed by Index Recheck", 0)
        + node.get("Rows Removed by Join Filter", 0)
    ) * loops
    return int(own) + sum(_pg_figures(child) for child in node.get("Plans", []))


@contextmanager
def probe(store: InterruptStore) -> Iterator[Probe]:
    """Listen to ``store``'s statements while the block runs (see the module doc)."""
    engine = store.engine
    found = Probe(engine.dialect.name)
    counting = [True]
    counted: set[Any] = set()

    def step() -> int:
        if counting[0]:
            found.steps += 1
        return 0

    def explain_sqlite(dbapi: Any, statement: str, params: Any) -> None:
        counting[0] = False
        try:
            plan = [str(r[3]) for r in dbapi.execute("EXPLAIN QUERY PLAN " + statement, params)]
        finally:
            counting[0] = True
        found.plans.append((statement, plan))
        if dbapi not in counted:
            dbapi.set_progress_handler(step, 1)
            counted.add(dbapi)

    def explain_postgres(dbapi: Any, statement: str, params: Any) -> None:
        if statement.lstrip()[:6].upper() == "INSERT":
            return  # reads nothing but its unique keys
        from psycopg.pq import TransactionStatus

        idle = dbapi.info.transaction_status == TransactionStatus.IDLE
        with dbapi.cursor() as cur:
            if idle:
                if dbapi.autocommit:
                    cur.execute("BEGIN")
            else:
                cur.execute("SAVEPOINT bounded_probe")
            try:
                cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
                (result,) = cur.fetchone()
            finally:
                if idle:
                    cur.execute("ROLLBACK")
                else:
                    cur.execute("ROLLBACK TO SAVEPOINT bounded_probe")
                    cur.execute("RELEASE SAVEPOINT bounded_probe")
        top = result[0]["Plan"]
        rows_touched = _pg_figures(top)
        buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
        found.rows += rows_touched
        found.buffers += buffers
        found.explained.append((statement, rows_touched, buffers))

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if not _DML.match(statement):
            return
        params = parameters[0] if executemany and parameters else parameters
        found.statements.append(statement)
        if found.dialect == "sqlite":
            explain_sqlite(cursor.connection, statement, params)
        else:
            explain_postgres(cursor.connection, statement, params)

    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        yield found
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
        for dbapi in counted:
            dbapi.set_progress_handler(None, 1)


def assert_bounded(small: Probe, large: Probe, *, slack: int = 4, rows: int = 0) -> None:
    """The large fixture's operation touched no more than the small one's, but for
    ``slack`` per statement (a B-tree level more); and on SQLite no plan scans a store
    table in either.

    ``rows``: the rows the operation looks up one by one through an index (a page's
    interrupts' tenants, say). PostgreSQL reads a small fixture's table whole -- a page or
    two -- where it reads the large one's through the index, an index leaf and a heap
    page per row: its buffers may then exceed the small one's by a few per such row, a
    constant that does not grow with the store (the rows touched are still held to the
    small fixture's)."""
    assert small.statements and large.statements, "no statement was seen"

    allowance = slack * max(len(small.statements), len(large.statements))
    if large.dialect == "sqlite":
        assert not small.scans and not large.scans, large.scans or small.scans
        assert large.steps <= small.steps * 1.1 + allowance * 10, (small.steps, large.steps)
        return
    detail = (small.explained, large.explained)
    assert large.rows <= small.rows * 1.1 + allowance, (small.rows, large.rows, detail)
    pages = allowance + 3 * rows
    assert large.buffers <= small.buffers * 1.1 + pages, (small.buffers, large.buffers, detail)
