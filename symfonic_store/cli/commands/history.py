"""``audit``, ``replay``, ``projection rebuild``: what happened (``verify`` is in evidence.py)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..app import (
    AuditFormat,
    Problem,
    TableOrJson,
    TableOrJsonFormat,
    app,
    choice,
    count,
    flag,
    get_session,
    moment,
    position_or_moment,
    projection_app,
)
from ..render import (
    audit_table,
    console,
    emit,
    emit_json,
    replay_table,
    say,
)

if TYPE_CHECKING:

    pass


@app.command()
def audit(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Option("--thread", metavar="T")] = None,
    actor: Annotated[str | None, typer.Option("--actor", metavar="A")] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            "--since", metavar="ISO", help="Minted at or after (no offset: UTC).", parser=flag(moment)
        ),
    ] = None,
    until: Annotated[
        datetime | None,
        typer.Option(
            "--until", metavar="ISO", help="Minted at or before (no offset: UTC).", parser=flag(moment)
        ),
    ] = None,
    decision: Annotated[
        str | None,
        typer.Option(
            "--decision", metavar="D", help="Only records whose decision is exactly D (e.g. reject)."
        ),
    ] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", metavar="T", help="Only interrupts minted for this tenant.")
    ] = None,
    output: Annotated[
        AuditFormat,
        typer.Option("--format", help="table, json or csv.", parser=flag(choice(AuditFormat))),
    ] = AuditFormat.table,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", metavar="N", help="At most N records, in the audit's order (a page).", parser=flag(count)
        ),
    ] = None,
    after: Annotated[
        str | None,
        typer.Option(
            "--after", metavar="CURSOR", help="The records after this cursor (a page's 'next').",
        ),
    ] = None,
) -> None:
    """Who approved what: one record per interrupt, oldest first."""
    from ...services.audit import audit_csv

    with get_session(ctx).store() as store:
        records = store.audit(
            thread_id=thread, actor=actor, since=since, until=until, decision=decision,
            tenant=tenant, limit=limit, after=after,
        )
    if output is AuditFormat.json:
        paged = limit is not None or after is not None
        emit_json([{**r.as_dict(), "cursor": r.cursor} if paged else r.as_dict() for r in records])
    elif output is AuditFormat.csv:
        emit(audit_csv(records))
    else:
        audit_table(records)
    if limit is not None and len(records) == limit:
        # The next page's flag, on stderr: stdout stays the records alone.
        sys.stderr.write(f"next page: --after {records[-1].cursor}\n")



# --- replay -------------------------------------------------------------------------


@app.command()
def replay(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", show_default=False)],
    until: Annotated[
        Any,  # int | datetime: Typer takes no unions
        # An option alike others in shape only (see cli/app.py), deliberately declared where it is
        # read.
        typer.Option(
            "--until",
            metavar="POSITION|ISO",
            help="Stop at a global position or a time.",
            parser=flag(position_or_moment),
        ),
    ] = None,
    output: TableOrJsonFormat = TableOrJson.table,
) -> None:
    """A thread's history: each event with the state right after it."""
    bound: int | datetime | None = until
    with get_session(ctx).store() as store:
        steps = list(store.replay(thread, until=bound))
        if not steps and (bound is None or not store.history(thread)):
            raise Problem(f"thread {thread!r} has no events: nothing to replay")
    if output is TableOrJson.json:
        emit_json([{"event": e.as_dict(), "state": s} for e, s in steps])
        return
    replay_table(thread, steps)



# --- projection ---------------------------------------------------------------------


@projection_app.command("rebuild")
def projection_rebuild(
    ctx: typer.Context,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Rebuild even over projection heads the events no longer reach "
            "(events removed from the end of a thread): accept the log as it is.",
        ),
    ] = False,
) -> None:
    """Rebuild the projection from the event log (a progress bar on a terminal).

    Refuses (exit 1) when the projection holds a head the events no longer reach,
    unless --force.
    """
    with get_session(ctx).store() as store, progress_bar("folding events") as progress:
        folded = store.rebuild_projection(progress=progress, force=force)
    say(f"rebuilt the projection from {folded} event(s)")


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int], None] | None]:
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # The number of events is not known in advance: the bar pulses and counts.
    with Progress(
        SpinnerColumn(),
        BarColumn(),
        TextColumn("{task.description}: {task.completed} event(s)"),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done: bar.update(task, completed=done)
