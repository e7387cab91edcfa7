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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from ..audit_columns import copied_key
from ..db.executor import executor_for
from ..db.statements.log import insert_events, was_minted
from ..db.statements.native import delete_open_interrupts, insert_open_interrupts
from ..db.statements.threads import (
    insert_threads,
    load_thread,
    load_thread_probing_mint,
    update_threads,
)
from ..db.translate import translate_errors
from ..errors import ConcurrencyConflictError, SymfonicStoreError
from ..events import ENDINGS, MINTED, NewEvent, canonical_json, seal
from ..projection import ThreadState, apply, is_native_mint, open_from_event
from ..projection_gaps import note_opened, refuse_projection_behind, watching
from ..protocol import MARKER_KEYS

T = TypeVar("T")

WRITE_ATTEMPTS = 5

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
        "_existed", "closed", "conn", "minted_probe", "new_events", "opened", "pending_json",
        "state",
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
        if state is None:
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
            ),
            self.state.last_hash,
            encoded,
        )
        if type == MINTED and is_native_mint(data):
            self.opened.append(open_from_event(event))
        elif type in ENDINGS and interrupt_id != self.state.pending_interrupt_id:
            self.closed.append(str(interrupt_id))
        apply(self.state, event)
        if type == MINTED and len(data) == len(MARKER_KEYS) and all(k in data for k in MARKER_KEYS):
            # A seed marker's mint: its data is exactly the pending marker it makes.
            self.pending_json = event.data_json
        self.new_events.append(event)
        return event

    def was_minted(self, interrupt_id: str) -> bool:
        """Has ``interrupt_id`` been minted on this thread (before this writer)?"""
        if self.minted_probe is not None and self.minted_probe[0] == interrupt_id:
            return self.minted_probe[1]
        return self._existed and was_minted(self.conn, self.thread_id, interrupt_id)


def flush(conn: Connection, writers: Sequence[ThreadWriter]) -> int:
    """Write every writer's new events and projection rows; returns the events written."""
    dirty = [w for w in writers if w.new_events]
    if not dirty:
        return 0
    executor_for(conn).check_writer(conn)
    new_events = [e for w in dirty for e in w.new_events]
    insert_events(conn, new_events)
    fresh = [w for w in dirty if not w._existed]
    if fresh:
        insert_threads(conn, [w.state for w in fresh], [w.pending_json for w in fresh])
    known = [w for w in dirty if w._existed]
    if known:
        update_threads(conn, [w.state for w in known], [w.pending_json for w in known])
    opened = [row for w in dirty for row in w.opened]
    closed = [(w.thread_id, i) for w in dirty for i in w.closed]
    if opened:
        insert_open_interrupts(conn, opened)
    if closed:
        delete_open_interrupts(conn, closed)
    for w in dirty:
        w._existed = True
        w.new_events = []
        w.opened = []
        w.closed = []
    return len(new_events)


def run_write(conn: Connection, work: Callable[[Connection], T], *, appends: bool = True) -> T:
    """Run ``work`` in a write transaction, retrying lost races; commit, then raise refusals.

    ``work`` may return a :class:`Refusal`: its events are committed first (a rejected
    resume is part of the record) and its error raised afterwards. ``appends=False``:
    ``work`` inserts no events (see :meth:`~symfonic_store.db.executor.Executor.begin`).
    """
    executor = executor_for(conn)
    for attempt in range(WRITE_ATTEMPTS):
        opened: list[str] = []
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
            # A projection row behind the log loses this "race" on every try.
            refuse_projection_behind(conn, opened)
            if attempt == WRITE_ATTEMPTS - 1:
                raise
            continue
        if isinstance(outcome, Refusal):
            raise outcome.error
        return outcome
    raise AssertionError("unreachable")  # pragma: no cover
