"""A seed marker's name as SQL, spelled as its index spells it (SPEC §17).

The pending marker is JSON in ``symfonic_threads.pending``; the inbox's name filter reads
its ``name`` through ``ix_symfonic_threads_pending_name``, an index on that expression. A
database uses an expression index only for the same expression, with the key as a literal
(SQLAlchemy's ``pending["name"]`` binds it as a parameter), so the expression is written
out here: ``json_extract(pending, '$.name')`` on SQLite, ``(pending ->> 'name')`` on
PostgreSQL -- as migrations/versions/0023_inbox_pages.py creates the index.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.visitors import InternalTraversal


class MarkerName(sa.sql.expression.ColumnElement[str]):
    """The ``name`` of the marker JSON in ``column``."""

    type = sa.Text()
    inherit_cache = True
    _traverse_internals = [("column", InternalTraversal.dp_clauseelement)]

    def __init__(self, column: sa.ColumnElement[Any]) -> None:
        self.column = column


# The spelling per dialect stays here, not in db/backends/: SQLAlchemy picks a compile hook
# by dialect name when it compiles, with no backend object at hand (the migrations' DDL and
# `alembic check` compile it too), and it must match the index this module documents.
@compiles(MarkerName)
def _sqlite(element: MarkerName, compiler: Any, **kw: Any) -> str:
    return f"json_extract({compiler.process(element.column, **kw)}, '$.name')"


@compiles(MarkerName, "postgresql")
def _postgres(element: MarkerName, compiler: Any, **kw: Any) -> str:
    return f"({compiler.process(element.column, **kw)} ->> 'name')"
