"""LangGraph's checkpoint tables, as the official savers lay them out: one
:class:`Layout` per saver, which the backend of a store's engine chooses
(:attr:`~symfonic_store.db.backends.base.Backend.checkpoint_layout`).

The tables are declared here only for what those savers do not implement (the
statements of :mod:`symfonic_store.db.checkpoints`) and for
tests/langgraph/test_checkpointer_tables.py, which reflects the tables a saver created and compares
them with these declarations, column by column. None of them belongs to the store's
schema (``db/schema.py``): Alembic neither creates nor compares them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite


def _thread_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("thread_id", sa.Text, primary_key=True),
        sa.Column("checkpoint_ns", sa.Text, primary_key=True, server_default=""),
    ]


# --- SQLite: langgraph.checkpoint.sqlite.SqliteSaver.setup() ------------------------

sqlite_metadata = sa.MetaData()

sqlite_checkpoints = sa.Table(
    "checkpoints",
    sqlite_metadata,
    *_thread_columns(),
    sa.Column("checkpoint_id", sa.Text, primary_key=True),
    sa.Column("parent_checkpoint_id", sa.Text),
    sa.Column("type", sa.Text),
    sa.Column("checkpoint", sa.LargeBinary),
    sa.Column("metadata", sa.LargeBinary),
)

# Deliberately per backend: each mirrors the table LangGraph's own saver for that backend creates.
sqlite_writes = sa.Table(
    "writes",
    sqlite_metadata,
    *_thread_columns(),
    sa.Column("checkpoint_id", sa.Text, primary_key=True),
    sa.Column("task_id", sa.Text, primary_key=True),
    sa.Column("task_path", sa.Text, nullable=False, server_default=""),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("channel", sa.Text, nullable=False),
    sa.Column("type", sa.Text),
    sa.Column("value", sa.LargeBinary),
)

# --- PostgreSQL: langgraph.checkpoint.postgres.base.MIGRATIONS ----------------------

postgres_metadata = sa.MetaData()

postgres_migrations = sa.Table(
    "checkpoint_migrations",
    postgres_metadata,
    sa.Column("v", sa.Integer, primary_key=True, autoincrement=False),
)

postgres_checkpoints = sa.Table(
    "checkpoints",
    postgres_metadata,
    *_thread_columns(),
    sa.Column("checkpoint_id", sa.Text, primary_key=True),
    sa.Column("parent_checkpoint_id", sa.Text),
    sa.Column("type", sa.Text),
    sa.Column("checkpoint", postgresql.JSONB, nullable=False),
    sa.Column("metadata", postgresql.JSONB, nullable=False, server_default="{}"),
)

postgres_blobs = sa.Table(
    "checkpoint_blobs",
    postgres_metadata,
    *_thread_columns(),
    sa.Column("channel", sa.Text, primary_key=True),
    sa.Column("version", sa.Text, primary_key=True),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("blob", postgresql.BYTEA),
)

# Deliberately per backend: each mirrors the table LangGraph's own saver for that backend creates.
postgres_writes = sa.Table(
    "checkpoint_writes",
    postgres_metadata,
    *_thread_columns(),
    sa.Column("checkpoint_id", sa.Text, primary_key=True),
    sa.Column("task_id", sa.Text, primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("channel", sa.Text, nullable=False),
    sa.Column("type", sa.Text),
    sa.Column("blob", postgresql.BYTEA, nullable=False),
    sa.Column("task_path", sa.Text, nullable=False, server_default=""),
)

POSTGRES_MIGRATIONS = 10
"""How many of ``PostgresSaver.MIGRATIONS`` the layout above is the result of."""


@dataclass(frozen=True, slots=True)
class Layout:
    """One saver's tables: the checkpoints, the writes, and (PostgreSQL) the blobs."""

    checkpoints: sa.Table
    writes: sa.Table
    blobs: sa.Table | None
    insert: Callable[[sa.Table], Any]
    """The dialect's INSERT (it has ``on_conflict_do_nothing``)."""
    jsonb_metadata: bool
    """Is a checkpoint's metadata JSONB (PostgreSQL), else JSON text (SQLite)?"""

    @property
    def tables(self) -> tuple[sa.Table, ...]:
        """Every table holding a thread's rows."""
        return tuple(t for t in (self.checkpoints, self.writes, self.blobs) if t is not None)

    def run_id(self) -> sa.ColumnElement[Any]:
        """The ``run_id`` of a checkpoint's metadata (JSON text on SQLite, JSONB here)."""
        metadata = self.checkpoints.c.metadata
        if not self.jsonb_metadata:
            return sa.func.json_extract(sa.cast(metadata, sa.Text), "$.run_id")
        return metadata["run_id"].astext  # type: ignore[no-any-return]


SQLITE = Layout(sqlite_checkpoints, sqlite_writes, None, sqlite.insert, jsonb_metadata=False)
POSTGRES = Layout(postgres_checkpoints, postgres_writes, postgres_blobs, postgresql.insert, jsonb_metadata=True)
