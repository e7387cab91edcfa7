"""LangGraph's packages and savers are still what the integration relies on.

The private names themselves (the per-task scratchpad the interrupt node reads, the
channels the gateway and the recording checkpointer read and rewrite, LangGraph's
runnable, SQLAlchemy's greenlet await) are reached through ``symfonic_store.compat``
only; their canary is ``tests/core/test_compat.py``. Here: the version caps that keep
them there, and the saver attributes ``store.checkpointer()`` binds. A release that
changes one must fail here, loudly, not misbehave quietly.
"""

from __future__ import annotations

import importlib.metadata

from packaging.version import Version


def test_langgraph_is_below_its_next_major_version() -> None:
    """The pin in pyproject.toml holds: the private names below are those of langgraph 1.x."""
    version = Version(importlib.metadata.version("langgraph"))
    assert Version("1.0") <= version < Version("2.0")


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
    """pip install '.[postgres]' is enough for store.checkpointer() on PostgreSQL."""
    from packaging.requirements import Requirement

    requirements = [Requirement(r) for r in importlib.metadata.requires("symfonic-store") or []]
    postgres = {r.name for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "postgres"})}
    assert {"psycopg", "langgraph-checkpoint-postgres"} <= postgres


def test_sqlite_saver_runs_all_its_sql_through_cursor() -> None:
    """store.checkpointer() replaces SqliteSaver.cursor() (its lock, setup() and COMMIT): every
    method the store calls must still go through it, with the arguments the override takes."""
    import inspect

    from langgraph.checkpoint.sqlite import SqliteSaver

    from symfonic_store.langgraph.saver_sql import _SqliteSql

    assert list(inspect.signature(SqliteSaver.cursor).parameters) == ["self", "transaction"]
    assert list(inspect.signature(_SqliteSql.cursor).parameters) == ["self", "transaction"]
    for method in ("get_tuple", "list", "put", "put_writes", "delete_thread"):
        source = inspect.getsource(getattr(SqliteSaver, method))
        assert "self.cursor(" in source, f"SqliteSaver.{method} no longer uses cursor()"
        assert "self.conn.commit" not in source and "self.lock" not in source, method
    assert SqliteSaver(None).is_setup is False  # type: ignore[arg-type]  # what setup() sets


def test_postgres_savers_get_their_cursor_where_the_store_binds_it() -> None:
    """PostgresSaver is subclassed on one private method, ``_cursor``, where each of its
    statements gets its cursor (binary, dict rows): bound, the statements join the store's
    transaction and pipeline instead of a pipeline of their own. AsyncPostgresSaver is not
    subclassed: the store binds each copy's ``conn`` and ``lock``, which its ``_cursor``
    (pipeline, transaction fallback) uses."""
    import inspect

    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from symfonic_store.langgraph import saver_sql as checkpointer

    bound, async_class = checkpointer._postgres_classes()
    assert bound.__mro__[1] is PostgresSaver and async_class is AsyncPostgresSaver
    assert {name for name in vars(bound) if not name.startswith("__")} == {"_cursor"}
    for name in ("put", "put_writes", "delete_thread", "get_tuple", "list", "setup"):
        assert "self._cursor(" in inspect.getsource(getattr(PostgresSaver, name)), name
    assert "conn.cursor(binary=True, row_factory=dict_row)" in inspect.getsource(PostgresSaver._cursor)
    source = inspect.getsource(AsyncPostgresSaver._cursor)
    assert "self.lock" in source and "get_connection(self.conn)" in source
    assert "conn.pipeline()" in source and "conn.transaction()" in source
    for cls in (PostgresSaver, AsyncPostgresSaver):
        assert list(inspect.signature(cls.__init__).parameters)[:2] == ["self", "conn"], cls
    saver = bound(None, serde=checkpointer.serializer())
    assert saver.pipe is None and hasattr(saver, "lock") and hasattr(saver, "supports_pipeline")
