"""``InterruptStore``: the synchronous runner of the store's operations.

Every public method is a plan of :class:`~symfonic_store.store.ops.Operations`; this
class only drives plans: each database step on a pooled connection, each callback in
line. :class:`~symfonic_store.AsyncInterruptStore` drives the same plans.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from sqlalchemy.engine import URL, Connection, Engine

from .. import validation
from ..db.engines import create_sync_engine
from ..db.translate import translate_errors
from ..db.urls import safe_url
from ..decisions import DecisionRule
from ..errors import DatabaseError, SymfonicStoreError
from . import execute
from .integrations import Integrations
from .lifecycle import ApproverPolicy
from .ops import Operations, PlanFn
from .plan import Call, Emit, Op, Plan, Step, advance, copy_face, start
from .steps import defer

T = TypeVar("T")
P = ParamSpec("P")


class _Operation(Generic[P, T]):
    """A plan as a method of :class:`InterruptStore`."""

    def __init__(self, plan: PlanFn[P, T]) -> None:
        def method(store: InterruptStore, /, *args: Any, **kwargs: Any) -> Any:
            return store._drive(plan(store._ops, *args, **kwargs))

        copy_face(method, plan)
        self.method = method

    @overload
    def __get__(self, store: None, owner: type[Any]) -> Callable[Concatenate[InterruptStore, P], T]: ...
    @overload
    def __get__(self, store: InterruptStore, owner: type[Any]) -> Callable[P, T]: ...
    def __get__(self, store: InterruptStore | None, owner: type[Any]) -> Any:
        return self.method if store is None else self.method.__get__(store, owner)


class _Stream(Generic[P]):
    """A streaming plan as a method of :class:`InterruptStore` returning an iterator."""

    def __init__(self, plan: PlanFn[P, None]) -> None:
        def method(store: InterruptStore, /, *args: Any, **kwargs: Any) -> Iterator[Any]:
            return store._stream(start(plan(store._ops, *args, **kwargs)))

        copy_face(method, plan, returns="Iterator")
        self.method = method

    @overload
    def __get__(
        self, store: None, owner: type[Any]
    ) -> Callable[Concatenate[InterruptStore, P], Iterator[Any]]: ...
    @overload
    def __get__(self, store: InterruptStore, owner: type[Any]) -> Callable[P, Iterator[Any]]: ...
    def __get__(self, store: InterruptStore | None, owner: type[Any]) -> Any:
        return self.method if store is None else self.method.__get__(store, owner)


class _Held:
    """The one connection a store keeps checked out between calls.

    Checking a connection out of SQLAlchemy's pool and back in (with its reset) costs
    about as much as an append's statements on SQLite. A store keeps one connection for
    whichever thread calls it while nobody else does; a call that finds it in use runs on
    a pooled connection as before, so threads never share a connection at the same time.
    Only a store that made its engine (from a URL) holds one: an engine the caller passed
    keeps all its pooled connections for the caller.
    """

    __slots__ = ("conn", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.conn: Connection | None = None

    def drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a dead connection: nothing left to release
                pass


def _release(held: _Held) -> None:
    with held.lock:
        held.drop()


class InterruptStore(Integrations):
    """The synchronous store.

    Args:
        url_or_engine: ``sqlite:///path.db`` (the embedded default),
            ``postgresql+psycopg://user@host/db``, or a SQLAlchemy ``Engine``.
        ttl_seconds: how long a pending interrupt stays current; None for no TTL.
        approvers: who may resume: None (anyone), ``"payload"`` (the marker payload's
            ``approvers`` list, when it has one) or ``callable(thread_id, marker, actor)``.
            The actor is whatever the caller passes: the Python API and the CLI trust
            their caller; the HTTP service passes the authenticated principal.
        max_payload_bytes: the largest JSON payload or response accepted (1 MiB).
        decisions: ``fn(name, response) -> str | None``, asked first for the decision of
            each admitted answer (SPEC §12); None falls back to the built-in rules. A
            word outside ``[a-z0-9_]{1,32}``, or an exception, refuses the answer
            (:class:`InvalidInputError`, nothing written).
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
        decisions: DecisionRule | None = None,
        sqlite_synchronous: str = "FULL",
        busy_timeout: float = 5.0,
    ) -> None:
        self._ops = Operations(
            ttl_seconds=ttl_seconds,
            approvers=approvers,
            max_payload_bytes=max_payload_bytes,
            decisions=decisions,
        )
        self._owns_engine = not isinstance(url_or_engine, Engine)
        self._engine = create_sync_engine(
            url_or_engine, sqlite_synchronous=sqlite_synchronous, busy_timeout=busy_timeout
        )
        self._schema_ok = False
        self._held = _Held()
        # Returned to the pool when the store is closed or collected, never left open.
        self._release = weakref.finalize(self, _release, self._held)

    @property
    def ttl_seconds(self) -> float | None:
        """The store's TTL: the default for ``is_current``, ``sweep``, resume and routers."""
        return self._ops.ttl_seconds

    @property
    def max_payload_bytes(self) -> int | None:
        """The largest JSON payload or response the store accepts, in bytes (None: no limit)."""
        return self._ops.max_payload_bytes

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine the store runs on."""
        return self._engine

    def __repr__(self) -> str:
        return f"InterruptStore({safe_url(self._engine.url)!r}, ttl_seconds={self.ttl_seconds!r})"

    def __enter__(self) -> InterruptStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the store's connections."""
        self._release()
        if self._owns_engine:
            self._engine.dispose()

    def setup(self) -> None:
        """Migrate the database to the newest schema (idempotent)."""
        with translate_errors(), self._engine.connect() as conn:
            execute.setup(conn)
        self._schema_ok = True

    # --- the runner ---------------------------------------------------------------

    def _run(self, op: Op[T]) -> T:
        held = self._held
        # An engine the caller made keeps its whole pool for the caller: hold nothing.
        if not self._owns_engine or not held.lock.acquire(blocking=False):
            with translate_errors(), self._engine.connect() as pooled:
                return self._run_on(pooled, op)
        try:
            kept = held.conn
            if kept is None or kept.closed or kept.invalidated:
                held.drop()
                with translate_errors():
                    kept = self._engine.connect()
                held.conn = kept
            try:
                with translate_errors():
                    return self._run_on(kept, op)
            except BaseException as exc:
                if isinstance(exc, DatabaseError) or not isinstance(exc, SymfonicStoreError):
                    held.drop()  # the database failed, or we were cut off: start afresh
                raise
        finally:
            held.lock.release()

    def _run_on(self, conn: Connection, op: Op[T]) -> T:
        if not self._schema_ok:
            execute.check_schema(conn)
            self._schema_ok = True
        return execute.execute(conn, op)

    def _step(self, step: Op[Any] | Call) -> Any:
        if isinstance(step, Op):
            if defer(step):  # into a step's checkpoint transaction (store/steps.py)
                return None
            return self._run(step)
        return step.fn(*step.args)

    def _drive(self, plan: Plan[T]) -> T:
        """Run a plan to its result, throwing a failed step back into it."""
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = plan.send(result) if error is None else plan.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            result, error = None, None
            assert not isinstance(step, Emit), "a value plan emitted items"
            try:
                result = self._step(step)
            except Exception as exc:
                error = exc

    def _stream(self, started: tuple[Plan[None], Step | None]) -> Iterator[Any]:
        plan, step = started
        while step is not None:
            result: Any = None
            error: BaseException | None = None
            if isinstance(step, Emit):
                yield from step.items
            else:
                try:
                    result = self._step(step)
                except Exception as exc:
                    error = exc
            step = advance(plan, result, error)

    # --- the operations (see store/ops.py) -----------------------------------------

    mint = _Operation(Operations.mint)
    record_route = _Operation(Operations.record_route)
    record_router_decision = _Operation(Operations.record_router_decision)
    resume = _Operation(Operations.resume)
    admit_node_resume = _Operation(Operations.admit_node_resume)
    expire = _Operation(Operations.expire)
    record_refusal = _Operation(Operations.record_refusal)
    record_waiting = _Operation(Operations.record_waiting)
    claim = _Operation(Operations.claim)
    confirm = _Operation(Operations.confirm)
    release = _Operation(Operations.release)
    settle = _Operation(Operations.settle)
    record_task_writes = _Operation(Operations.record_task_writes)
    record_checkpoint_moved = _Operation(Operations.record_checkpoint_moved)
    interrupt_record = _Operation(Operations.interrupt_record)
    sweep = _Operation(Operations.sweep)
    rebuild_projection = _Operation(Operations.rebuild_projection)
    pending = _Operation(Operations.pending)
    state = _Operation(Operations.state)
    is_current = _Operation(Operations.is_current)
    list_pending = _Operation(Operations.list_pending)
    open_interrupts = _Operation(Operations.open_interrupts)
    owed_wakeups = _Operation(Operations.owed_wakeups)
    list_wakeups = _Operation(Operations.list_wakeups)
    drop_wakeups = _Operation(Operations.drop_wakeups)
    history = _Operation(Operations.history)
    events = _Operation(Operations.events)
    iter_events = _Stream(Operations.iter_events)
    reader_lag = _Operation(Operations.reader_lag)
    replay = _Stream(Operations.replay)
    audit = _Operation(Operations.audit)
    verify = _Operation(Operations.verify)
    checkpoint = _Operation(Operations.checkpoint)
    verify_checkpoint = _Operation(Operations.verify_checkpoint)
    verify_chain = _Operation(Operations.verify_chain)
    archive = _Operation(Operations.archive)
