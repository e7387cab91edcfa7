"""The append path: lock a thread, seal new events into its hash chain, write them and
the updated projection row in the same transaction.

Concurrency is kept by the database. On SQLite a write transaction starts with
``BEGIN IMMEDIATE`` (one writer at a time), so positions commit in order. On PostgreSQL
the thread's projection row is locked ``FOR UPDATE`` and appends to different threads
commit in parallel; readers stay gap-safe by reading below the writers' horizon
(:func:`~symfonic_store.db.statements.read_horizon`). In both, the unique ``(thread_id, version)``
key turns any lost race into an integrity error, which :func:`run_write` retries (unless
the thread's projection row is behind its log, which no retry mends: see
:mod:`symfonic_store.projection_gaps`). Only those: an integrity error that is not a lost race (a trigger, NOT NULL) is the database
refusing the write, and fails at once (see :mod:`symfonic_store.db.translate`).

A store method's write to one thread tries the single-append path first
(:mod:`.single`): the writers here then take the thread's head from the store's
:class:`Heads` instead of reading the row, and :func:`flush` swaps the head (or keeps the
rows for PostgreSQL's one call); :class:`OneAppend` is that write's record.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from ..audit_columns import copied_key
from ..db.executor import executor_for
from ..db.executors.base import NeedsDatabase
from ..db.statements.log import insert_events, was_minted
from ..db.statements.native import (
    assign_open_interrupts,
    delete_open_interrupts,
    insert_open_interrupts,
)
from ..db.statements.threads import (
    insert_threads,
    load_thread,
    load_thread_probing_mint,
    update_thread_at_head,
    update_threads,
)
from ..db.translate import translate_errors
from ..errors import ConcurrencyConflictError, SymfonicStoreError
from ..event_types import assignee_of
from ..events import ASSIGNED, ENDINGS, MINTED, NewEvent, canonical_json, seal
from ..projection import ThreadState, apply, is_native_mint, open_from_event
from ..projection_gaps import note_opened, refuse_projection_behind, watching
from ..protocol import MARKER_KEYS

T = TypeVar("T")

WRITE_ATTEMPTS = 5
HEADS_KEPT = 4096
"""How many threads' heads a store keeps (:class:`Heads`)."""


class Heads:
    """The heads of the threads a store appended to last: a bounded LRU of
    :class:`ThreadState` copies, put only after the store's own commits, dropped on any
    failure. A head found here is a guess: the single-append path writes only if the
    thread's row still holds that version and hash (else it falls back)."""

    __slots__ = ("_lock", "_states", "size")

    def __init__(self, size: int = HEADS_KEPT) -> None:
        self.size = size
        self._states: OrderedDict[str, ThreadState] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread_id: str) -> ThreadState | None:
        """A copy of the head kept for ``thread_id`` (the caller may fold into it)."""
        with self._lock:
            state = self._states.get(thread_id)
            if state is None:
                return None
            self._states.move_to_end(thread_id)
        return _copy(state)

    def __contains__(self, thread_id: str) -> bool:
        return thread_id in self._states

    def put(self, state: ThreadState, *, copy: bool = True) -> None:
        """Keep ``state`` (a copy of it, unless its owner hands it over: ``copy=False``)."""
        kept = _copy(state) if copy else state
        with self._lock:
            self._states[state.thread_id] = kept
            self._states.move_to_end(state.thread_id)
            while len(self._states) > self.size:
                self._states.popitem(last=False)

    def drop(self, thread_id: str) -> None:
        with self._lock:
            self._states.pop(thread_id, None)


def _copy(state: ThreadState) -> ThreadState:
    """A copy as loading the row gives it (the open LangGraph interrupts live in their
    table). The pending marker is shared: folding replaces it, never changes it."""
    return ThreadState(
        state.thread_id, state.version, state.last_hash, state.run_id, state.pending,
        state.pending_since, state.tenant, state.assigned_to,
    )


class StaleHead(Exception):
    """The thread's row no longer holds the cached head: the single append falls back."""


@dataclass(slots=True)
class OneAppend:
    """One write of a store method on one thread, as :func:`run_write` or the single-append
    path (:mod:`.single`) runs it: the writers it opened, for the head cache.

    ``mode``: None -- the transactional path (writers read their rows under the lock);
    ``"transaction"`` -- heads from the cache, written with a compare-and-swap on the
    thread's row in the same transaction (SQLite); ``"call"`` -- heads from the cache,
    nothing sent: :func:`flush` keeps the rows for one database call (PostgreSQL).
    """

    heads: Heads
    mode: str | None
    writers: list[ThreadWriter] = dataclasses.field(default_factory=list)
    wrote: int = 0
    proven: bool = False
    """An outcome that writes nothing, proven by a fact that stays true (a mint seen)."""
    probe: str | None = None
    """``"call"``: the interrupt whose "already minted?" the database call checks."""
    kept: list[Kept] = dataclasses.field(default_factory=list)
    """``"call"``: what :func:`flush` would have written."""

    def remember(self) -> None:
        """After the commit: keep the head of every writer that wrote all it appended."""
        for w in self.writers:
            if w._existed and not w.new_events:
                # The writer is done with its state (committed): handed over, not copied,
                # unless it holds what a loaded row would not (open LangGraph interrupts).
                self.heads.put(w.state, copy=bool(w.state.open))

    def forget(self) -> None:
        for w in self.writers:
            self.heads.drop(w.thread_id)


@dataclass(frozen=True, slots=True)
class Kept:
    """One thread's flush, kept for the database call of the single-append path."""

    state: ThreadState
    head: tuple[int, str] | None
    """``(version, hash)`` the row must hold; None: the thread is new."""
    new_events: list[NewEvent]
    pending_json: str | None
    opened: list[dict[str, Any]]
    closed: list[str]


_ONE: ContextVar[OneAppend | None] = ContextVar("symfonic_one_append", default=None)


def one_append() -> ContextVar[OneAppend | None]:
    """The write in progress on this thread of control (set by the runners of writes)."""
    return _ONE

@dataclass(frozen=True, slots=True)
class Refusal:
    """A write that must commit (e.g. the record of a rejected resume) and then raise."""

    error: SymfonicStoreError


def utc_now() -> datetime:
    """Domain time: the Python clock at call time (``freezegun`` moves it), never ``now()``."""
    return datetime.now(UTC)


class ThreadWriter:
    """Appends events to one thread inside the caller's transaction."""

    __slots__ = (
        "_existed", "_one", "assigned", "closed", "conn", "head", "minted_probe", "new_events",
        "opened", "pending_json", "state",
    )

    # A signature alike others in shape only (errors.py, marker_ops.record_route).
    def __init__(
        self,
        conn: Connection,
        thread_id: str,
        state: ThreadState | None = None,
        *,
        probe_mint: str | None = None,
    ) -> None:
        self.conn = conn
        note_opened(thread_id)
        self.minted_probe: tuple[str, bool] | None = None
        """``(interrupt_id, minted)`` when the thread's row was read with a mint probe."""
        one = self._one = _ONE.get()
        self.head: tuple[int, str] | None = None
        """The single-append path: the cached ``(version, hash)`` the row must still hold."""
        if one is not None:
            one.writers.append(self)
            if state is None and one.mode is not None:
                state = one.heads.get(thread_id)
                if state is not None:
                    self.head = (state.version, state.last_hash)
        if state is None and (one is None or one.mode is None):
            if probe_mint is None:
                state = load_thread(conn, thread_id, for_update=True)
            else:
                # The row lock and "was this interrupt minted?" in one statement: the mint
                # path needs both, and on PostgreSQL each statement is a round trip.
                state, minted = load_thread_probing_mint(conn, thread_id, probe_mint)
                self.minted_probe = (probe_mint, minted)
        self._existed = state is not None
        self.state = state if state is not None else ThreadState(thread_id)
        self.new_events: list[NewEvent] = []
        self.opened: list[dict[str, Any]] = []
        """Rows of LangGraph interrupts minted here (the open-interrupts projection)."""
        self.closed: list[str] = []
        """Ids of LangGraph interrupts ended here."""
        self.assigned: list[tuple[str, str]] = []
        """``(interrupt_id, assignee)`` of LangGraph interrupts assigned here (their rows'
        ``assigned_to``; the pending marker's is the thread row's, from the fold)."""
        self.pending_json: str | None = None
        """The pending marker as the JSON of the mint that made it, when it was made
        here (so the projection row reuses that text); None: encode it."""

    @property
    def thread_id(self) -> str:
        return self.state.thread_id

    @property
    def existed(self) -> bool:
        """Did the thread have events (a projection row) when the writer was opened?"""
        return self._existed

    def append(
        self,
        type: str,
        *,
        data: dict[str, Any],
        interrupt_id: str | None = None,
        run_id: str | None = None,
        actor: str | None = None,
        encoded: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> NewEvent:
        """Seal the next event of the thread and fold it into the thread's state.

        ``encoded``: canonical JSON of some of ``data``'s values, already made (by the
        validation's size check), so they are not encoded again.
        """
        # The values the audit columns copy are encoded once, here or by the caller,
        # and spliced into the data's JSON: the row binds the same text twice.
        copied = copied_key(type)
        if copied is not None and copied in data and data[copied] is not None:
            if encoded is None or copied not in encoded:
                encoded = {**(encoded or {}), copied: canonical_json(data[copied])}
        event = seal(
            NewEvent(
                thread_id=self.state.thread_id,
                version=self.state.version + 1,
                type=type,
                interrupt_id=interrupt_id,
                run_id=run_id,
                actor=actor,
                data=data,
                occurred_at=utc_now(),
                tenant=tenant,
            ),
            self.state.last_hash,
            encoded,
        )
        if type == MINTED and is_native_mint(data):
            self.opened.append(open_from_event(event))
        elif type in ENDINGS and interrupt_id != self.state.pending_interrupt_id:
            self.closed.append(str(interrupt_id))
        elif type == ASSIGNED and interrupt_id != self.state.pending_interrupt_id:
            self.assigned.append((str(interrupt_id), assignee_of(data)))
        apply(self.state, event)
        if type == MINTED and len(data) == len(MARKER_KEYS) and all(k in data for k in MARKER_KEYS):
            # A seed marker's mint: its data is exactly the pending marker it makes.
            self.pending_json = event.data_json
        self.new_events.append(event)
        return event

    def holds_pending(self, interrupt_id: str) -> bool:
        """Is ``interrupt_id`` the pending marker here? True proves it was minted, whatever
        the thread's head is now (a recorded mint stays recorded)."""
        if self.state.pending_interrupt_id != interrupt_id:
            return False
        if self._one is not None:
            self._one.proven = True
        return True

    def was_minted(self, interrupt_id: str) -> bool:
        """Has ``interrupt_id`` been minted on this thread (before this writer)?"""
        if self.minted_probe is not None and self.minted_probe[0] == interrupt_id:
            return self.minted_probe[1]
        if not self._existed:
            return False
        one = self._one
        if one is not None and one.mode == "call":
            one.probe = interrupt_id  # the database call answers it, before writing
            return False
        minted = was_minted(self.conn, self.thread_id, interrupt_id)
        if minted and one is not None:
            one.proven = True
        return minted


def flush(conn: Connection, writers: Sequence[ThreadWriter]) -> int:
    """Write every writer's new events and projection rows; returns the events written."""
    dirty = [w for w in writers if w.new_events]
    if not dirty:
        return 0
    one = _ONE.get()
    if one is not None and one.mode is not None:
        one.wrote += sum(len(w.new_events) for w in dirty)
        if one.mode == "call":
            return _keep(one, dirty)
        for w in dirty:
            if w.head is not None:
                if not update_thread_at_head(conn, w.state, w.pending_json, w.head):
                    raise StaleHead(w.thread_id)
    executor_for(conn).check_writer(conn)
    new_events = [e for w in dirty for e in w.new_events]
    insert_events(conn, new_events)
    fresh = [w for w in dirty if not w._existed]
    if fresh:
        insert_threads(conn, [w.state for w in fresh], [w.pending_json for w in fresh])
    known = [w for w in dirty if w._existed and w.head is None]  # (the others: swapped above)
    if known:
        update_threads(conn, [w.state for w in known], [w.pending_json for w in known])
    opened = [row for w in dirty for row in w.opened]
    closed = [(w.thread_id, i) for w in dirty for i in w.closed]
    if opened:
        insert_open_interrupts(conn, opened)
    assigned = [(w.thread_id, i, a) for w in dirty for i, a in w.assigned]
    if assigned:
        assign_open_interrupts(conn, assigned)
    if closed:
        delete_open_interrupts(conn, closed)
    for w in dirty:
        w._existed = True
        if w.head is not None:
            w.head = (w.state.version, w.state.last_hash)
        w.new_events = []
        w.opened = []
        w.closed = []
        w.assigned = []
    return len(new_events)


def _keep(one: OneAppend, dirty: Sequence[ThreadWriter]) -> int:
    """The single-append path on PostgreSQL: what the writers would write, kept for the
    one database call that writes it (:mod:`.single`)."""
    n = 0
    for w in dirty:
        if w.assigned:  # the database call updates no open interrupt's row
            raise NeedsDatabase("an assignment of an open LangGraph interrupt")
        one.kept.append(
            Kept(w.state, w.head, w.new_events, w.pending_json, w.opened, [*w.closed])
        )
        n += len(w.new_events)
        w._existed = True
        w.head = None  # a second flush of this writer would have no head to swap
        w.new_events = []
        w.opened = []
        w.closed = []
    return n


def run_write(
    conn: Connection,
    work: Callable[[Connection], T],
    *,
    appends: bool = True,
    heads: Heads | None = None,
) -> T:
    """Run ``work`` in a write transaction, retrying lost races; commit, then raise refusals.

    ``work`` may return a :class:`Refusal`: its events are committed first (a rejected
    resume is part of the record) and its error raised afterwards. ``appends=False``:
    ``work`` inserts no events (see :meth:`~symfonic_store.db.executor.Executor.begin`).
    ``heads``: the store's head cache, given the heads of the threads written here
    after the commit.
    """
    executor = executor_for(conn)
    for attempt in range(WRITE_ATTEMPTS):
        opened: list[str] = []
        one = None if heads is None else OneAppend(heads, None)
        token = _ONE.set(one)
        try:
            with watching(opened), translate_errors() as phase:
                tx = executor.begin(conn, write=True, appends=appends)
                try:
                    outcome = work(conn)
                    # From here the COMMIT runs: a connection lost now may have committed.
                    phase.committing = True
                    executor.commit(conn, tx)
                except BaseException:
                    executor.rollback(conn, tx)
                    raise
        except ConcurrencyConflictError:
            if one is not None:
                one.forget()
            # A projection row behind the log loses this "race" on every try.
            refuse_projection_behind(conn, opened)
            if attempt == WRITE_ATTEMPTS - 1:
                raise
            continue
        except BaseException:
            if one is not None:
                one.forget()
            raise
        finally:
            _ONE.reset(token)
        if one is not None:
            one.remember()
        if isinstance(outcome, Refusal):
            raise outcome.error
        return outcome
    raise AssertionError("unreachable")  # pragma: no cover
