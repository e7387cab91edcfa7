"""``pending``, ``resume`` and ``vote``: the inbox and its answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..app import (
    TableOrJson,
    TableOrJsonFormat,
    app,
    count,
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
    tenant: Annotated[
        str | None, typer.Option("--tenant", metavar="T", help="Only interrupts minted for this tenant.")
    ] = None,
    output: TableOrJsonFormat = TableOrJson.table,
) -> None:
    """The inbox: pending interrupts across all threads, oldest first."""
    with get_session(ctx).store() as store:
        items = store.list_pending(older_than=older_than, tenant=tenant)
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


# Options declared where they are read, alike in shape only (see cli/app.py).
@app.command()
def resume(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", show_default=False)],
    interrupt_id: Annotated[str, typer.Argument(metavar="INTERRUPT_ID", show_default=False)],
    actor: Annotated[str, typer.Option("--actor", metavar="NAME", help="Who answers (recorded).")],
    response: Annotated[
        Any,
        # An option alike others in shape only (see cli/app.py), deliberately declared where it is
        # read.
        typer.Option(
            "--response",
            metavar="JSON",
            help="The answer; none: an acknowledgement.",
            parser=flag(json_value),
        ),
    ] = None,
    # Options alike others in shape only, deliberately declared where they are read.
    graph: Annotated[
        str | None,
        typer.Option(
            "--graph",
            metavar="MODULE:ATTR",
            help="Answer through this graph's gateway and resume it (LangGraph interrupts).",
        ),
    ] = None,
) -> None:
    """Admit an answer exactly once; print the resume value for Command(resume=...).

    With --graph the answer goes through the graph's gateway (two phases: it is
    recorded as resumed only once the graph took it) and the graph is resumed; it
    prints {"outcome": "resumed", ...}. A LangGraph interrupt needs --graph.
    """
    from .sweep import gateway_for, import_graph

    compiled = None if graph is None else import_graph(graph)
    with get_session(ctx).store() as store:
        if compiled is None:
            command = store.resume(thread, interrupt_id, response, actor=actor)
        else:
            gateway_for(compiled, store).answer(thread, interrupt_id, response, actor=actor)
    if compiled is None:
        emit_json(command.resume, indent=None)
    else:
        emit_json(
            {"outcome": "resumed", "thread_id": thread, "interrupt_id": interrupt_id, "actor": actor},
            indent=None,
        )


# --- vote ---------------------------------------------------------------------------


# Options declared where they are read, alike in shape only (see cli/app.py).
@app.command()
def vote(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", show_default=False)],
    interrupt_id: Annotated[str, typer.Argument(metavar="INTERRUPT_ID", show_default=False)],
    decision: Annotated[
        str, typer.Argument(metavar="DECISION", help="approve, accept or reject (any word without --needed).",
                            show_default=False)
    ],
    actor: Annotated[str, typer.Option("--actor", metavar="NAME", help="Who votes (recorded).")],
    response: Annotated[
        Any,
        # An option alike resume's in shape only, deliberately declared where it is read.
        typer.Option(
            "--response",
            metavar="JSON",
            help="The answer the vote carries (resumed with, when it decides).",
            parser=flag(json_value),
        ),
    ] = None,
    needed: Annotated[
        int | None,
        typer.Option("--needed", metavar="N", help="The quorum: N distinct approvers (N >= 2) resume it.",
                     parser=flag(count)),
    ] = None,
    veto: Annotated[
        bool, typer.Option("--veto/--no-veto", help="With --needed, a reject ends it at once.")
    ] = True,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", metavar="NAME", help="An actor whose votes never count (repeatable): the requester under four-eyes."),
    ] = None,
    graph: Annotated[
        str | None,
        typer.Option(
            "--graph",
            metavar="MODULE:ATTR",
            help="Answer the decided interrupt through this graph's gateway and resume it (LangGraph interrupts).",
        ),
    ] = None,
) -> None:
    """Record a vote; with --needed, the quorum's (SPEC §15): the vote that brings the
    distinct approvers to N -- or a reject, unless --no-veto -- resumes the interrupt
    once with data["approvers"]. Prints one JSON line: {"outcome": "voted", "votes": k,
    "needed": N} (k: the approvals counted; without --needed, the votes recorded), or
    {"outcome": "resumed", "actor", "approvers", "resume"}; a LangGraph interrupt needs
    --graph to be resumed (else {"outcome": "decided", ...}, left open).
    """
    from .sweep import gateway_for, import_graph

    compiled = None if graph is None else import_graph(graph)
    with get_session(ctx).store() as store:
        votes = store.vote(
            thread, interrupt_id, decision, response, actor=actor, needed=needed, veto=veto,
            exclude=exclude or None, resume_marker=compiled is None,
        )
        if votes.decided and compiled is not None:
            gateway_for(compiled, store).answer(
                thread, interrupt_id, response, actor=actor, approvers=votes.resume_approvers
            )
    said: dict[str, Any] = {"thread_id": thread, "interrupt_id": interrupt_id, "actor": actor}
    if not votes.decided:
        counted = len(votes) if needed is None else len(votes.approvers)
        emit_json({"outcome": "voted", "votes": counted, "needed": needed, **said}, indent=None)
        return
    approvers = {"approvers": list(votes.resume_approvers)} if votes.resume_approvers else {}
    if votes.resumed is not None:
        emit_json({"outcome": "resumed", **said, **approvers, "resume": votes.resumed.resume}, indent=None)
    elif compiled is not None:
        emit_json({"outcome": "resumed", **said, **approvers}, indent=None)
    else:
        emit_json({"outcome": "decided", **said, **approvers,
                   "note": "a LangGraph interrupt: vote with --graph MODULE:ATTR to resume it"}, indent=None)
