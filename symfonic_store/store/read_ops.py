"""The plans of reads: state, pending lists, history, the event stream, audit, verify."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from .. import cursors, validation
from ..db.executor import executor_for
from ..db.statements.log import (
    by_version,
    events_after,
    events_behind_horizon,
    interrupt_history_query,
    read_horizon,
    read_page,
    thread_events_query,
)
from ..db.statements.native import claim_row, claim_rows, open_row, open_rows, read_open_interrupts
from ..db.statements.tenants import Scope, mint_tenants, scope_of
from ..db.statements.threads import load_thread, pending_threads
from ..errors import InvalidInputError
from ..events import StoredEvent
from ..native import MARKER_SOURCE, NATIVE_SOURCE
from ..projection import ThreadState
from ..protocol import PENDING_KEY, interrupt_pending_is_current
from ..services.audit import AuditRecord, audit
from ..services.replay import Replay
from ..services.verify import VerifyReport, verify
from . import settlement
from .plan import Emit, Op, Plan
from .settings import Settings
from .vote_ops import shown_assignee

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class ReaderLag:
    """How far gap-safe readers of :meth:`~symfonic_store.InterruptStore.events` are behind."""

    events: int
    """Committed events not readable yet: they wait for an older writer to end."""
    writers: int
    """The store's write transactions in flight when it was measured."""
    oldest_writer_seconds: float | None
    """How long the oldest of them had been open; None when none is (or, on PostgreSQL,
    when the server does not show this role that session's start)."""




PAGE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class PendingKey:
    """An item's place in :meth:`ReadOps.list_pending`'s order: its time, its kind (0: a
    seed marker, 1: an open LangGraph interrupt; markers first at one time), thread and
    interrupt."""

    at: float
    kind: int
    thread_id: str
    interrupt_id: str

    def __post_init__(self) -> None:
        if self.kind not in (0, 1):
            raise InvalidInputError("after", "not a cursor of list_pending() (pass an item's cursor as it was given)")

    def marker_bound(self) -> tuple[float, str]:
        """The markers after it are those after this ``(pending_since, thread_id)``. After
        a native item every marker of its time came before it: the next time on, and ""
        sorts before every thread id."""
        if self.kind == 0:
            return self.at, self.thread_id
        return math.nextafter(self.at, math.inf), ""

    def native_bound(self) -> tuple[float, str, str]:
        """The open LangGraph interrupts after it are those after this ``(minted_at,
        thread_id, interrupt_id)``; after a marker, all of its time and later."""
        if self.kind == 1:
            return self.at, self.thread_id, self.interrupt_id
        return self.at, "", ""


def _native_open(row: dict[str, Any]) -> dict[str, Any]:
    """An open LangGraph interrupt as ``open_interrupts()`` lists it."""
    return {
        "thread_id": row["thread_id"],
        "interrupt_id": row["interrupt_id"],
        "name": row["name"],
        "payload": row["payload"],
        "minted_at": row["minted_at"],
        "source": NATIVE_SOURCE,
        "graph": row["graph"],
        "breakpoint": row["breakpoint"],
        "checkpoint_id": row["checkpoint_id"],
        "actor": row["actor"],
    }


def _native_pending(row: dict[str, Any]) -> dict[str, Any]:
    """An open LangGraph interrupt as ``list_pending()`` lists it: the marker's keys."""
    return {
        "name": row["name"],
        "interrupt_id": row["interrupt_id"],
        "payload": row["payload"],
        "tool_call_id": None,
        "run_id": None,
        "minted_at": row["minted_at"],
        "thread_id": row["thread_id"],
        "source": NATIVE_SOURCE,
        "graph": row["graph"],
    }


def _scope(tenant: str | None, tenants: Iterable[str | None] | None) -> Scope:
    """The scope of a read given ``tenant=`` and ``tenants=`` (both: their intersection)."""
    one = None if tenant is None else frozenset({validation.text_id(tenant, "tenant")})
    if tenants is None:
        return one
    many = scope_of(
        None if t is None else validation.text_id(t, "tenants") for t in tenants
    )
    return many if one is None or many is None else one & many


def _state_of(thread: ThreadState | None) -> dict[str, Any]:
    if thread is None:
        return {PENDING_KEY: None, "run_id": None}
    return thread.as_state()



class ReadOps(Settings):
    """The reads of the projection and of the log."""

    def _thread(self, thread_id: Any) -> Op[ThreadState | None]:
        t = validation.required_id(thread_id, "thread_id")
        return Op(partial(load_thread, thread_id=t, for_update=False), write=False)

    def pending(self, thread_id: str) -> Plan[dict[str, Any] | None]:
        """The thread's projected ``_interrupt_pending`` (the seed's shape), or None."""
        thread = yield self._thread(thread_id)
        pending: dict[str, Any] | None = _state_of(thread)[PENDING_KEY]
        return pending

    def state(self, thread_id: str) -> Plan[dict[str, Any]]:
        """``{"_interrupt_pending": ..., "run_id": ...}`` as projected from the events."""
        thread = yield self._thread(thread_id)
        return _state_of(thread)

    def is_current(self, thread_id: str, ttl_seconds: float | None = None) -> Plan[bool]:
        """The seed predicate on the projected state (the store's TTL by default)."""
        ttl = self.ttl(ttl_seconds)
        thread = yield self._thread(thread_id)
        return interrupt_pending_is_current(_state_of(thread), ttl)

    def list_pending(
        self,
        *,
        older_than: float | None = None,
        limit: int | None = None,
        tenant: str | None = None,
        tenants: Iterable[str | None] | None = None,
        after: str | None = None,
        thread_id: str | None = None,
        name: str | None = None,
        assigned_to: str | None = None,
    ) -> Plan[list[dict[str, Any]]]:
        """Pending interrupts across all threads, oldest first: each marker plus ``thread_id``
        and ``cursor``.

        ``thread_id``: only that thread's; ``name``: only the interrupts of that name;
        ``assigned_to``: only those whose latest assignment (``assign``) is to that
        principal, or with ``"role:<name>"`` to that role (all read in SQL over an index, so
        a page of them costs the page: the inbox's filters, SPEC §17).

        ``tenant``: only the interrupts minted for that tenant (SPEC §15); ``tenants``:
        only those minted for one of them, ``None`` among them for the interrupts minted
        without a tenant (how the service scopes a principal's inbox). ``after``: an
        item's ``cursor``, to list the items after it (SPEC §17: keyset paging on the
        projection's time indexes; an item is on exactly one page however others mint).

        Raises:
            InvalidInputError: (a ValueError) ``after`` is not an item's cursor, or
                ``assigned_to`` names no principal or role.
        """
        age = validation.ttl(older_than, "older_than")
        assignee = None if assigned_to is None else shown_assignee(assigned_to, "assigned_to")
        n = validation.positive_int(limit, "limit", optional=True)
        scope = _scope(tenant, tenants)
        key = None if after is None else PendingKey(*cursors.decode(after, cursors.PENDING, cursors.PENDING_SHAPE))
        only = None if thread_id is None else validation.required_id(thread_id, "thread_id")
        if name is not None and not isinstance(name, str):
            raise InvalidInputError("name", f"must be a string, got {type(name).__name__}")

        def run(conn: Connection) -> list[dict[str, Any]]:
            since_before = None if age is None else time.time() - age
            rows = pending_threads(
                conn, since_before=since_before, limit=n, scope=scope,
                after=None if key is None else key.marker_bound(), thread=only, name=name,
                assigned_to=assignee,
            )
            markers = [
                ((r.pending_since or 0.0, 0, r.thread_id, r.pending_interrupt_id or ""),
                 {**(r.pending or {}), "thread_id": r.thread_id})
                for r in rows
            ]
            natives = [
                ((row["minted_at"], 1, row["thread_id"], row["interrupt_id"]), _native_pending(row))
                for row in read_open_interrupts(
                    conn, since_before=since_before, limit=n, scope=scope,
                    after=None if key is None else key.native_bound(), thread=only, name=name,
                    assigned_to=assignee,
                )
            ]
            # Markers before natives of the same time: a cursor's kind says where it is.
            merged = sorted(markers + natives, key=lambda pair: pair[0][:2])
            return [
                {**item, "cursor": cursors.encode(cursors.PENDING, list(k))}
                for k, item in (merged if n is None else merged[:n])
            ]

        items: list[dict[str, Any]] = yield Op(run, write=False)
        return items

    def interrupt_tenants(
        self, keys: Iterable[tuple[str, str]]
    ) -> Plan[dict[tuple[str, str], str | None]]:
        """The tenant each of the ``(thread_id, interrupt_id)`` was minted for (None: without
        one); an interrupt never minted is not among the keys returned (SPEC §15)."""
        wanted = sorted({(str(t), str(i)) for t, i in keys})

        def run(conn: Connection) -> dict[tuple[str, str], str | None]:
            return mint_tenants(conn, wanted)

        found: dict[tuple[str, str], str | None] = yield Op(run, write=False)
        return found

    def open_interrupts(
        self, thread_id: str, *, interrupt_id: str | None = None
    ) -> Plan[list[dict[str, Any]]]:
        """Everything the thread waits on, oldest first: the seed marker and LangGraph's own;
        with ``interrupt_id``, only that interrupt, if it is open (read by its key: the
        thread's other open interrupts cost nothing).

        Each is a dict with ``thread_id``, ``interrupt_id``, ``name``, ``payload``,
        ``minted_at`` (Unix seconds) and ``source`` (``"marker"`` or ``"langgraph"``);
        LangGraph's also carry ``graph``, ``breakpoint``, ``checkpoint_id``, the
        requester (``actor``) and, while an answer is in flight, ``claimed_by``; an
        answer whose outcome is unknown (SPEC §12) adds ``outcome_unknown: True`` and
        ``claimed_at`` (Unix seconds).
        """
        t = validation.required_id(thread_id, "thread_id")
        only = None if interrupt_id is None else validation.required_id(interrupt_id, "interrupt_id")

        def run(conn: Connection) -> list[dict[str, Any]]:
            thread = load_thread(conn, t, for_update=False)
            if thread is None:
                return []
            items = []
            if thread.pending is not None and only in (None, thread.pending_interrupt_id):
                items.append(
                    {
                        "thread_id": t,
                        "interrupt_id": thread.pending_interrupt_id,
                        "name": thread.pending.get("name"),
                        "payload": thread.pending.get("payload"),
                        "minted_at": thread.pending_since,
                        "source": MARKER_SOURCE,
                    }
                )
            if only is None:
                claims, rows = claim_rows(conn, t), open_rows(conn, t)
            else:
                one, claim = open_row(conn, t, only), claim_row(conn, t, only)
                claims = {} if claim is None else {only: claim}
                rows = [] if one is None else [one]
            for row in rows:
                item = _native_open(row)
                held = claims.get(row["interrupt_id"])
                if held is not None:
                    item["claimed_by"] = held["actor"]
                    if settlement.unknown_record(conn, t, row["interrupt_id"], held) is not None:
                        item["outcome_unknown"] = True
                        item["claimed_at"] = held["claimed_at"]
                items.append(item)
            return sorted(items, key=lambda i: i["minted_at"] or 0.0)

        items: list[dict[str, Any]] = yield Op(run, write=False)
        return items

    def history(self, thread_id: str, *, interrupt_id: str | None = None) -> Plan[list[StoredEvent]]:
        """The thread's events in order; with ``interrupt_id``, only that interrupt's (read
        through its index: what the thread holds besides costs nothing)."""
        t = validation.required_id(thread_id, "thread_id")
        if interrupt_id is None:
            query = thread_events_query(t)
        else:
            query = interrupt_history_query(t, validation.required_id(interrupt_id, "interrupt_id"))
        events: list[StoredEvent] = yield Op(partial(read_page, query=query), write=False)
        return events if interrupt_id is None else sorted(events, key=by_version)

    def events(self, *, after: int = 0, limit: int | None = None) -> Plan[list[StoredEvent]]:
        """Events after a global position, in a commit-safe order (page with ``limit``).

        Pass the position of the last event you saw as ``after``: each event comes once,
        and one that commits late is never skipped (I11). On SQLite the order is
        position order; on PostgreSQL, whose writers commit in parallel, it is commit-safe
        order -- position order within each thread, though positions across threads may
        then not be strictly increasing (see docs/reliability.md).
        """
        a = validation.non_negative_int(after, "after")
        n = validation.positive_int(limit, "limit", optional=True)
        events: list[StoredEvent] = yield Op(partial(events_after, after=a, limit=n), write=False)
        return events

    def iter_events(self, *, after: int = 0, page_size: int = PAGE_SIZE) -> Plan[None]:
        """Every event after ``after`` in the order of :meth:`events`, page by page."""
        cursor = validation.non_negative_int(after, "after")
        size = validation.positive_int(page_size, "page_size")
        assert size is not None
        while True:
            page: list[StoredEvent] = yield Op(
                partial(events_after, after=cursor, limit=size), write=False
            )
            yield Emit(page)
            if len(page) < size:
                return
            cursor = page[-1].position

    def reader_lag(self) -> Plan[ReaderLag]:
        """How far gap-safe readers are behind the log, for monitoring (``/metrics``).

        On PostgreSQL :meth:`events` returns an event only once every write transaction
        of the store that started before it has ended (I11): a writer that stays open
        holds readers back. The report says how many committed events wait, and for how
        long the oldest writer still in flight has been open. Always zero on SQLite.
        """

        def run(conn: Connection) -> ReaderLag:
            if not executor_for(conn).reads_below_horizon:
                return ReaderLag(events=0, writers=0, oldest_writer_seconds=None)
            horizon = read_horizon(conn)
            return ReaderLag(
                events=events_behind_horizon(conn, horizon),
                writers=horizon.writers,
                oldest_writer_seconds=horizon.oldest_writer_seconds,
            )

        lag: ReaderLag = yield Op(run, write=False)
        return lag

    def replay(self, thread_id: str, *, until: int | datetime | None = None) -> Plan[None]:
        """Each event of the thread with the state after it; ``until`` a position or time.

        Iterate the result (``async for`` on the async store, or ``await`` it for a
        list). The events are read in pages by version, each page in a short read.
        """
        t = validation.required_id(thread_id, "thread_id")
        bound = validation.as_of(until)
        if isinstance(bound, datetime):
            query = thread_events_query(t, until_time=bound)
        else:
            query = thread_events_query(t, until_position=bound)
        fold = Replay(t)
        last_version = 0
        while True:
            page_query = query.where(query.selected_columns.version > last_version).limit(PAGE_SIZE)
            page: list[StoredEvent] = yield Op(partial(read_page, query=page_query), write=False)
            yield Emit(fold.steps(page))
            if len(page) < PAGE_SIZE:
                return
            last_version = page[-1].version

    def audit(
        self,
        *,
        thread_id: str | None = None,
        actor: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        decision: str | None = None,
        tenant: str | None = None,
        tenants: Iterable[str | None] | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Plan[list[AuditRecord]]:
        """One record per interrupt, oldest first: who answered what, and when.

        ``decision`` keeps the records whose reported decision (recorded or derived,
        SPEC §12) is exactly that word; ``tenant`` / ``tenants`` as in :meth:`list_pending`.
        ``limit``: at most that many records; ``after``: a record's ``cursor``, to read
        the records after it (SPEC §17: keyset pages in mint order, each record on exactly
        one page however others append).

        Raises:
            InvalidInputError: (a ValueError) ``after`` is not a record's cursor.
        """
        fn = partial(
            audit,
            thread_id=validation.text_id(thread_id, "thread_id", optional=True),
            actor=validation.text_id(actor, "actor", optional=True),
            since=validation.moment(since, "since"),
            until=validation.moment(until, "until"),
            decision=validation.text_id(decision, "decision", optional=True),
            scope=_scope(tenant, tenants),
            limit=validation.positive_int(limit, "limit", optional=True),
            after=after,
        )
        if after is not None:  # a malformed cursor is refused before any transaction
            cursors.decode(after, cursors.AUDIT, cursors.AUDIT_SHAPE)
        records: list[AuditRecord] = yield Op(fn, write=False)
        return records

    def verify(self, thread_id: str | None = None) -> Plan[VerifyReport]:
        """Check the hash chains, and each thread's projection head against its last event.

        The report names the first problem per thread: a broken link of its chain, or a
        projection head its events no longer reach (events removed from the end of the
        thread). With ``thread_id``, a thread that has no events is a problem too.
        """
        t = validation.text_id(thread_id, "thread_id", optional=True)
        report: VerifyReport = yield Op(partial(verify, thread_id=t), write=False)
        return report
