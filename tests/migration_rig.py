"""Moving a database between revisions in a test, and reading what a revision left.

The ``engine`` fixture (tests/conftest.py) gives an engine on an empty database of each
backend; these helpers migrate it and look at the event table.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from symfonic_store.db.migrate import downgrade, upgrade


def migrate(engine: Engine, direction: str, revision: str) -> None:
    """``upgrade`` (``direction`` "up") or ``downgrade`` to ``revision``, in one transaction."""
    with engine.connect() as conn, conn.begin():
        (upgrade if direction == "up" else downgrade)(conn, revision)


def event_columns(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {c["name"] for c in sa.inspect(conn).get_columns("symfonic_events")}


def event_indexes(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {i["name"] for i in sa.inspect(conn).get_indexes("symfonic_events") if i["name"]}
