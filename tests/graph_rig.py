"""A real refund agent graph, its store and its checkpointer, on one database.

Shared by the LangGraph end-to-end tests. ``open_rig(db_url, driver)`` builds the
canonical agent (:func:`symfonic_store.demo.build_agent_graph`) with the scripted model, a
store and a LangGraph checkpointer on the *same* database: SQLite file or PostgreSQL
schema. ``driver`` picks the entry points: ``"invoke"`` (InterruptStore, SqliteSaver /
PostgresSaver, ``graph.invoke``) or ``"ainvoke"`` (AsyncInterruptStore, AsyncSqliteSaver /
AsyncPostgresSaver, ``graph.ainvoke``). Tests are written once as coroutines and call
the rig, which runs the sync or the async API underneath.
"""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiosqlite
import psycopg
import sqlalchemy as sa
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from psycopg.rows import dict_row

from symfonic_store import AsyncInterruptStore, InterruptStore
from symfonic_store.demo import RefundLedger, build_agent_graph, refund_tools
from symfonic_store.langgraph import make_async_graph_waker, make_graph_waker

REFUND_REQUEST = "Please refund $420 to order 1181."


async def ready(value: Any) -> Any:
    """The value, awaited when the async store or graph returned an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


def libpq_conninfo(url: str) -> str:
    """The SQLAlchemy PostgreSQL URL as a libpq URI (keeps ``options=-csearch_path=...``)."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def config_for(thread_id: str, **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, **configurable}}


@dataclass
class Rig:
    """One graph with its store and checkpointer, driven through ``invoke`` or ``ainvoke``."""

    driver: str
    backend: str
    url: str
    store: Any
    graph: Any
    saver: Any
    ledger: RefundLedger = field(default_factory=RefundLedger)

    @property
    def is_async(self) -> bool:
        return self.driver == "ainvoke"

    async def s(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a store method, awaiting it on the async store."""
        return await ready(getattr(self.store, method)(*args, **kwargs))

    async def invoke(self, value: Any, thread_id: str, **configurable: Any) -> dict[str, Any]:
        config = config_for(thread_id, **configurable)
        if self.is_async:
            return dict(await self.graph.ainvoke(value, config))
        return dict(self.graph.invoke(value, config))

    async def ask(self, thread_id: str, text: str = REFUND_REQUEST, **state: Any) -> dict[str, Any]:
        """Send a person's message (plus any state, e.g. ``run_id``) as new input."""
        return await self.invoke({"messages": [HumanMessage(text)], **state}, thread_id)

    async def start(self, thread_id: str, run_id: str = "r1") -> str:
        """Ask for a refund; return the id of the approval interrupt the graph paused on."""
        out = await self.ask(thread_id, run_id=run_id)
        (paused,) = out["__interrupt__"]
        return str(paused.value["interrupt_id"])

    async def get_state(self, thread_id: str) -> Any:
        config = config_for(thread_id)
        if self.is_async:
            return await self.graph.aget_state(config)
        return self.graph.get_state(config)

    async def update_state(self, thread_id: str, values: dict[str, Any], as_node: str) -> Any:
        config = config_for(thread_id)
        if self.is_async:
            return await self.graph.aupdate_state(config, values, as_node=as_node)
        return self.graph.update_state(config, values, as_node=as_node)

    def waker(self) -> Any:
        return make_async_graph_waker(self.graph) if self.is_async else make_graph_waker(self.graph)

    async def messages(self, thread_id: str) -> list[BaseMessage]:
        return list((await self.get_state(thread_id)).values["messages"])

    async def types(self, thread_id: str) -> list[str]:
        return [e.type for e in await self.s("history", thread_id)]


def tool_messages(messages: list[BaseMessage], tool_call_id: str) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == tool_call_id]


def mentions(messages: list[BaseMessage], text: str) -> bool:
    return any(text in str(m.content) for m in messages)


SAVER_BUSY_TIMEOUT = 30.0


def new_store(url: str, driver: str, ttl_seconds: float | None = None) -> Any:
    return (AsyncInterruptStore if driver == "ainvoke" else InterruptStore)(url, ttl_seconds=ttl_seconds)


@asynccontextmanager
async def open_saver(url: str, driver: str) -> AsyncIterator[Any]:
    """The LangGraph checkpointer on the store's own database (same file / same schema).

    On SQLite the savers wait up to 30 s for the write lock (sqlite3's default is 5 s):
    the race tests line four graphs, four stores and four savers up on one file, and on
    a loaded two-core CI machine a saver's error write once waited its 5 s out.
    """
    if url.startswith("sqlite"):
        path = sa.make_url(url).database
        assert path
        if driver == "ainvoke":
            async with aiosqlite.connect(path, timeout=SAVER_BUSY_TIMEOUT) as aconn:
                yield AsyncSqliteSaver(aconn)
        else:
            conn = sqlite3.connect(path, check_same_thread=False, timeout=SAVER_BUSY_TIMEOUT)
            try:
                yield SqliteSaver(conn)
            finally:
                conn.close()
        return
    conninfo = libpq_conninfo(url)
    if driver == "ainvoke":
        async with await psycopg.AsyncConnection.connect(
            conninfo, autocommit=True, row_factory=dict_row
        ) as aconn:
            saver = AsyncPostgresSaver(aconn)
            await saver.setup()
            yield saver
    else:
        with psycopg.connect(conninfo, autocommit=True, row_factory=dict_row) as conn:
            saver = PostgresSaver(conn)
            saver.setup()
            yield saver


@asynccontextmanager
async def open_rig(
    url: str, driver: str, *, ttl_seconds: float | None = None
) -> AsyncIterator[Rig]:
    """Store + checkpointer + compiled agent graph on one database, closed afterwards."""
    store = new_store(url, driver, ttl_seconds)
    await ready(store.setup())
    try:
        async with open_saver(url, driver) as saver:
            ledger = RefundLedger()
            graph = build_agent_graph(store, checkpointer=saver, tools=refund_tools(ledger))
            yield Rig(
                driver=driver,
                backend="sqlite" if url.startswith("sqlite") else "postgresql",
                url=url,
                store=store,
                graph=graph,
                saver=saver,
                ledger=ledger,
            )
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


@asynccontextmanager
async def open_own_rig(
    url: str, driver: str, *, ttl_seconds: float | None = None
) -> AsyncIterator[Rig]:
    """The agent graph compiled with the store's own checkpointer (``store.checkpointer()``)."""
    store = new_store(url, driver, ttl_seconds)
    await ready(store.setup())
    try:
        saver = store.checkpointer()
        await ready(saver.setup())
        ledger = RefundLedger()
        graph = build_agent_graph(store, checkpointer=saver, tools=refund_tools(ledger))
        yield Rig(
            driver=driver,
            backend="sqlite" if url.startswith("sqlite") else "postgresql",
            url=url,
            store=store,
            graph=graph,
            saver=saver,
            ledger=ledger,
        )
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


__all__ = [
    "REFUND_REQUEST",
    "Command",
    "Rig",
    "config_for",
    "libpq_conninfo",
    "mentions",
    "new_store",
    "open_own_rig",
    "open_rig",
    "open_saver",
    "ready",
    "tool_messages",
]
