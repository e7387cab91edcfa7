"""The canary of symfonic_store.compat: every private LangGraph and SQLAlchemy name the
store relies on still exists, and still behaves as relied on.

A release of either that moves or changes one must fail here, loudly, not misbehave
quietly deep in the store. And no module but compat.py reaches them.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig

from symfonic_store import compat

PACKAGE = Path(compat.__file__).parent

# --- LangGraph -----------------------------------------------------------------------


def test_the_channel_and_config_names_are_where_the_integration_reads_them() -> None:
    """RESUME, INTERRUPT, ERROR and the scratchpad key exist with the values relied on."""
    from langgraph._internal import _constants

    assert _constants.RESUME == "__resume__"
    assert _constants.INTERRUPT == "__interrupt__"
    assert _constants.ERROR == "__error__"
    assert _constants.CONFIG_KEY_SCRATCHPAD == "__pregel_scratchpad"
    # store.checkpointer(): a task's config names its checkpointer, task and step.
    assert _constants.CONFIG_KEY_CHECKPOINTER == "__pregel_checkpointer"
    assert _constants.CONFIG_KEY_TASK_ID == "__pregel_task_id"
    assert _constants.CONFIG_KEY_CHECKPOINT_MAP == "checkpoint_map"
    assert _constants.NS_SEP == "|"


@pytest.mark.parametrize(
    "name",
    [
        "RESUME", "INTERRUPT", "ERROR", "NS_SEP", "CONFIG_KEY_SCRATCHPAD",
        "CONFIG_KEY_CHECKPOINTER", "CONFIG_KEY_TASK_ID", "CONFIG_KEY_CHECKPOINT_MAP",
    ],
)
def test_compat_found_langgraphs_own_constants_not_their_fallbacks(name: str) -> None:
    from langgraph._internal import _constants

    assert getattr(compat, name) is getattr(_constants, name)


def test_compat_has_no_other_langgraph_name() -> None:
    with pytest.raises(AttributeError):
        compat.NOT_A_NAME  # noqa: B018


def test_the_scratchpad_still_has_what_the_node_reads() -> None:
    """The per-task scratchpad keeps ``resume`` and ``get_null_resume``."""
    from langgraph._internal._scratchpad import PregelScratchpad

    fields = getattr(PregelScratchpad, "__dataclass_fields__", {})
    assert "resume" in fields and "get_null_resume" in fields


def test_task_resume_reads_the_answer_before_interrupt_returns_it() -> None:
    """In a running task, task_resume sees the Command(resume=...) interrupt() will return."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    class S(TypedDict):
        x: Any

    seen: list[Any] = []

    def node(state: S, config: RunnableConfig) -> dict[str, Any]:
        seen.append(compat.task_resume(config["configurable"]))
        return {"x": interrupt("ask")}

    builder = StateGraph(S)
    builder.add_node("n", node)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph.invoke({"x": 0}, config)
    assert graph.invoke(Command(resume={"a": 1}), config)["x"] == {"a": 1}
    assert seen == [None, {"a": 1}]
    assert compat.task_resume({}) is compat.NOT_VISIBLE
    assert compat.task_resume({compat.CONFIG_KEY_SCRATCHPAD: object()}) is compat.NOT_VISIBLE


def test_langgraph_runnable_callable_takes_what_graph_callable_passes() -> None:
    """RunnableCallable(func, afunc, name=, trace=) still exists: GraphCallable is one."""
    from langgraph._internal._runnable import RunnableCallable

    from symfonic_store.langgraph import GraphCallable

    assert compat.RunnableCallable is RunnableCallable
    params = inspect.signature(RunnableCallable.__init__).parameters
    assert {"func", "afunc", "name", "trace"} <= set(params)
    router = GraphCallable(lambda state, config: "finish", name="r")
    assert isinstance(router, RunnableCallable) and router.trace is False
    assert router({}, {"configurable": {}}) == "finish"


def test_a_task_config_carries_what_the_store_checkpointer_reads() -> None:
    """Inside a running node, the config holds the checkpointer, the task id and the step's checkpoint."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        x: int

    seen: dict[str, object] = {}

    def node(state: S, config: RunnableConfig) -> dict[str, int]:
        seen.update(config["configurable"])
        return {"x": 1}

    saver = InMemorySaver()
    builder = StateGraph(S)
    builder.add_node("n", node)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    builder.compile(checkpointer=saver).invoke({"x": 0}, {"configurable": {"thread_id": "t"}})
    assert seen[compat.CONFIG_KEY_CHECKPOINTER] is saver
    assert isinstance(seen[compat.CONFIG_KEY_TASK_ID], str)
    assert str(seen["checkpoint_ns"]).startswith("n:")
    (started,) = (seen[compat.CONFIG_KEY_CHECKPOINT_MAP]).values()  # type: ignore[attr-defined]
    assert any(t.checkpoint["id"] == started for t in saver.list(None))


# --- SQLAlchemy ----------------------------------------------------------------------


def test_fire_commit_and_rollback_reach_the_connections_listeners() -> None:
    engine = sa.create_engine("sqlite://")
    heard: list[str] = []
    sa.event.listen(engine, "commit", lambda conn: heard.append("commit"))
    sa.event.listen(engine, "rollback", lambda conn: heard.append("rollback"))
    with engine.connect() as conn:
        compat.fire_commit(conn)
        compat.fire_rollback(conn)
    assert heard[:2] == ["commit", "rollback"]


def test_has_cursor_listeners_sees_a_statement_listener() -> None:
    engine = sa.create_engine("sqlite://")
    assert compat.has_cursor_listeners(engine) is False
    sa.event.listen(engine, "after_cursor_execute", lambda *a: None)
    assert compat.has_cursor_listeners(engine) is True
    other = sa.create_engine("sqlite://")
    sa.event.listen(other, "before_cursor_execute", lambda *a: None)
    assert compat.has_cursor_listeners(other) is True


def test_compiled_binds_are_the_drivers_parameters_in_order() -> None:
    from sqlalchemy.dialects import postgresql, sqlite

    t = sa.table("t", sa.column("a"), sa.column("b"))
    stmt = sa.select(t.c.a).where(t.c.b == sa.bindparam("second"), t.c.a == sa.bindparam("first.x"))
    compiled: Any = stmt.compile(dialect=sqlite.dialect())
    named, binds = compat.compiled_binds(compiled)
    assert named is False and [b[0] for b in binds] == ["second", "first.x"]
    assert all(bind is compiled.binds[name] for name, _, bind in binds)
    compiled = stmt.compile(dialect=postgresql.dialect(paramstyle="pyformat"))
    named, binds = compat.compiled_binds(compiled)
    assert named is True and {b[0] for b in binds} == {"second", "first.x"}
    for _, placeholder, _ in binds:
        assert f"%({placeholder})s" in compiled.string  # as escaped in the SQL
    assert any(name != placeholder for name, placeholder, _ in binds)  # "first.x" is escaped


def test_dbapi_error_wraps_a_driver_error_as_sqlalchemy_does() -> None:
    orig = sqlite3.OperationalError("database is locked")
    wrapped = compat.dbapi_error("SELECT 1", (), orig, sqlite3.Error, connection_invalidated=True)
    assert isinstance(wrapped, sa.exc.OperationalError)
    assert wrapped.orig is orig and wrapped.connection_invalidated is True
    assert isinstance(compat.dbapi_error(None, None, orig, sqlite3.Error), sa.exc.OperationalError)


def test_sqlalchemy_still_awaits_from_run_sync() -> None:
    """The asyncio store's SQLite path awaits aiosqlite from inside run_sync's greenlet."""
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.util import concurrency

    assert callable(getattr(concurrency, "await_", None) or getattr(concurrency, "await_only", None))

    async def answer() -> str:
        return "awaited"

    async def main() -> Any:
        engine = create_async_engine("sqlite+aiosqlite://")
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(lambda c: compat.await_in_greenlet(answer()))
        finally:
            await engine.dispose()

    assert asyncio.run(main()) == "awaited"


def test_clause_adapter_moves_a_clause_onto_an_alias() -> None:
    t = sa.table("t", sa.column("x"))
    parent = t.alias("parent")
    adapted = compat.clause_adapter(parent).traverse(t.c.x == 1)
    assert str(adapted.compile(compile_kwargs={"literal_binds": True})) == "parent.x = 1"


# --- nowhere else --------------------------------------------------------------------

REACHES = {
    "langgraph._internal": re.compile(r"langgraph\._internal"),
    "dispatch": re.compile(r"\.dispatch\b"),
    "DBAPIError.instance": re.compile(r"DBAPIError\.instance"),
    "positiontup / escaped_bind_names": re.compile(r"\b(positiontup|escaped_bind_names)\b"),
    "sqlalchemy.util.concurrency": re.compile(r"sqlalchemy\.util\b|\bawait_only\b"),
    "ClauseAdapter": re.compile(r"\bClauseAdapter\b"),
}

def test_no_module_but_compat_reaches_a_private_name() -> None:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "compat.py":
            continue
        text = path.read_text(encoding="utf-8")
        found |= {(relative, what) for what, pattern in REACHES.items() if pattern.search(text)}
    assert not found, f"reach these through symfonic_store.compat: {sorted(found)}"
