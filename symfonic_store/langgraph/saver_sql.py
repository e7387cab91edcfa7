"""LangGraph's savers, bound to one of the store's connections: the SQL of their tables.

:class:`SaverSql` chooses, once per checkpointer, the saver for the store's backend
(``SqliteSaver``, ``PostgresSaver``, ``AsyncPostgresSaver``) and runs its SQL on the
connection of a store transaction, so one COMMIT covers the checkpoint and the events.
"""

from __future__ import annotations

import asyncio
import copy
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from sqlalchemy.engine import Connection

from ..compat import await_in_greenlet
from ..db import checkpoints as tables

if TYPE_CHECKING:
    from ..db.backends import Backend


def serializer() -> JsonPlusSerializer:
    """LangGraph's JSON-plus serialiser, never falling back to pickle."""
    return JsonPlusSerializer(pickle_fallback=False)


def _await(awaitable: Any) -> Any:
    """Await from the synchronous code ``AsyncConnection.run_sync`` runs (a greenlet)."""
    return await_in_greenlet(awaitable)


# --- LangGraph's savers, bound to one of the store's connections --------------------


class _SqliteSql(SqliteSaver):
    """``SqliteSaver``'s SQL on the connection it is bound to, in the caller's transaction.

    ``cursor()`` is the one place ``SqliteSaver`` takes its lock, runs ``setup()`` and
    COMMITs; bound, it does none of that: the store opened the transaction and commits it.
    """

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[Any]:
        cur = self.conn.cursor()
        try:
            yield cur
        finally:
            cur.close()


class _AwaitingSqlite:
    """The two calls ``SqliteSaver.setup()`` makes, on aiosqlite from a greenlet."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def executescript(self, script: str) -> Any:
        return _await(self._connection.executescript(script))

    def execute(self, sql: str, *parameters: Any) -> Any:
        return _await(self._connection.execute(sql, *parameters))


_POSTGRES_CLASSES: tuple[type[Any], type[Any]] | None = None


def _postgres_classes() -> tuple[type[Any], type[Any]]:
    """``PostgresSaver`` bound (:class:`_PostgresSql`'s shape) and ``AsyncPostgresSaver``
    (psycopg loaded on demand).

    ``PostgresSaver`` runs a ``put``'s statements in a pipeline of its own, synced when it
    ends: inside the store's pipelined transaction that is two round trips more (a Sync
    entering, one leaving). Bound, its ``_cursor`` is a plain cursor on the store's
    connection: the statements join the store's transaction (and its pipeline, when it
    has one), so a step's BEGIN, writers' lock, LangGraph's writes and COMMIT travel
    together. ``AsyncPostgresSaver`` is used as it is (the asyncio store's transactions
    run through SQLAlchemy, not in a pipeline), under the bound copy's own ``lock``.
    """
    global _POSTGRES_CLASSES
    if _POSTGRES_CLASSES is not None:
        return _POSTGRES_CLASSES
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
    except ImportError as exc:  # pragma: no cover - the postgres extra names it
        raise ImportError(
            "store.checkpointer() on PostgreSQL needs langgraph-checkpoint-postgres and "
            "psycopg: pip install '.[postgres]' in a checkout of symfonic-store"
        ) from exc

    class _PostgresSql(PostgresSaver):
        """``PostgresSaver``'s SQL on the connection it is bound to, in the caller's
        transaction: no pipeline or savepoint of its own, no lock (one caller per
        connection)."""

        @contextmanager
        def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
            conn: Any = self.conn  # bound: one of the store's psycopg connections, never a pool
            with conn.cursor(binary=True, row_factory=dict_row) as cur:
                yield cur

    _POSTGRES_CLASSES = (_PostgresSql, AsyncPostgresSaver)
    return _POSTGRES_CLASSES


def _sqlite_classes() -> tuple[type[Any], type[Any] | None]:
    """``SqliteSaver`` (:class:`_SqliteSql`'s shape); no async twin: the asyncio store
    drives it through ``run_sync``."""
    return _SqliteSql, None


SAVER_CLASSES: dict[str, Callable[[], tuple[type[Any], type[Any] | None]]] = {
    "sqlite": _sqlite_classes,
    "postgres": _postgres_classes,
}
"""LangGraph's saver classes (sync, async) by the backend's ``checkpoint_saver``. Here,
not in ``db/backends/``: the database layer does not import LangGraph; a backend names
its saver and a new saver adds its entry."""

_SAVERS = "symfonic_savers"
"""The key, in a DBAPI connection's ``info``, of its savers by :class:`SaverSql` (weakly)."""


class SaverSql:
    """LangGraph's saver for the store's backend, bound to a connection call by call.

    Chosen once, when the checkpointer is made: ``SqliteSaver`` on SQLite (the asyncio
    store drives it through ``run_sync``, on SQLAlchemy's greenlet-adapted aiosqlite
    connection), ``PostgresSaver`` on PostgreSQL, ``AsyncPostgresSaver`` under the
    asyncio store (its coroutines awaited from inside ``run_sync``).
    """

    def __init__(self, backend: Backend, *, asynchronous: bool) -> None:
        self.serde = serializer()
        self.backend = backend
        self.layout = backend.checkpoint_layout
        self.awaits = backend.async_checkpoint_saver and asynchronous
        sync_class, self._async_class = SAVER_CLASSES[backend.checkpoint_saver]()
        self._template: Any = sync_class(None, serde=self.serde)
        if not backend.checkpoint_setup_autocommit:
            self._template.is_setup = True  # setup() is the store's to call, once (SqliteSaver)
        self._async_template: Any = None

    def bind(self, conn: Connection) -> Any:
        """The saver, on ``conn``'s driver connection.

        One shallow copy per DBAPI connection, kept in its ``info`` (a connection is
        used by one caller at a time, and the copy's only state is that connection), by
        this object held weakly: a pooled connection outlives the checkpointers made
        on it, and must not keep each one's saver alive (nor grow by one per checkpointer).
        """
        savers = conn.info.get(_SAVERS)
        if savers is None:
            savers = conn.info[_SAVERS] = weakref.WeakKeyDictionary()
        saver = savers.get(self)
        if saver is not None:
            return saver
        if self.awaits:
            if self._async_template is None:
                assert self._async_class is not None  # awaits: the backend has an async saver
                # AsyncPostgresSaver notes the running loop when made: make it in the loop.
                self._async_template = self._async_class(None, serde=self.serde)
            saver = copy.copy(self._async_template)
            saver.conn = conn.connection.driver_connection
            saver.lock = asyncio.Lock()  # the copy's own: one connection, one lock
        else:
            saver = copy.copy(self._template)
            saver.conn = conn.connection.dbapi_connection
        savers[self] = saver
        return saver

    def call(self, conn: Connection, method: str, *args: Any, **kwargs: Any) -> Any:
        """``saver.method(...)`` bound to ``conn`` (``saver.amethod`` awaited, when async)."""
        saver = self.bind(conn)
        if self.awaits:
            return _await(getattr(saver, "a" + method)(*args, **kwargs))
        return getattr(saver, method)(*args, **kwargs)

    def tuples(self, conn: Connection, config: Any, **kwargs: Any) -> list[CheckpointTuple]:
        """Every tuple ``saver.list`` yields, read on the call's connection."""
        saver = self.bind(conn)
        if self.awaits:

            async def collect() -> list[CheckpointTuple]:
                return [t async for t in saver.alist(config, **kwargs)]

            return _await(collect())  # type: ignore[no-any-return]
        return list(saver.list(config, **kwargs))

    def setup(self, conn: Connection) -> None:
        """Create (or migrate) the saver's tables: its own ``setup()``, outside a transaction."""
        if not self.backend.checkpoint_setup_autocommit:
            saver = copy.copy(self._template)
            dbapi = conn.connection.dbapi_connection
            driver = conn.connection.driver_connection
            saver.conn = dbapi if driver is dbapi else _AwaitingSqlite(driver)
            saver.is_setup = False
            SqliteSaver.setup(saver)
            return
        pause = 0.01
        while not conn.execute(tables.setup_lock()).scalar_one():
            time.sleep(pause)  # another process is creating the tables (db/checkpoints.py)
            pause = min(pause * 2, 0.5)
        try:
            saver = self.bind(conn)
            if self.awaits:
                _await(saver.setup())
            else:
                saver.setup()
        finally:
            conn.execute(tables.setup_unlock())

    def prune(self, conn: Connection, thread_ids: list[str], strategy: str) -> None:
        """PostgreSQL: the saver's own ``prune``, which runs its own transactions."""
        self.call(conn, "prune", thread_ids, strategy=strategy)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self._template.get_next_version(current, channel)
