"""``db upgrade`` / ``db current`` / ``db downgrade``: the Alembic migrations; ``db guards``."""

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
    Problem,
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
    from ...db.tables import missing_tables
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
            head = head_revision()
            # At head the migrations have nothing left to run, even for a dropped table.
            missing = missing_tables(conn) if current == head else []
        require_known_revision(current)  # a newer release's schema: say so, exit 2
    where = safe_url(session.url())
    if missing:
        return (
            f"{where}: revision {current} (head), but table(s) {', '.join(missing)} are missing: "
            f"run `{PROG} db guards --restore` to recreate them, empty"
        )
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
    revision: Annotated[
        str,
        typer.Argument(metavar="REVISION", help="Target revision; `base` removes the schema."),
    ],
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            help="Confirm a downgrade that drops the event table (and every event with it).",
        ),
    ] = False,
) -> None:
    """Migrate the database down to REVISION (`base` drops the store's tables, with --yes)."""
    from ...db.migrate import downgrade, downgrade_drops_event_log

    def change(conn: Connection) -> None:
        if not yes and downgrade_drops_event_log(conn, revision):
            raise InvalidInputError(
                "revision",
                f"{revision} drops the event table and every event in it; nothing was "
                "dropped: run again with --yes to do that (to restore the append-only "
                f"guards, `{PROG} db guards --restore` needs no downgrade)",
            )
        downgrade(conn, revision)

    say(_migrate(ctx, change))


@db_app.command("guards")
def db_guards(
    ctx: typer.Context,
    restore: Annotated[
        bool,
        typer.Option(
            "--restore",
            help="Recreate the event table's append-only guards as the migrations define them, "
            "and the store's missing tables (empty).",
        ),
    ] = False,
) -> None:
    """Check the event table's append-only guards and the store's tables; exit 1 when a
    guard is missing, off or replaced, or a table is missing.

    With --restore, create each missing table of the store's schema (empty, as the schema
    declares it), then drop and recreate every guard (triggers, trigger functions) exactly
    as the migrations create them, in one transaction; the events are untouched.
    """
    from ...db.guards import guard_problems, restore_guards
    from ...db.migrate import require_current_schema
    from ...db.schema import EVENTS_TABLE
    from ...db.tables import EVENT_LOG_GONE, missing_tables, restore_tables
    from ...db.translate import translate_errors
    from ...services.verify import table_missing

    def problems(conn: Connection) -> list[str]:
        return [*map(table_missing, missing_tables(conn)), *guard_problems(conn)]

    recreated: list[str] = []
    with get_session(ctx).store() as store, translate_errors(), store.engine.connect() as conn:
        with conn.begin():
            require_current_schema(conn)
            before = problems(conn)
            if restore:
                if EVENTS_TABLE in missing_tables(conn):
                    raise Problem(EVENT_LOG_GONE)
                recreated = restore_tables(conn)
                restore_guards(conn)
        with conn.begin():
            after = problems(conn) if restore else before
    if recreated:
        say(f"recreated the missing table(s), empty: {', '.join(recreated)}")
    if restore:
        say(f"restored the append-only guards ({len(before)} problem(s) before)")
    if after:
        raise Problem("\n".join(after))
    say("the append-only guards are in place")


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Show the database's schema revision and the newest one."""
    say(_migrate(ctx, None))
