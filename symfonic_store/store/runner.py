"""The one plan runner: the sync and async drivers side by side, and the integration port.

A plan (:mod:`.plan`) is driven the same way wherever it runs: send each step's result
into the generator (or throw the step's error back into it), run the next step, until
the plan returns. :func:`drive` and :func:`adrive` are that loop, once each for the two
kinds of caller, over any kind of step: the stores' (``Op``, ``Call``, ``Emit``) and the
gateway's (a graph call, a store call). :func:`stream` and :func:`astream` drive a
streaming plan, handing its :class:`~.plan.Emit` items to the caller.

How a store step runs is decided once, in :func:`run_step` and :func:`arun_step`: a
write ``Op`` made inside a LangGraph step goes to that step's transaction
(:mod:`.steps`), any other ``Op`` to the runner's connection, a ``Call`` to the user's
callback (awaited when it returns an awaitable, on the async side).

:class:`StoreRunner` and :class:`AsyncStoreRunner` are the integration port: each store
exposes its runner as ``store.runner``, and the LangGraph integration
(:mod:`symfonic_store.langgraph`) reaches the store only through it -- one ``Op`` in its
own transaction (``run``), a whole plan (``drive``), the write steps of an operation
without running them (``writes``), and the once-per-store schema check
(``ensure_schema``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.engine import Connection, Engine

from ..compat import outdated
from ..db.migrate import read_scripts
from ..db.translate import translate_errors
from ..errors import DatabaseError, SymfonicStoreError
from . import execute
from .append import Heads
from .ops import Operations
from .plan import Call, Emit, Op, Plan, Step, advance, start
from .steps import defer

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

S = TypeVar("S")
T = TypeVar("T")

Failed = Callable[[Exception, Any], BaseException]
"""``failed(error, step)``: what a failed step throws back into its plan (the gateway
tells a store failure apart from the graph's, SPEC §12); by default the error itself."""


# --- the drivers --------------------------------------------------------------------


def drive(plan: Generator[S, Any, T], step: Callable[[S], Any], failed: Failed | None = None) -> T:
    """Run ``plan`` to its result, each step by ``step``, a failed step thrown back into it."""
    # Deliberately repeated in adrive() with one await (see there).
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            next_step = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            result = step(next_step)
        except Exception as exc:
            error = exc if failed is None else failed(exc, next_step)


async def adrive(
    plan: Generator[S, Any, T], step: Callable[[S], Awaitable[Any]], failed: Failed | None = None
) -> T:
    """:func:`drive`, awaiting each step."""
    # Deliberately the loop of drive() again, with one await: a coroutine cannot share a
    # loop body with a plain function without making the sync runner await.
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            next_step = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            result = await step(next_step)
        except Exception as exc:
            error = exc if failed is None else failed(exc, next_step)


def stream(plan: Plan[None], step: Callable[[Step], Any]) -> Iterator[Any]:
    """The items a streaming plan emits; its first step runs now, so bad arguments fail
    at the call rather than at the first ``next()``."""
    return _stream(*start(plan), step)


def _stream(plan: Plan[None], first: Step | None, step: Callable[[Step], Any]) -> Iterator[Any]:
    current = first
    while current is not None:
        result: Any = None
        error: BaseException | None = None
        if isinstance(current, Emit):
            yield from current.items
        else:
            try:
                result = step(current)
            except Exception as exc:
                error = exc
        current = advance(plan, result, error)


def astream(plan: Plan[None], step: Callable[[Step], Awaitable[Any]]) -> AsyncIterator[Any]:
    """:func:`stream`, awaiting each step."""
    return _astream(*start(plan), step)


async def _astream(
    plan: Plan[None], first: Step | None, step: Callable[[Step], Awaitable[Any]]
) -> AsyncIterator[Any]:
    # Deliberately _stream() again, awaiting (see adrive).
    current = first
    while current is not None:
        result: Any = None
        error: BaseException | None = None
        if isinstance(current, Emit):
            for item in current.items:
                yield item
        else:
            try:
                result = await step(current)
            except Exception as exc:
                error = exc
        current = advance(plan, result, error)


# --- the store's steps ---------------------------------------------------------------


def run_step(step: Step, run: Callable[[Op[Any]], Any]) -> Any:
    """One step of a store plan: an ``Op`` by ``run`` (unless a LangGraph step takes it,
    :mod:`.steps`), a ``Call`` in line. (An ``Emit`` is the streaming drivers' to hand
    on: in a plan that returns a value it is a mistake.)"""
    if isinstance(step, Op):
        if defer(step):  # into a step's checkpoint transaction (store/steps.py)
            return None
        return run(step)
    assert isinstance(step, Call), "a value plan emitted items"
    return step.fn(*step.args)


async def arun_step(step: Step, run: Callable[[Op[Any]], Awaitable[Any]]) -> Any:
    """:func:`run_step` on the async side: a callback's awaitable is awaited."""
    if isinstance(step, Op):
        if defer(step):
            return None
        return await run(step)
    assert isinstance(step, Call), "a value plan emitted items"
    result = step.fn(*step.args)
    if inspect.isawaitable(result):
        result = await result
    return result


def write_steps(plan: Plan[Any], method: str) -> list[Op[Any]]:
    """The write steps of ``plan`` (validation included), collected instead of run."""
    ops: list[Op[Any]] = []

    def keep(step: Step) -> None:
        assert isinstance(step, Op) and step.write, f"{method} is not a plan of writes"
        ops.append(step)

    drive(plan, keep)
    return ops


# --- the integration port --------------------------------------------------------------


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


class _Port:
    """What both runners share: the operations, and whether the schema was checked."""

    def __init__(self, operations: Operations) -> None:
        self.operations = operations
        """The store's table of operations (:class:`~.ops.Operations`): its plans."""
        self._schema_ok = False
        self.heads: Heads | None = Heads()
        """The heads of the threads this store wrote last (the single-append path);
        None: every write takes the transactional path."""

    def ensure_schema(self, conn: Connection) -> None:
        """Raise :class:`~symfonic_store.SchemaNotMigratedError` unless the schema is at
        head, asking the database once per store (on ``conn``, a sync connection)."""
        if not self._schema_ok:
            execute.check_schema(conn)
            self._schema_ok = True

    def schema_is_current(self) -> None:
        """Note that the schema is at head (the store just migrated it)."""
        self._schema_ok = True

    def writes(self, method: str, /, *args: Any, **kwargs: Any) -> list[Op[Any]]:
        """The write steps of the store operation ``method`` with these arguments, not run:
        for an integration to commit in a transaction of its own (the checkpointer's).
        The plan both stores run, its validation included.

        Raises:
            InvalidInputError: a bad argument, as the store method would raise it.
        """
        return write_steps(getattr(Operations, method)(self.operations, *args, **kwargs), method)


class StoreRunner(_Port):
    """``InterruptStore.runner``: the integration port of the synchronous store.

    Integrations (the LangGraph checkpointer) use this, never the store's private names:

    - :meth:`run` runs one :class:`~symfonic_store.store.plan.Op` in its own transaction
      (a write retried on a lost race), on the store's connection;
    - :meth:`drive` runs a whole plan of the store's operations;
    - :meth:`writes` gives an operation's write steps without running them;
    - :meth:`ensure_schema` checks the schema once per store on a connection of the
      integration's own.
    """

    def __init__(self, engine: Engine, operations: Operations, *, hold: bool) -> None:
        super().__init__(operations)
        self.engine = engine
        self._hold = hold
        self._held = _Held()

    def run(self, op: Op[T]) -> T:
        """Run ``op`` in a transaction of its own (a write in a retried write transaction)."""
        held = self._held
        # An engine the caller made keeps its whole pool for the caller: hold nothing.
        if not self._hold or not held.lock.acquire(blocking=False):
            with translate_errors(), self.engine.connect() as pooled:
                return self._run_on(pooled, op)
        try:
            kept = held.conn
            # Outdated: another call lost the server it reached (a failover, a restart).
            if kept is None or kept.closed or kept.invalidated or outdated(kept):
                held.drop()
                with translate_errors():
                    kept = self.engine.connect()
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
        self.ensure_schema(conn)
        return execute.execute(conn, op, self.heads)

    def step(self, step: Step) -> Any:
        """Run one step of a plan (see :func:`run_step`)."""
        return run_step(step, self.run)

    def drive(self, plan: Plan[T]) -> T:
        """Run a plan to its result, throwing a failed step back into it."""
        return drive(plan, self.step)

    def stream(self, plan: Plan[None]) -> Iterator[Any]:
        """The items of a streaming plan (its first step runs now)."""
        return stream(plan, self.step)

    def release(self) -> None:
        """Give back the connection held between calls."""
        with self._held.lock:
            self._held.drop()


class AsyncStoreRunner(_Port):
    """``AsyncInterruptStore.runner``: the integration port of the asyncio store.

    As :class:`StoreRunner`, with :meth:`run` and :meth:`drive` coroutines: each ``Op``
    runs through ``AsyncConnection.run_sync`` on a connection of the store's engine.
    """

    def __init__(self, engine: AsyncEngine, operations: Operations) -> None:
        super().__init__(operations)
        self.engine = engine

    async def run(self, op: Op[T]) -> T:
        """Run ``op`` in a transaction of its own (a write in a retried write transaction)."""
        if not self._schema_ok:
            # Alembic reads its scripts from files: in a thread, never on the event loop.
            await asyncio.to_thread(read_scripts)
        with translate_errors():
            async with self.engine.connect() as aconn:
                if not self._schema_ok:
                    await aconn.run_sync(self.ensure_schema)
                return await aconn.run_sync(execute.execute, op, self.heads)

    async def step(self, step: Step) -> Any:
        """Run one step of a plan (see :func:`arun_step`)."""
        return await arun_step(step, self.run)

    async def drive(self, plan: Plan[T]) -> T:
        """Run a plan to its result, throwing a failed step back into it."""
        return await adrive(plan, self.step)

    def stream(self, plan: Plan[None]) -> AsyncIterator[Any]:
        """The items of a streaming plan (its first step runs now)."""
        return astream(plan, self.step)


__all__ = [
    "AsyncStoreRunner",
    "StoreRunner",
    "adrive",
    "arun_step",
    "astream",
    "drive",
    "run_step",
    "stream",
    "write_steps",
]


def is_async_store(store: object) -> bool:
    """Is ``store`` an :class:`~symfonic_store.AsyncInterruptStore` (its runner the asyncio
    one)? Integrations ask this instead of importing the store classes, so the store layer,
    which hands out their checkpointers, never finds itself imported back."""
    return isinstance(getattr(store, "runner", None), AsyncStoreRunner)
