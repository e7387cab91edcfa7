"""Alembic environment for the symfonic-store schema.

The connection comes from ``config.attributes["connection"]`` when the store (or a
test) hands one over; otherwise the URL comes from ``SYMFONIC_STORE_URL``, else the
``sqlalchemy.url`` option, else the default embedded SQLite file.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from symfonic_store.db.engines import create_sync_engine
from symfonic_store.db.schema import VERSION_TABLE, metadata
from symfonic_store.db.urls import DEFAULT_URL

config = context.config
target_metadata = metadata

_OWN_TABLES = set(metadata.tables)


def include_object(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    # The store may share a database with an application: only compare our tables.
    if type_ == "table":
        return name in _OWN_TABLES
    table = getattr(obj, "table", None)
    return table is None or getattr(table, "name", None) in _OWN_TABLES


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    url = os.environ.get("SYMFONIC_STORE_URL") or config.get_main_option("sqlalchemy.url") or DEFAULT_URL
    context.configure(
        url=url,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = os.environ.get("SYMFONIC_STORE_URL") or config.get_main_option("sqlalchemy.url") or DEFAULT_URL
    engine = create_sync_engine(url)
    try:
        with engine.connect() as own_connection:
            _configure(own_connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
