"""The checkpoint tables are LangGraph's, laid out as the statements here expect.

``store.checkpointer()`` writes through the official savers' SQL, into the tables their
``setup()`` creates; ``copy_thread``, ``delete_for_runs`` and SQLite's ``prune`` are the
store's own statements on those tables (symfonic_store/db/checkpoints.py). These tests
pin the layout: a LangGraph release that renames, retypes or adds a column fails here,
loudly, instead of leaving those statements to misread a table.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from symfonic_store import InterruptStore
from symfonic_store.db import checkpoints as tables
from symfonic_store.db.schema import metadata as store_metadata


def layout(engine: sa.Engine, names: list[str]) -> dict[str, Any]:
    """Each table's columns (name, type, nullable) in order, and its primary key."""
    inspector = sa.inspect(engine)
    out: dict[str, Any] = {}
    for name in names:
        columns = [
            (c["name"], str(c["type"].compile(engine.dialect)), bool(c["nullable"]))
            for c in inspector.get_columns(name)
        ]
        primary = inspector.get_pk_constraint(name)["constrained_columns"]
        out[name] = (columns, sorted(primary))
    return out


def declared(engine: sa.Engine, declared_tables: list[sa.Table]) -> dict[str, Any]:
    """The same, for the tables db/checkpoints.py declares."""
    out: dict[str, Any] = {}
    for table in declared_tables:
        columns = [
            (c.name, str(c.type.compile(engine.dialect)), bool(c.nullable) and not c.primary_key)
            for c in table.columns
        ]
        out[table.name] = (columns, sorted(c.name for c in table.primary_key.columns))
    return out


def test_the_tables_langgraph_creates_are_the_tables_the_store_declares(store: InterruptStore, backend: str) -> None:
    """Reflected from the database after the saver's setup(): the same columns, types, nullability and keys."""
    store.checkpointer().setup()
    if backend == "sqlite":
        expected = [tables.sqlite_checkpoints, tables.sqlite_writes]
    else:
        expected = [tables.postgres_migrations, tables.postgres_checkpoints, tables.postgres_blobs, tables.postgres_writes]
    found = layout(store.engine, [t.name for t in expected])
    assert found == declared(store.engine, expected)
    # And the whole layout is one the official saver would use: spelled out once here.
    if backend == "sqlite":
        assert [c[0] for c in found["writes"][0]] == [
            "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel", "type", "value",
        ]
    else:
        assert ("checkpoint", "JSONB", False) in found["checkpoints"][0]
        assert ("blob", "BYTEA", True) in found["checkpoint_blobs"][0]


def test_postgres_migrations_are_those_the_layout_is_the_result_of(store: InterruptStore, backend: str) -> None:
    """PostgresSaver ran exactly the migrations the declared layout follows; a new one fails here."""
    if backend != "postgresql":
        pytest.skip("PostgresSaver's migrations are PostgreSQL's")
    from langgraph.checkpoint.postgres import PostgresSaver

    store.checkpointer().setup()
    assert len(PostgresSaver.MIGRATIONS) == tables.POSTGRES_MIGRATIONS
    with store.engine.connect() as conn:
        versions = conn.execute(sa.select(tables.postgres_migrations.c.v)).scalars().all()
    assert sorted(versions) == list(range(tables.POSTGRES_MIGRATIONS))


def test_setup_is_idempotent_and_the_checkpoint_tables_are_not_the_store_schema(store: InterruptStore) -> None:
    """A second setup() changes nothing; no checkpoint table is in the store's (Alembic's) schema."""
    saver = store.checkpointer()
    saver.setup()
    saver.setup()
    store.checkpointer().setup()
    ours = set(store_metadata.tables)
    theirs = {t.name for t in (*tables.SQLITE.tables, *tables.POSTGRES.tables)}
    assert ours.isdisjoint(theirs)


class Opaque:
    """Something the JSON-plus serialiser cannot encode (pickle could)."""


def test_checkpoints_are_json_plus_never_pickle(store: InterruptStore, backend: str) -> None:
    """The serialiser is JsonPlusSerializer with the pickle fallback off: what it cannot encode is refused."""
    saver = store.checkpointer()
    assert isinstance(saver.serde, JsonPlusSerializer)
    assert saver.serde.pickle_fallback is False
    assert JsonPlusSerializer(pickle_fallback=True).dumps_typed(Opaque())[0] == "pickle"
    with pytest.raises(TypeError):
        saver.serde.dumps_typed(Opaque())
    config = {"configurable": {"thread_id": "t-serde", "checkpoint_ns": ""}}
    checkpoint = {
        "v": 4, "id": "1f000000-0000-6000-8000-000000000001", "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"x": {"a": [1, 2]}}, "channel_versions": {"x": "1"}, "versions_seen": {},
        "updated_channels": None,
    }
    stored = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"x": "1"})
    saver.put_writes(stored, [("x", {"b": 3})], "task-1")
    with pytest.raises(TypeError):
        saver.put_writes(stored, [("x", Opaque())], "task-2")
    found = saver.get_tuple(stored)
    assert found is not None and found.checkpoint["channel_values"] == {"x": {"a": [1, 2]}}
    assert [w[1:] for w in found.pending_writes or []] == [("x", {"b": 3})]
    with store.engine.connect() as conn:
        kinds = set()
        for table in (tables.SQLITE if backend == "sqlite" else tables.POSTGRES).tables:
            if "type" in table.c:
                kinds |= set(conn.execute(sa.select(table.c.type).distinct()).scalars())
    assert "pickle" not in kinds and "msgpack" in kinds
