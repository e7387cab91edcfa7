"""LangGraph's private names the integration relies on are still where it reads them.

The interrupt node reads the per-task scratchpad, and the gateway and the recording
checkpointer read and rewrite a task's resume write. These names are private to
LangGraph; a release that moves one must fail here, loudly, not misbehave quietly.
"""

from __future__ import annotations

import importlib.metadata

from langchain_core.runnables import RunnableConfig
from packaging.version import Version


def test_langgraph_is_below_its_next_major_version() -> None:
    """The pin in pyproject.toml holds: the private names below are those of langgraph 1.x."""
    version = Version(importlib.metadata.version("langgraph"))
    assert Version("1.0") <= version < Version("2.0")


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


def test_the_scratchpad_still_has_what_the_node_reads() -> None:
    """The per-task scratchpad keeps ``resume`` and ``get_null_resume``."""
    from langgraph._internal._scratchpad import PregelScratchpad

    fields = getattr(PregelScratchpad, "__dataclass_fields__", {})
    assert "resume" in fields and "get_null_resume" in fields


def test_the_integration_modules_import_the_private_names_not_their_fallbacks() -> None:
    """The gateway and recording checkpointer found LangGraph's own constants."""
    from langgraph._internal._constants import ERROR, INTERRUPT, RESUME

    from symfonic_store.langgraph import gateway, marker, recording

    assert gateway._RESUME_CHANNEL is RESUME
    assert (recording._RESUME, recording._INTERRUPT, recording._ERROR) == (RESUME, INTERRUPT, ERROR)
    assert marker._SCRATCHPAD_KEY == "__pregel_scratchpad"
    from symfonic_store.langgraph import checkpointer

    assert checkpointer.CHECKPOINTER_KEY is _constants_checkpointer_key()
    assert checkpointer.INTERRUPT is INTERRUPT


def _constants_checkpointer_key() -> str:
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER

    return CONFIG_KEY_CHECKPOINTER


def test_langgraph_runnable_callable_takes_what_graph_callable_passes() -> None:
    """RunnableCallable(func, afunc, name=, trace=) still exists: GraphCallable is one."""
    import inspect

    from langgraph._internal._runnable import RunnableCallable

    from symfonic_store.langgraph import GraphCallable

    params = inspect.signature(RunnableCallable.__init__).parameters
    assert {"func", "afunc", "name", "trace"} <= set(params)
    router = GraphCallable(lambda state, config: "finish", name="r")
    assert isinstance(router, RunnableCallable) and router.trace is False
    assert router({}, {"configurable": {}}) == "finish"


def test_a_task_config_carries_what_the_store_checkpointer_reads() -> None:
    """Inside a running node, the config holds the checkpointer, the task id and the step's checkpoint."""
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    from symfonic_store.langgraph import checkpointer

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
    assert seen[checkpointer.CHECKPOINTER_KEY] is saver
    assert isinstance(seen[checkpointer.TASK_ID_KEY], str)
    assert str(seen["checkpoint_ns"]).startswith("n:")
    (started,) = (seen[checkpointer.CHECKPOINT_MAP_KEY]).values()  # type: ignore[attr-defined]
    assert any(t.checkpoint["id"] == started for t in saver.list(None))


LANGGRAPH_PACKAGES = [
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
]


def test_every_langgraph_package_is_capped_below_its_next_major_version() -> None:
    """Each LangGraph package the store requires has an upper bound its installed version is under."""
    from packaging.requirements import Requirement

    requirements = [Requirement(r) for r in importlib.metadata.requires("symfonic-store") or []]
    for name in LANGGRAPH_PACKAGES:
        found = [r for r in requirements if r.name == name]
        assert found, f"{name} is not required by symfonic-store"
        installed = Version(importlib.metadata.version(name))
        for requirement in found:
            uppers = [Version(s.version) for s in requirement.specifier if s.operator == "<"]
            assert uppers, f"{requirement} has no upper bound"
            assert installed in requirement.specifier, f"{name} {installed} is outside {requirement}"
            assert all(u.release[0] == installed.release[0] + 1 and u.release[1:] in ((), (0,)) for u in uppers), (
                f"{requirement}: the cap is not the next major version of {installed}"
            )


def test_the_postgres_extra_brings_langgraphs_postgres_saver() -> None:
    """pip install 'symfonic-store[postgres]' is enough for store.checkpointer() on PostgreSQL."""
    from packaging.requirements import Requirement

    requirements = [Requirement(r) for r in importlib.metadata.requires("symfonic-store") or []]
    postgres = {r.name for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "postgres"})}
    assert {"psycopg", "langgraph-checkpoint-postgres"} <= postgres


def test_sqlite_saver_runs_all_its_sql_through_cursor() -> None:
    """store.checkpointer() replaces SqliteSaver.cursor() (its lock, setup() and COMMIT): every
    method the store calls must still go through it, with the arguments the override takes."""
    import inspect

    from langgraph.checkpoint.sqlite import SqliteSaver

    from symfonic_store.langgraph.checkpointer import _SqliteSql

    assert list(inspect.signature(SqliteSaver.cursor).parameters) == ["self", "transaction"]
    assert list(inspect.signature(_SqliteSql.cursor).parameters) == ["self", "transaction"]
    for method in ("get_tuple", "list", "put", "put_writes", "delete_thread"):
        source = inspect.getsource(getattr(SqliteSaver, method))
        assert "self.cursor(" in source, f"SqliteSaver.{method} no longer uses cursor()"
        assert "self.conn.commit" not in source and "self.lock" not in source, method
    assert SqliteSaver(None).is_setup is False  # type: ignore[arg-type]  # what setup() sets


def test_postgres_savers_are_used_unchanged_on_the_attributes_the_store_binds() -> None:
    """PostgresSaver and AsyncPostgresSaver are not subclassed: the store binds each copy's
    ``conn`` and ``lock``, which their ``_cursor`` (pipeline, transaction fallback) uses."""
    import inspect

    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from symfonic_store.langgraph import checkpointer

    assert checkpointer._postgres_classes() == (PostgresSaver, AsyncPostgresSaver)
    for cls in (PostgresSaver, AsyncPostgresSaver):
        source = inspect.getsource(cls._cursor)
        assert "self.lock" in source and "get_connection(self.conn)" in source, cls
        assert "conn.pipeline()" in source and "conn.transaction()" in source, cls
        assert list(inspect.signature(cls.__init__).parameters)[:2] == ["self", "conn"], cls
    saver = PostgresSaver(None, serde=checkpointer.serializer())  # type: ignore[arg-type]
    assert saver.pipe is None and hasattr(saver, "lock") and hasattr(saver, "supports_pipeline")


def test_sqlalchemy_still_awaits_from_run_sync() -> None:
    """The asyncio store's SQLite path awaits aiosqlite from inside run_sync's greenlet."""
    from sqlalchemy.util import concurrency

    assert callable(getattr(concurrency, "await_", None) or getattr(concurrency, "await_only", None))
