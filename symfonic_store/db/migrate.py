"""The store's Alembic migrations: where they are, the revisions, upgrade and downgrade."""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import DatabaseError, SchemaNotMigratedError, SchemaTooNewError
from .schema import VERSION_TABLE
from .translate import UPGRADE_HINT


def migrations_path() -> str:
    """Where the Alembic scripts are: inside the installed package, else the checkout."""
    spec = importlib.util.find_spec("symfonic_store.migrations")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if (Path(location) / "env.py").exists():
                return str(location)
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if (checkout / "env.py").exists():
        return str(checkout)
    raise DatabaseError("the symfonic-store migrations are missing from this installation")


def alembic_config(connection: Connection | None = None) -> Any:
    """An Alembic ``Config`` for the store's migrations, sharing ``connection`` if given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", migrations_path())
    config.set_main_option("version_table", VERSION_TABLE)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest migration shipped with this version of the package."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships migrations
        raise DatabaseError("the symfonic-store migrations have no head revision")
    return head


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    """Every revision this version of the package ships (base to head)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return frozenset(rev.revision for rev in script.walk_revisions())


def read_scripts() -> None:
    """Read the shipped revisions now (both are cached): the asyncio store calls this in a
    thread before its first schema check, so that its event loop reads no file."""
    head_revision()
    known_revisions()


def require_known_revision(current: str | None) -> None:
    """Raise :class:`SchemaTooNewError` if ``current`` is a revision this release lacks.

    The version table is the store's own, so a revision it holds that this release does
    not ship was written by another (newer) release: Alembic could neither upgrade nor
    downgrade from it, and this code cannot know its tables.
    """
    if current is not None and current not in known_revisions():
        raise SchemaTooNewError(current, head_revision())


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None when it has no store schema."""
    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    version_table = sa.table(VERSION_TABLE, sa.column("version_num"))
    row = connection.execute(sa.select(version_table.c.version_num)).first()
    return None if row is None else str(row[0])


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (``head`` by default).

    Raises:
        SchemaTooNewError: a newer release migrated the database past this one's head.
    """
    from alembic import command

    require_known_revision(current_revision(connection))
    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, revision: str) -> None:
    """Migrate the database down to ``revision`` (``base`` removes the schema).

    Raises:
        SchemaTooNewError: a newer release migrated the database past this one's head
            (only that release has the scripts to go down from there).
    """
    from alembic import command

    require_known_revision(current_revision(connection))
    command.downgrade(alembic_config(connection), revision)


EVENT_LOG_REVISION = "0001_event_log"
"""The revision that creates the event table: a downgrade below it drops every event."""


def downgrade_drops_event_log(connection: Connection, revision: str) -> bool:
    """Whether ``db downgrade revision`` would undo :data:`EVENT_LOG_REVISION`."""
    from alembic.script import ScriptDirectory
    from alembic.script.revision import RevisionError
    from alembic.util import CommandError

    current = current_revision(connection)
    if current is None or current not in known_revisions():
        return False  # nothing to drop, or the downgrade refuses (SchemaTooNewError)
    script = ScriptDirectory.from_config(alembic_config())
    relative = re.fullmatch(r"-(\d+)", revision.strip())
    if relative is not None:  # Alembic counts down from the current revision, to base at most
        below = [r.revision for r in script.iterate_revisions(current, "base")]
        return EVENT_LOG_REVISION in below[: int(relative.group(1))]
    try:
        undone = [r.revision for r in script.iterate_revisions(current, revision)]
    except (CommandError, RevisionError):
        # A form this cannot place: a relative one may reach base, so it must be confirmed;
        # anything else is Alembic's to refuse, with its own message.
        return "-" in revision or "+" in revision
    return EVENT_LOG_REVISION in undone


def require_current_schema(connection: Connection) -> None:
    """Raise :class:`SchemaNotMigratedError` unless the database is at the head revision.

    Raises:
        SchemaTooNewError: the database is at a revision newer than this release's head.
        SchemaNotMigratedError: it has no store schema, or an older one.
    """
    current = current_revision(connection)
    head = head_revision()
    if current == head:
        return
    require_known_revision(current)
    if current is None:
        raise SchemaNotMigratedError(
            f"the database has no symfonic-store schema (head is {head}): {UPGRADE_HINT}"
        )
    raise SchemaNotMigratedError(
        f"the schema is at revision {current}, head is {head}: {UPGRADE_HINT}"
    )
