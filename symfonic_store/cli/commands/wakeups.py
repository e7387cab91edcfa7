"""``wakeups``: what expiries still owe their graphs, by graph, and giving them up."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ...errors import InvalidInputError
from ..app import TableOrJson, TableOrJsonFormat, app, get_session
from ..render import emit_json, say, table, when


def _graph_cell(graph: str | None) -> str:
    return "(none)" if graph is None else graph


def _json(item: dict[str, Any]) -> dict[str, Any]:
    moment = item.get("expired_at")
    return {**item, "expired_at": None if moment is None else moment.isoformat()}


@app.command()
def wakeups(
    ctx: typer.Context,
    graph: Annotated[
        str | None,
        typer.Option(
            "--graph",
            metavar="NAME",
            help="Only the wake-ups owed to this graph (its name, as the mint recorded it "
            "and this command lists it).",
        ),
    ] = None,
    unnamed: Annotated[
        bool,
        typer.Option("--unnamed", help="Only the wake-ups whose mint names no graph."),
    ] = False,
    drop: Annotated[
        bool,
        typer.Option(
            "--drop",
            help="Give them up: no sweep delivers them any more; who and when are recorded "
            "in the wake-up table. Needs --actor and --graph or --unnamed.",
        ),
    ] = False,
    actor: Annotated[
        str | None,
        typer.Option("--actor", metavar="NAME", help="Who drops them (recorded); with --drop."),
    ] = None,
    output: TableOrJsonFormat = TableOrJson.table,
) -> None:
    """The wake-ups expiries still owe their graphs, by graph; --drop gives them up.

    A wake-up is owed to the graph whose name the interrupt's mint recorded, and only
    `sweep --graph MODULE:ATTR` of that graph delivers it (one whose mint names no graph:
    the graph whose checkpointer holds the thread).
    """
    if graph is not None and unnamed:
        raise InvalidInputError("--graph", "give --graph NAME or --unnamed, not both")
    if not drop and actor is not None:
        raise InvalidInputError("--actor", "only with --drop")
    if drop and actor is None:
        raise InvalidInputError("--actor", "--drop needs --actor NAME: who gives the wake-ups up")
    if drop and graph is None and not unnamed:
        raise InvalidInputError(
            "--graph", "--drop needs --graph NAME (or --unnamed): the graph whose wake-ups to drop"
        )
    with get_session(ctx).store() as store:
        if drop:
            assert actor is not None
            items = store.drop_wakeups(graph=graph, actor=actor)
        else:
            items = store.list_wakeups()
            if graph is not None or unnamed:
                chosen = [i for i in items if i["graph"] == graph]
                if not chosen:
                    owed = sorted({_graph_cell(i["graph"]) for i in items})
                    raise InvalidInputError(
                        "--unnamed" if unnamed else "--graph",
                        f"no wake-up is owed to {'no named graph' if unnamed else repr(graph)}; "
                        + (f"owed to: {', '.join(owed)}" if owed else "none is owed"),
                    )
                items = chosen
    if output is TableOrJson.json:
        emit_json([_json(i) for i in items])
        return
    if not items:
        say("no wake-ups are owed")
        return
    by_graph: dict[str, int] = {}
    for item in items:
        name = _graph_cell(item["graph"])
        by_graph[name] = by_graph.get(name, 0) + 1
    summary = ", ".join(f"{n} to {g}" for g, n in by_graph.items())
    title = (
        f"dropped {len(items)} wake-up(s) as {actor!r} ({summary})"
        if drop
        else f"{len(items)} wake-up(s) owed ({summary})"
    )
    table(
        title,
        ("graph", "thread", "interrupt", "reason", "expired", "attempts", "last_error"),
        [
            (_graph_cell(i["graph"]), i["thread_id"], i["interrupt_id"], i["reason"],
             when(i["expired_at"]), i["attempts"], i["last_error"])
            for i in items
        ],
        wide=("last_error",),
    )
