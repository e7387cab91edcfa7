"""``AsyncInterruptStore``: the asyncio runner of the store's operations.

It drives the very plans :class:`~symfonic_store.InterruptStore` drives (see
:mod:`symfonic_store.store.ops`), by its runner
(:class:`~symfonic_store.store.runner.AsyncStoreRunner`): each database step through
``AsyncConnection.run_sync``, each callback awaited when it returns an awaitable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from sqlalchemy.engine import URL

from .. import validation
from ..db.engines import create_asyncio_engine
from ..db.translate import translate_errors
from ..db.urls import safe_url
from ..decisions import DecisionRule
from . import execute
from .integrations import Integrations
from .lifecycle import ApproverPolicy
from .ops import Operations, PlanFn
from .plan import copy_face
from .runner import AsyncStoreRunner

if TYPE_CHECKING:
    # sqlalchemy.ext.asyncio loads the ORM and asyncio (~0.1 s of CPU): imported where an
    # async store is made, so `import symfonic_store` and the CLI do not pay for it.
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")
P = ParamSpec("P")


class AsyncItems:
    """What a streaming method returns: iterate with ``async for``, or await it for a list."""

    def __init__(self, iterator: AsyncIterator[Any]) -> None:
        self._iterator = iterator

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterator

    def __await__(self) -> Generator[Any, None, list[Any]]:
        async def collect() -> list[Any]:
            return [item async for item in self._iterator]

        return collect().__await__()


class _Operation(Generic[P, T]):
    """A plan as a coroutine method of :class:`AsyncInterruptStore`."""

    def __init__(self, plan: PlanFn[P, T]) -> None:
        async def method(store: AsyncInterruptStore, /, *args: Any, **kwargs: Any) -> Any:
            return await store.runner.drive(plan(store.runner.operations, *args, **kwargs))

        copy_face(method, plan)
        self.method = method

    @overload
    def __get__(
        self, store: None, owner: type[Any]
    ) -> Callable[Concatenate[AsyncInterruptStore, P], Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(
        self, store: AsyncInterruptStore, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, store: AsyncInterruptStore | None, owner: type[Any]) -> Any:
        return self.method if store is None else self.method.__get__(store, owner)


class _Stream(Generic[P]):
    """A streaming plan as a method of :class:`AsyncInterruptStore` returning AsyncItems."""

    def __init__(self, plan: PlanFn[P, None]) -> None:
        def method(store: AsyncInterruptStore, /, *args: Any, **kwargs: Any) -> AsyncItems:
            return AsyncItems(store.runner.stream(plan(store.runner.operations, *args, **kwargs)))

        copy_face(method, plan, returns="AsyncItems")
        self.method = method

    @overload
    def __get__(
        self, store: None, owner: type[Any]
    ) -> Callable[Concatenate[AsyncInterruptStore, P], AsyncItems]: ...
    @overload
    def __get__(self, store: AsyncInterruptStore, owner: type[Any]) -> Callable[P, AsyncItems]: ...
    def __get__(self, store: AsyncInterruptStore | None, owner: type[Any]) -> Any:
        return self.method if store is None else self.method.__get__(store, owner)


class AsyncInterruptStore(Integrations):
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
        from sqlalchemy.ext.asyncio import AsyncEngine

        self._owns_engine = not isinstance(url_or_engine, AsyncEngine)
        self._engine = create_asyncio_engine(
            url_or_engine, sqlite_synchronous=sqlite_synchronous, busy_timeout=busy_timeout
        )
        self._runner = AsyncStoreRunner(self._engine, operations)

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
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine the store runs on."""
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
        """Release the store's connections."""
        await self.aclose()

    # Deliberately repeated: the async face mirrors store/sync.py method by method, each awaited;
    # what they do is in the shared plans.
    async def setup(self) -> None:
        """Migrate the database to the newest schema (idempotent)."""
        with translate_errors():
            async with self._engine.connect() as aconn:
                await aconn.run_sync(execute.setup)
        self._runner.schema_is_current()

    @property
    def runner(self) -> AsyncStoreRunner:
        """The integration port: runs the store's plans and steps (see
        :class:`~symfonic_store.store.runner.StoreRunner`); not for application code."""
        return self._runner

    # Deliberately the table of store/sync.py again: typed class attributes, so mypy and editors see
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
