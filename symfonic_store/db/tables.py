"""The store's tables as the catalog shows them: which are missing, and their re-creation
(SPEC §12, as amended in wave 4).

Alembic's version table says which revision ran, not which tables are still there: a
table dropped behind the store's back leaves the schema "at head", and ``db upgrade``
recreates nothing. ``verify`` names each missing table (:func:`missing_tables`);
``db guards --restore`` recreates them empty (:func:`restore_tables`) from the schema's
own declarations (``db/schema.py``, which ``alembic check`` proves the migrations
create), before it restores the event table's guards -- all but the event table itself,
whose loss no empty table may hide.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .schema import EVENTS_TABLE, checkpoint_buckets, checkpoint_heads, checkpoints, metadata

CHECKPOINT_TABLES = (checkpoints, checkpoint_heads, checkpoint_buckets)
"""Where the store keeps its signed checkpoints and the state the next one builds on: a
checkpoint into a chain folder works without them (services/chain.py)."""

EVENT_LOG_GONE = (
    f"the event table {EVENTS_TABLE} is missing, and every event with it: `db guards "
    "--restore` does not recreate it empty, which would pass for a log with nothing in it; "
    "restore the database from a backup (the signed checkpoints and archives show what the "
    "log must hold)"
)


def missing_tables(conn: Connection, tables: Iterable[sa.Table] | None = None) -> list[str]:
    """The names of ``tables`` (default: every table of the store's schema) that the
    database does not have, in the schema's order."""
    wanted = list(metadata.sorted_tables if tables is None else tables)
    present = set(sa.inspect(conn).get_table_names())
    return [t.name for t in wanted if t.name not in present]


def restore_tables(conn: Connection) -> list[str]:
    """Create the store's missing tables, empty, with their keys and indexes as the
    schema declares them, in the caller's transaction; returns their names.

    The caller checks that the schema is at head first, and restores the event table's
    guards afterwards (:func:`~symfonic_store.db.guards.restore_guards`).

    The event table is never created here: an empty one would pass for a log with
    nothing in it, while every event went with the table (:data:`EVENT_LOG_GONE`).
    """
    missing = set(missing_tables(conn)) - {EVENTS_TABLE}
    tables = [t for t in metadata.sorted_tables if t.name in missing]
    metadata.create_all(conn, tables=tables, checkfirst=False)
    return [t.name for t in tables]


__all__ = ["CHECKPOINT_TABLES", "EVENT_LOG_GONE", "missing_tables", "restore_tables"]
