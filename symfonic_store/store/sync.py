"""``InterruptStore``: the synchronous runner of the store's operations.

Every public method is a plan of :class:`~symfonic_store.store.ops.Operations`, driven by
the store's runner (:class:`~symfonic_store.store.runner.StoreRunner`): each database
step on the store's connection, each callback in line.
:class:`~symfonic_store.AsyncInterruptStore` drives the same plans.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from sqlalchemy.engine import URL, Engine

from .. import validation
from ..db.engines import create_sync_engine
from ..db.translate import translate_errors
from ..db.urls import safe_url
from ..decisions import DecisionRule
from . import execute
from .integrations import Integrations
from .lifecycle import ApproverPolicy
from .ops import Operations, PlanFn
from .plan import copy_face
from .runner import StoreRunner

T = TypeVar("T")
P = ParamSpec("P")


class _Operation(Generic[P, T]):
    """A plan as a method of :class:`InterruptStore`."""

    def __init__(self, plan: PlanFn[P, T]) -> None:
        def method(store: InterruptStore, /, *args: Any, **kwargs: Any) -> Any:
            return store.runner.drive(plan(store.runner.operations, *args, **kwargs))

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
            return store.runner.stream(plan(store.runner.operations, *args, **kwargs))

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
        operations = Operations(
            ttl_seconds=ttl_seconds,
            approvers=approvers,
            max_payload_bytes=max_payload_bytes,
            decisions=decisions,
        )
        self._owns_engine = not isinstance(url_or_engine, Engine)
        self._engine = create_sync_engine(
            url_or_engine, sqlite_synchronous=sqlite_synchronous, busy_timeout=busy_timeout
        )
        self._runner = StoreRunner(self._engine, operations, hold=self._owns_engine)
        # Returned to the pool when the store is closed or collected, never left open.
        self._release = weakref.finalize(self, self._runner.release)

    @property
    def ttl_seconds(self) -> float | None:
        """The store's TTL: the default for ``is_current``, ``sweep``, resume and routers."""
        return self._runner.operations.ttl_seconds

    @property
    def decisions(self) -> DecisionRule | None:
        """The ``decisions=`` function the store names answers' decisions with (SPEC §12),
        or None for the built-in rules."""
        return self._runner.operations.rules.decisions

    @property
    def max_payload_bytes(self) -> int | None:
        """The largest JSON payload or response the store accepts, in bytes (None: no limit)."""
        return self._runner.operations.max_payload_bytes

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

    # Deliberately repeated: store/aio.py mirrors this face method by method, each awaited; what
    # they do is in the shared plans.
    def setup(self) -> None:
        """Migrate the database to the newest schema (idempotent)."""
        with translate_errors(), self._engine.connect() as conn:
            execute.setup(conn)
        self._runner.schema_is_current()

    @property
    def runner(self) -> StoreRunner:
        """The integration port: runs the store's plans and steps (see
        :class:`~symfonic_store.store.runner.StoreRunner`); not for application code."""
        return self._runner

    # Deliberately the table of store/aio.py again: typed class attributes, so mypy and editors see
    # each public method (a loop of setattr would hide them).
    # --- the operations (see store/ops.py) -----------------------------------------

    mint = _Operation(Operations.mint)
    record_route = _Operation(Operations.record_route)
    record_router_decision = _Operation(Operations.record_router_decision)
    resume = _Operation(Operations.resume)
    admit_node_resume = _Operation(Operations.admit_node_resume)
    expire = _Operation(Operations.expire)
    record_refusal = _Operation(Operations.record_refusal)
    claim_marker_run = _Operation(Operations.claim_marker_run)
    end_marker_run = _Operation(Operations.end_marker_run)
    record_waiting = _Operation(Operations.record_waiting)
    claim = _Operation(Operations.claim)
    confirm = _Operation(Operations.confirm)
    release = _Operation(Operations.release)
    settle = _Operation(Operations.settle)
    record_task_writes = _Operation(Operations.record_task_writes)
    record_checkpoint_moved = _Operation(Operations.record_checkpoint_moved)
    interrupt_record = _Operation(Operations.interrupt_record)
    sweep = _Operation(Operations.sweep)
    escalations = _Operation(Operations.escalations)
    assign = _Operation(Operations.assign)
    record_assign_refusal = _Operation(Operations.record_assign_refusal)
    admit_assignee = _Operation(Operations.admit_assignee)
    vote = _Operation(Operations.vote)
    votes = _Operation(Operations.votes)
    assignment = _Operation(Operations.assignment)
    rebuild_projection = _Operation(Operations.rebuild_projection)
    pending = _Operation(Operations.pending)
    state = _Operation(Operations.state)
    is_current = _Operation(Operations.is_current)
    list_pending = _Operation(Operations.list_pending)
    interrupt_tenants = _Operation(Operations.interrupt_tenants)
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
