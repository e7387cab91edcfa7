"""``db upgrade`` / ``db current`` / ``db downgrade``: the Alembic migrations."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from ...db.urls import safe_url
from ...errors import (
    InvalidInputError,
)
from ..app import (
    PROG,
    db_app,
    get_session,
)
from ..render import (
    say,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection



def _migrate(
    ctx: typer.Context, change: Callable[[Connection], None] | None, *, create: bool = False
) -> str:
    """Run ``change`` on a store connection (no schema check); return the revision after."""
    from alembic.util import CommandError

    from ...db.migrate import current_revision, head_revision, require_known_revision
    from ...db.translate import translate_errors

    session = get_session(ctx)
    with session.store(create=create) as store, translate_errors(), store.engine.connect() as conn:
        try:
            if change is not None:
                with conn.begin():
                    change(conn)
        except CommandError as exc:
            raise InvalidInputError("revision", str(exc)) from None
        with conn.begin():
            current = current_revision(conn)
        require_known_revision(current)  # a newer release's schema: say so, exit 2
        head = head_revision()
    where = safe_url(session.url())
    if current == head:
        return f"{where}: revision {current} (head)"
    if current is None:
        return f"{where}: no schema (head is {head}); run `{PROG} db upgrade`"
    return f"{where}: revision {current}, head is {head}; run `{PROG} db upgrade`"


@db_app.command("upgrade")
def db_upgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Migrate the database up to the newest schema (idempotent)."""
    from ...db.migrate import upgrade

    say(_migrate(ctx, lambda conn: upgrade(conn, revision), create=True))


@db_app.command("downgrade")
def db_downgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision; `base` removes the schema.")],
) -> None:
    """Migrate the database down to REVISION (`base` drops the store's tables)."""
    from ...db.migrate import downgrade

    say(_migrate(ctx, lambda conn: downgrade(conn, revision)))


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Show the database's schema revision and the newest one."""
    say(_migrate(ctx, None))
