"""``InterruptStore`` and ``AsyncInterruptStore``: the public face of the event store.

Both classes only do I/O. Every operation is built once, as an :class:`Op` -- validated
arguments bound to a function of a synchronous ``Connection`` -- by
:class:`_Operations`; the sync store runs it on a pooled connection, the asyncio store
runs the very same function through ``AsyncConnection.run_sync``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Generic, Literal, TypeVar

from langgraph.types import Command
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from . import lifecycle, validation
from .append import run_write
from .errors import InvalidInputError
from .events import StoredEvent
from .lifecycle import ApproverPolicy, Rules, payload_approvers
from .persistence import (
    create_asyncio_engine,
    create_sync_engine,
    require_current_schema,
    safe_url,
    translate_errors,
    upgrade,
)
from .projection import ThreadState
from .protocol import (
    PENDING_KEY,
    encode_resume,
    interrupt_pending_is_current,
    normalize_response,
)
from .services.audit import AuditRecord, audit
from .services.rebuild import Progress, rebuild
from .services.replay import replay_events
from .services.sweep import SweepReport, anotify, notify, sweep_batch
from .services.verify import VerifyReport, verify_events
from .statements import (
    FAST_DIALECTS,
    all_events_by_thread_query,
    events_after_query,
    load_thread,
    pending_threads,
    read_page,
    stream,
    thread_events_query,
)

T = TypeVar("T")

OnExpired = Callable[[str, str, str], Any]


@dataclass(frozen=True, slots=True)
class Op(Generic[T]):
    """One store operation: a function of a ``Connection``, and whether it writes."""

    fn: Callable[[Connection], T]
    write: bool
    settled: Callable[[Connection], tuple[bool, T]] | None = None
    """A read-only check run first (no write lock): ``(True, result)`` proves the write
    would record nothing and answers the call; ``(False, _)`` falls back to ``fn``,
    which decides again under the write lock."""


def _read_in_tx(conn: Connection, fn: Callable[[Connection], T]) -> T:
    with conn.begin():
        return fn(conn)


def _settle(conn: Connection, settled: Callable[[Connection], tuple[bool, T]]) -> tuple[bool, T]:
    """Run a read-only check. On SQLite its statements run on the driver's cursor outside
    any transaction, each one atomic on its own (the checks read one fact that, once
    true, stays true), which spares a BEGIN and COMMIT; elsewhere in a read transaction."""
    if conn.dialect.name not in FAST_DIALECTS:
        return _read_in_tx(conn, settled)
    try:
        return settled(conn)
    finally:
        if conn.in_transaction():  # a statement that went through SQLAlchemy after all
            conn.commit()


def _execute(conn: Connection, op: Op[T]) -> T:
    """Run ``op`` on ``conn``: a write in a retried write transaction, a read in a plain one."""
    with translate_errors():
        if not op.write:
            return _read_in_tx(conn, op.fn)
        if op.settled is not None:
            done, result = _settle(conn, op.settled)
            if done:
                return result
        return run_write(conn, op.fn)


def _setup(conn: Connection) -> None:
    with translate_errors():
        with conn.begin():
            if conn.dialect.name == "postgresql":
                # Two processes running setup() at once must not both create the tables.
                from sqlalchemy import func, select

                conn.execute(select(func.pg_advisory_xact_lock(0x53594D47)))
            upgrade(conn)


def _check_schema(conn: Connection) -> None:
    with translate_errors():
        with conn.begin():
            require_current_schema(conn)


def _approver_policy(approvers: Any) -> ApproverPolicy | None:
    if approvers is None:
        return None
    if approvers == "payload":
        return payload_approvers
    if callable(approvers):
        return approvers  # type: ignore[no-any-return]
    raise InvalidInputError(
        "approvers", "must be None, 'payload' or a callable(thread_id, marker, actor) -> bool"
    )


def _response_dict(value: Any) -> dict[str, Any]:
    """N2 on a value handed to ``store.resume``; a model is dumped JSON-ready."""
    if value is None:
        return {}
    if not isinstance(value, dict) and hasattr(value, "model_dump"):
        try:
            try:
                value = value.model_dump(mode="json")
            except TypeError:
                value = value.model_dump()
        except Exception as exc:
            raise InvalidInputError(
                "response", f"model_dump() failed ({type(exc).__name__}: {exc})"
            ) from None
    try:
        response = normalize_response(value)
        # The store records and sends a dict: a model that dumps to something else
        # (a RootModel of a list, say) travels as {"value": ...} like any scalar.
        return response if isinstance(response, dict) else {"value": str(response)}
    except RecursionError:
        raise InvalidInputError("response", "is nested too deeply to record") from None
    except Exception as exc:  # N2 turns anything else into str(value), which may raise
        raise InvalidInputError(
            "response", f"cannot be turned into text ({type(exc).__name__}: {exc})"
        ) from None


def _state_of(thread: ThreadState | None) -> dict[str, Any]:
    if thread is None:
        return {PENDING_KEY: None, "run_id": None}
    return thread.as_state()


class _Operations:
    """Validation and the building of every operation, shared by both stores."""

    def __init__(
        self,
        *,
        ttl_seconds: float | None,
        approvers: Any,
        max_payload_bytes: int | None,
    ) -> None:
        self.ttl_seconds = validation.ttl(ttl_seconds)
        self.max_payload_bytes = validation.positive_int(
            max_payload_bytes, "max_payload_bytes", optional=True
        )
        self.rules = Rules(ttl_seconds=self.ttl_seconds, approvers=_approver_policy(approvers))

    def _ttl(self, ttl_seconds: Any) -> float | None:
        checked = validation.ttl(ttl_seconds)
        return self.ttl_seconds if checked is None else checked

    # writes

    def mint(self, thread_id: Any, marker: Any, actor: Any) -> Op[bool]:
        t = validation.required_id(thread_id, "thread_id")
        m = validation.marker(marker, max_bytes=self.max_payload_bytes)
        a = validation.text_id(actor, "actor", optional=True)
        return Op(
            partial(lifecycle.mint, thread_id=t, marker=m, actor=a),
            write=True,
            settled=partial(lifecycle.mint_settled, thread_id=t, interrupt_id=m["interrupt_id"]),
        )

    def record_route(
        self, thread_id: Any, route: Any, run_id: Any, reason: Any, interrupt_id: Any
    ) -> Op[None]:
        t = validation.required_id(thread_id, "thread_id")
        r = validation.route(route)
        fn = partial(
            lifecycle.record_route,
            thread_id=t,
            route=r,
            run_id=validation.run_id(run_id),
            reason=validation.route_reason(reason),
            interrupt_id=validation.text_id(interrupt_id, "interrupt_id", optional=True),
        )
        return Op(fn, write=True)

    def record_router_decision(
        self, thread_id: Any, state: Any, route: Any, ttl_seconds: Any
    ) -> Op[None]:
        t = validation.required_id(thread_id, "thread_id")
        if not isinstance(state, dict):
            raise InvalidInputError("state", f"must be a dict, got {type(state).__name__}")
        r = validation.route(route)
        raw = state.get(PENDING_KEY)
        marker = (
            validation.marker(raw, max_bytes=self.max_payload_bytes)
            if isinstance(raw, dict) and raw
            else None
        )
        validation.run_id(state.get("run_id"), "state.run_id")
        view = {PENDING_KEY: raw, "run_id": state.get("run_id")}
        fn = partial(
            lifecycle.record_router_decision,
            thread_id=t,
            state=view,
            route=r,
            marker=marker,
            ttl_seconds=self._ttl(ttl_seconds),
        )
        return Op(fn, write=True)

    def resume(self, thread_id: Any, interrupt_id: Any, response: Any, actor: Any) -> Op[Command[Any]]:
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        a = validation.required_id(actor, "actor")
        r = validation.json_value(
            _response_dict(response), "response", max_bytes=self.max_payload_bytes
        )

        def run(conn: Connection) -> Any:
            outcome = lifecycle.resume(conn, self.rules, t, i, r, a)
            if isinstance(outcome, dict):
                return Command(resume=encode_resume(outcome))
            return outcome

        return Op(run, write=True)

    def admit_node_resume(
        self, thread_id: Any, pending: Any, resume_value: Any, actor: Any
    ) -> Op[dict[str, Any]]:
        t = validation.required_id(thread_id, "thread_id")
        if not isinstance(pending, dict):
            raise InvalidInputError("state._interrupt_pending", "must be a dict marker")
        i = validation.required_id(pending.get("interrupt_id"), "marker.interrupt_id")
        a = validation.text_id(actor, "actor", optional=True)
        # What the seed node would hand the agent, as the JSON the store records.
        response = validation.json_value(
            normalize_response(resume_value) if resume_value is not None else {},
            "response",
            max_bytes=self.max_payload_bytes,
        )
        fn = partial(
            lifecycle.resume,
            rules=self.rules,
            thread_id=t,
            interrupt_id=i,
            response=response,
            actor=a,
            from_node=True,
        )
        settled = partial(
            lifecycle.node_resume_settled, thread_id=t, interrupt_id=i, response=response
        )
        return Op(fn, write=True, settled=settled)  # type: ignore[arg-type]

    def expire(self, thread_id: Any, interrupt_id: Any, reason: Any, actor: Any) -> Op[None]:
        fn = partial(
            lifecycle.expire,
            thread_id=validation.required_id(thread_id, "thread_id"),
            interrupt_id=validation.required_id(interrupt_id, "interrupt_id"),
            reason=validation.expiry_reason(reason),
            actor=validation.text_id(actor, "actor", optional=True),
        )
        return Op(fn, write=True)

    def sweep_batch(
        self, ttl_seconds: float | None, after: str, batch_size: int, dry_run: bool
    ) -> Op[Any]:
        fn = partial(
            sweep_batch,
            ttl_seconds=ttl_seconds,
            after_thread=after,
            batch_size=batch_size,
            dry_run=dry_run,
        )
        return Op(fn, write=not dry_run)

    def sweep_args(self, ttl_seconds: Any, batch_size: Any, dry_run: Any) -> tuple[float | None, int, bool]:
        if not isinstance(dry_run, bool):
            raise InvalidInputError("dry_run", "must be True or False")
        size = validation.positive_int(batch_size, "batch_size")
        assert size is not None
        return self._ttl(ttl_seconds), size, dry_run

    def rebuild(self, progress: Progress | None) -> Op[int]:
        return Op(partial(rebuild, progress=progress), write=True)

    # reads

    def thread(self, thread_id: Any) -> Op[ThreadState | None]:
        t = validation.required_id(thread_id, "thread_id")
        return Op(partial(load_thread, thread_id=t, for_update=False), write=False)

    def list_pending(self, older_than: Any, limit: Any) -> Op[list[dict[str, Any]]]:
        age = validation.ttl(older_than, "older_than")
        n = validation.positive_int(limit, "limit", optional=True)

        def run(conn: Connection) -> list[dict[str, Any]]:
            since_before = None if age is None else time.time() - age
            rows = pending_threads(conn, since_before=since_before, limit=n)
            return [{**(r.pending or {}), "thread_id": r.thread_id} for r in rows]

        return Op(run, write=False)

    def history(self, thread_id: Any) -> Op[list[StoredEvent]]:
        t = validation.required_id(thread_id, "thread_id")
        return Op(partial(read_page, query=thread_events_query(t)), write=False)

    def events(self, after: Any, limit: Any) -> Op[list[StoredEvent]]:
        a = validation.non_negative_int(after, "after")
        n = validation.positive_int(limit, "limit", optional=True)
        return Op(partial(read_page, query=events_after_query(a, n)), write=False)

    def audit(self, thread_id: Any, actor: Any, since: Any, until: Any) -> Op[list[AuditRecord]]:
        fn = partial(
            audit,
            thread_id=validation.text_id(thread_id, "thread_id", optional=True),
            actor=validation.text_id(actor, "actor", optional=True),
            since=validation.moment(since, "since"),
            until=validation.moment(until, "until"),
        )
        return Op(fn, write=False)

    def verify(self, thread_id: Any) -> Op[VerifyReport]:
        t = validation.text_id(thread_id, "thread_id", optional=True)
        return Op(lambda conn: verify_events(stream(conn, all_events_by_thread_query(t))), False)

    def replay_query(self, thread_id: Any, until: Any) -> Any:
        t = validation.required_id(thread_id, "thread_id")
        bound = validation.as_of(until)
        if isinstance(bound, datetime):
            return t, thread_events_query(t, until_time=bound)
        return t, thread_events_query(t, until_position=bound)


class InterruptStore:
    """The synchronous store.

    Args:
        url_or_engine: ``sqlite:///path.db`` (the embedded default),
            ``postgresql+psycopg://user@host/db``, or a SQLAlchemy ``Engine``.
        ttl_seconds: how long a pending interrupt stays current; None for no TTL.
        approvers: who may resume: None (anyone), ``"payload"`` (the marker payload's
            ``approvers`` list, when it has one) or ``callable(thread_id, marker, actor)``.
        max_payload_bytes: the largest JSON payload or response accepted (1 MiB).
        sqlite_synchronous: SQLite's ``synchronous`` pragma; ``FULL`` by default.
        busy_timeout: seconds a SQLite writer waits for the write lock.

    Raises:
        InvalidInputError: a bad URL or option (the message never shows a password).
    """

    def __init__(
        self,
        url_or_engine: str | URL | Engine,
        *,
        ttl_seconds: float | None = None,
        approvers: Literal["payload"] | ApproverPolicy | None = None,
        max_payload_bytes: int | None = validation.DEFAULT_MAX_PAYLOAD_BYTES,
        sqlite_synchronous: str = "FULL",
        busy_timeout: float = 5.0,
    ) -> None:
        self._ops = _Operations(
            ttl_seconds=ttl_seconds, approvers=approvers, max_payload_bytes=max_payload_bytes
        )
        self._owns_engine = not isinstance(url_or_engine, Engine)
        self._engine = create_sync_engine(
            url_or_engine, sqlite_synchronous=sqlite_synchronous, busy_timeout=busy_timeout
        )
        self._schema_ok = False

    @property
    def ttl_seconds(self) -> float | None:
        """The store's TTL: the default for ``is_current``, ``sweep``, resume and routers."""
        return self._ops.ttl_seconds

    @property
    def engine(self) -> Engine:
        return self._engine

    def __repr__(self) -> str:
        return f"InterruptStore({safe_url(self._engine.url)!r}, ttl_seconds={self.ttl_seconds!r})"

    def __enter__(self) -> InterruptStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the store's connections."""
        if self._owns_engine:
            self._engine.dispose()

    def _run(self, op: Op[T]) -> T:
        with translate_errors(), self._engine.connect() as conn:
            if not self._schema_ok:
                _check_schema(conn)
                self._schema_ok = True
            return _execute(conn, op)

    # --- schema ---------------------------------------------------------------

    def setup(self) -> None:
        """Migrate the database to the newest schema (idempotent)."""
        with translate_errors(), self._engine.connect() as conn:
            _setup(conn)
        self._schema_ok = True

    # --- writes ---------------------------------------------------------------

    def mint(self, thread_id: str, marker: dict[str, Any], *, actor: str | None = None) -> bool:
        """Record ``interrupt.minted``; returns False when the interrupt was already seen.

        ``marker`` is the ``_interrupt_pending`` dict or the whole update containing it.
        Minting while another interrupt is pending expires that one (``superseded``).

        Raises:
            InvalidMarkerError: not a dict, or ``name``/``interrupt_id`` missing.
            InvalidInputError: a bad thread id, actor or payload.
        """
        return self._run(self._ops.mint(thread_id, marker, actor))

    def record_route(
        self,
        thread_id: str,
        route: str,
        *,
        run_id: str | None = None,
        reason: str | None = None,
        interrupt_id: str | None = None,
    ) -> None:
        """Record ``route.decided`` (and the thread's ``run_id`` when given).

        ``interrupt_id`` is the marker the decision looked at; by default the pending one.
        """
        self._run(self._ops.record_route(thread_id, route, run_id, reason, interrupt_id))

    def record_router_decision(
        self, thread_id: str, state: dict[str, Any], route: str, *, ttl_seconds: float | None = None
    ) -> None:
        """What a router saw in a graph state, in one transaction (used by the router)."""
        self._run(self._ops.record_router_decision(thread_id, state, route, ttl_seconds))

    def resume(
        self, thread_id: str, interrupt_id: str, response: Any = None, *, actor: str
    ) -> Command[Any]:
        """Admit a person's answer exactly once; returns the ``Command`` to resume the graph.

        ``None`` (or a field-less model) is an acknowledgement. Repeating the identical
        call returns the same command without a new event.

        Raises:
            UnknownInterruptError: nothing with that id was minted on the thread.
            InterruptAlreadyResolvedError: someone else (or another answer) got there first.
            InterruptExpiredError: it is expired, or stale by TTL/run_id (now recorded).
            ResumeNotAllowedError: the approvers policy refuses ``actor``.
            InvalidInputError: bad ids, or a response that is not JSON.
        """
        return self._run(self._ops.resume(thread_id, interrupt_id, response, actor))

    def admit_node_resume(
        self, thread_id: str, pending: dict[str, Any], resume_value: Any, *, actor: str | None
    ) -> dict[str, Any]:
        """The interrupt node's check of an answer it received (see create_interrupt_node)."""
        return self._run(self._ops.admit_node_resume(thread_id, pending, resume_value, actor))

    def expire(
        self,
        thread_id: str,
        interrupt_id: str,
        *,
        reason: str = "cancelled",
        actor: str | None = None,
    ) -> None:
        """Declare a pending interrupt dead (``detected_by: api``).

        Raises:
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError.
        """
        self._run(self._ops.expire(thread_id, interrupt_id, reason, actor))

    def sweep(
        self,
        *,
        ttl_seconds: float | None = None,
        dry_run: bool = False,
        batch_size: int = 500,
        on_expired: OnExpired | None = None,
    ) -> SweepReport:
        """Expire every stale pending interrupt (TTL passed or run moved on).

        ``on_expired(thread_id, interrupt_id, reason)`` is called after each batch of
        expiries is committed (use :func:`~symfonic_store.make_graph_waker` to wake the
        graphs); a callback that raises is reported in ``wake_failures``.
        """
        ttl, size, dry = self._ops.sweep_args(ttl_seconds, batch_size, dry_run)
        report = SweepReport(dry_run=dry, ttl_seconds=ttl)
        after = ""
        while True:
            batch = self._run(self._ops.sweep_batch(ttl, after, size, dry))
            notify(report, batch.expired, on_expired)
            if batch.last_thread is None:
                return report
            after = batch.last_thread

    def rebuild_projection(self, *, progress: Progress | None = None) -> int:
        """Rebuild the projection from the events; returns the number of events folded."""
        return self._run(self._ops.rebuild(progress))

    # --- reads ----------------------------------------------------------------

    def pending(self, thread_id: str) -> dict[str, Any] | None:
        """The thread's projected ``_interrupt_pending`` (the seed's shape), or None."""
        return _state_of(self._run(self._ops.thread(thread_id)))[PENDING_KEY]  # type: ignore[no-any-return]

    def state(self, thread_id: str) -> dict[str, Any]:
        """``{"_interrupt_pending": ..., "run_id": ...}`` as projected from the events."""
        return _state_of(self._run(self._ops.thread(thread_id)))

    def is_current(self, thread_id: str, ttl_seconds: float | None = None) -> bool:
        """The seed predicate on the projected state (the store's TTL by default)."""
        ttl = self._ops._ttl(ttl_seconds)
        return interrupt_pending_is_current(self.state(thread_id), ttl)

    def list_pending(
        self, *, older_than: float | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Pending interrupts across all threads, oldest first: each marker plus ``thread_id``."""
        return self._run(self._ops.list_pending(older_than, limit))

    def history(self, thread_id: str) -> list[StoredEvent]:
        """The thread's events in order."""
        return self._run(self._ops.history(thread_id))

    def events(self, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        """Events after a global position, in position order (page with ``limit``)."""
        return self._run(self._ops.events(after, limit))

    def iter_events(self, *, after: int = 0, page_size: int = 1000) -> Iterator[StoredEvent]:
        """Every event after ``after`` in position order, fetched page by page."""
        while True:
            page = self.events(after=after, limit=page_size)
            yield from page
            if len(page) < page_size:
                return
            after = page[-1].position

    def replay(
        self, thread_id: str, *, until: int | datetime | None = None
    ) -> Iterator[tuple[StoredEvent, dict[str, Any]]]:
        """Each event of the thread with the state after it; ``until`` a position or time."""
        t, query = self._ops.replay_query(thread_id, until)
        return self._replay(t, query)

    def _replay(self, thread_id: str, query: Any) -> Generator[tuple[StoredEvent, dict[str, Any]]]:
        with translate_errors(), self._engine.connect() as conn:
            if not self._schema_ok:
                _check_schema(conn)
                self._schema_ok = True
            with conn.begin():
                yield from replay_events(thread_id, stream(conn, query))

    def audit(
        self,
        *,
        thread_id: str | None = None,
        actor: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> list[AuditRecord]:
        """One record per interrupt, oldest first: who answered what, and when."""
        return self._run(self._ops.audit(thread_id, actor, since, until))

    def verify(self, thread_id: str | None = None) -> VerifyReport:
        """Check the hash chains; the report names the first broken link per thread."""
        return self._run(self._ops.verify(thread_id))


class _AsyncReplay:
    """The result of ``AsyncInterruptStore.replay``: iterate with ``async for`` or await it."""

    def __init__(self, iterator: AsyncIterator[tuple[StoredEvent, dict[str, Any]]]) -> None:
        self._iterator = iterator

    def __aiter__(self) -> AsyncIterator[tuple[StoredEvent, dict[str, Any]]]:
        return self._iterator

    def __await__(self) -> Generator[Any, None, list[tuple[StoredEvent, dict[str, Any]]]]:
        async def collect() -> list[tuple[StoredEvent, dict[str, Any]]]:
            return [item async for item in self._iterator]

        return collect().__await__()


class AsyncInterruptStore:
    """The asyncio store: the methods of :class:`InterruptStore`, as coroutines.

    Accepts the same URLs (``sqlite:///...`` uses aiosqlite, ``postgresql+psycopg://``
    psycopg's async mode) or an ``AsyncEngine``. Close it with ``await store.aclose()``.
    """

    def __init__(
        self,
        url_or_engine: str | URL | AsyncEngine,
        *,
        ttl_seconds: float | None = None,
        approvers: Literal["payload"] | ApproverPolicy | None = None,
        max_payload_bytes: int | None = validation.DEFAULT_MAX_PAYLOAD_BYTES,
        sqlite_synchronous: str = "FULL",
        busy_timeout: float = 5.0,
    ) -> None:
        self._ops = _Operations(
            ttl_seconds=ttl_seconds, approvers=approvers, max_payload_bytes=max_payload_bytes
        )
        self._owns_engine = not isinstance(url_or_engine, AsyncEngine)
        self._engine = create_asyncio_engine(
            url_or_engine, sqlite_synchronous=sqlite_synchronous, busy_timeout=busy_timeout
        )
        self._schema_ok = False

    @property
    def ttl_seconds(self) -> float | None:
        return self._ops.ttl_seconds

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    def __repr__(self) -> str:
        return (
            f"AsyncInterruptStore({safe_url(self._engine.url)!r}, "
            f"ttl_seconds={self.ttl_seconds!r})"
        )

    async def __aenter__(self) -> AsyncInterruptStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the store's connections."""
        if self._owns_engine:
            await self._engine.dispose()

    async def close(self) -> None:
        """Alias of :meth:`aclose`."""
        await self.aclose()

    async def _run(self, op: Op[T]) -> T:
        with translate_errors():
            async with self._engine.connect() as aconn:
                if not self._schema_ok:
                    await aconn.run_sync(_check_schema)
                    self._schema_ok = True
                return await aconn.run_sync(_execute, op)

    async def setup(self) -> None:
        """Migrate the database to the newest schema (idempotent)."""
        with translate_errors():
            async with self._engine.connect() as aconn:
                await aconn.run_sync(_setup)
        self._schema_ok = True

    async def mint(self, thread_id: str, marker: dict[str, Any], *, actor: str | None = None) -> bool:
        return await self._run(self._ops.mint(thread_id, marker, actor))

    async def record_route(
        self,
        thread_id: str,
        route: str,
        *,
        run_id: str | None = None,
        reason: str | None = None,
        interrupt_id: str | None = None,
    ) -> None:
        await self._run(self._ops.record_route(thread_id, route, run_id, reason, interrupt_id))

    async def record_router_decision(
        self, thread_id: str, state: dict[str, Any], route: str, *, ttl_seconds: float | None = None
    ) -> None:
        await self._run(self._ops.record_router_decision(thread_id, state, route, ttl_seconds))

    async def resume(
        self, thread_id: str, interrupt_id: str, response: Any = None, *, actor: str
    ) -> Command[Any]:
        return await self._run(self._ops.resume(thread_id, interrupt_id, response, actor))

    async def admit_node_resume(
        self, thread_id: str, pending: dict[str, Any], resume_value: Any, *, actor: str | None
    ) -> dict[str, Any]:
        return await self._run(self._ops.admit_node_resume(thread_id, pending, resume_value, actor))

    async def expire(
        self,
        thread_id: str,
        interrupt_id: str,
        *,
        reason: str = "cancelled",
        actor: str | None = None,
    ) -> None:
        await self._run(self._ops.expire(thread_id, interrupt_id, reason, actor))

    async def sweep(
        self,
        *,
        ttl_seconds: float | None = None,
        dry_run: bool = False,
        batch_size: int = 500,
        on_expired: OnExpired | None = None,
    ) -> SweepReport:
        """As :meth:`InterruptStore.sweep`; ``on_expired`` may be a coroutine function."""
        ttl, size, dry = self._ops.sweep_args(ttl_seconds, batch_size, dry_run)
        report = SweepReport(dry_run=dry, ttl_seconds=ttl)
        after = ""
        while True:
            batch = await self._run(self._ops.sweep_batch(ttl, after, size, dry))
            await anotify(report, batch.expired, on_expired)
            if batch.last_thread is None:
                return report
            after = batch.last_thread

    async def rebuild_projection(self, *, progress: Progress | None = None) -> int:
        return await self._run(self._ops.rebuild(progress))

    async def pending(self, thread_id: str) -> dict[str, Any] | None:
        return _state_of(await self._run(self._ops.thread(thread_id)))[PENDING_KEY]  # type: ignore[no-any-return]

    async def state(self, thread_id: str) -> dict[str, Any]:
        return _state_of(await self._run(self._ops.thread(thread_id)))

    async def is_current(self, thread_id: str, ttl_seconds: float | None = None) -> bool:
        ttl = self._ops._ttl(ttl_seconds)
        return interrupt_pending_is_current(await self.state(thread_id), ttl)

    async def list_pending(
        self, *, older_than: float | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        return await self._run(self._ops.list_pending(older_than, limit))

    async def history(self, thread_id: str) -> list[StoredEvent]:
        return await self._run(self._ops.history(thread_id))

    async def events(self, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        return await self._run(self._ops.events(after, limit))

    def replay(self, thread_id: str, *, until: int | datetime | None = None) -> _AsyncReplay:
        """``async for event, state in store.replay(t)`` (or ``await`` it for a list)."""
        t, query = self._ops.replay_query(thread_id, until)
        return _AsyncReplay(self._replay(t, query))

    async def _replay(
        self, thread_id: str, query: Any
    ) -> AsyncIterator[tuple[StoredEvent, dict[str, Any]]]:
        # Pages of events, each read in its own short transaction, folded as they come.
        from .projection import apply

        state = ThreadState(thread_id)
        last_version = 0
        page_size = 1000
        while True:
            page_query = query.where(query.selected_columns.version > last_version).limit(page_size)
            page = await self._run(Op(partial(read_page, query=page_query), write=False))
            for event in page:
                apply(state, event)
                yield event, state.as_state()
            if len(page) < page_size:
                return
            last_version = page[-1].version

    async def audit(
        self,
        *,
        thread_id: str | None = None,
        actor: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> list[AuditRecord]:
        return await self._run(self._ops.audit(thread_id, actor, since, until))

    async def verify(self, thread_id: str | None = None) -> VerifyReport:
        return await self._run(self._ops.verify(thread_id))
