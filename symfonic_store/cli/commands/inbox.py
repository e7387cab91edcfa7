"""``pending`` and ``resume``: the inbox and its answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..app import (
    TableOrJson,
    app,
    choice,
    flag,
    get_session,
    json_value,
    seconds,
)
from ..render import (
    age,
    emit_json,
    number,
    say,
    table,
    when,
)

if TYPE_CHECKING:

    pass


@app.command()
def pending(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Option("--thread", metavar="T", help="Only this thread.")] = None,
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than", metavar="SECONDS", help="Only markers older than this.", parser=flag(seconds)
        ),
    ] = None,
    output: Annotated[
        TableOrJson,
        typer.Option("--format", help="table or json.", parser=flag(choice(TableOrJson))),
    ] = TableOrJson.table,
) -> None:
    """The inbox: pending interrupts across all threads, oldest first."""
    with get_session(ctx).store() as store:
        items = store.list_pending(older_than=older_than)
    if thread is not None:
        items = [p for p in items if p["thread_id"] == thread]
    if output is TableOrJson.json:
        emit_json(items)
        return
    if not items:
        say("no pending interrupts")
        return
    rows = [
        (p["thread_id"], p["interrupt_id"], p["name"], when(number(p.get("minted_at"))),
         age(p.get("minted_at")), p.get("run_id"), p.get("payload"))
        for p in items
    ]
    table(
        f"{len(items)} pending interrupt(s)",
        ("thread", "interrupt", "name", "minted", "age", "run_id", "payload"),
        rows,
        wide=("payload",),
    )



# --- resume -------------------------------------------------------------------------


@app.command()
def resume(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", show_default=False)],
    interrupt_id: Annotated[str, typer.Argument(metavar="INTERRUPT_ID", show_default=False)],
    actor: Annotated[str, typer.Option("--actor", metavar="NAME", help="Who answers (recorded).")],
    response: Annotated[
        Any,
        typer.Option(
            "--response",
            metavar="JSON",
            help="The answer; none: an acknowledgement.",
            parser=flag(json_value),
        ),
    ] = None,
) -> None:
    """Admit an answer exactly once; print the resume value for Command(resume=...)."""
    with get_session(ctx).store() as store:
        command = store.resume(thread, interrupt_id, response, actor=actor)
    emit_json(command.resume, indent=None)
