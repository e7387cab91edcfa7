"""``sweep``: the cron job that expires stale interrupts and wakes their graphs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import (
    InvalidInputError,
    SweepIncompleteError,
)
from ...policy import Policy
from ..app import (
    PROG,
    Problem,
    TableOrJson,
    TableOrJsonFormat,
    app,
    count,
    flag,
    get_session,
    seconds,
)
from ..attributes import import_attribute
from ..render import (
    emit_json,
    say,
    table,
)

if TYPE_CHECKING:

    from ...sweep_report import SweepReport


def import_graph(spec: str) -> Any:
    """``module:attribute`` (dotted attributes allowed), importable from the current folder."""
    target = import_attribute(spec, "--graph")
    if not (callable(getattr(target, "invoke", None)) and callable(getattr(target, "get_state", None))):
        raise InvalidInputError(
            "--graph",
            f"{spec!r} is a {type(target).__name__}, not a compiled LangGraph graph "
            "(StateGraph(...).compile(checkpointer=...))",
        )
    return target


def gateway_for(compiled: Any, store: Any) -> Any:
    """The gateway of a ``--graph`` on the command's store (LangGraph loads here)."""
    from ...langgraph import InterruptGateway

    return InterruptGateway(compiled, store)


LangGraphUrl = Annotated[
    str | None,
    typer.Option(
        "--langgraph-url",
        metavar="URL",
        help="An Agent Server (langgraph dev/up) whose graphs' interrupts are answered or "
        "woken through langgraph-sdk (docs/agent-server.md).",
    ),
]
LangGraphKeyFile = Annotated[
    Path | None,
    typer.Option(
        "--langgraph-api-key-file",
        metavar="FILE",
        help="The Agent Server's API key (sent as x-api-key); else $LANGGRAPH_API_KEY.",
    ),
]


def served_graphs(store: Any, url: str, key_file: Path | None) -> Any:
    """The answerer and waker of the graphs an Agent Server serves (``--langgraph-url``)."""
    from ...agent_server_client import ServedGraphs, read_api_key

    return ServedGraphs(store, url, api_key=read_api_key(key_file))


class _Counting:
    """The gateway's waker, counting the graphs it woke (and settling abandoned answers)."""

    def __init__(self, gateway: Any, woken: list[tuple[str, str]]) -> None:
        self.waker = gateway.waker()
        self.woken = woken
        # The sweep hands this callback only what is owed to this graph (or to none).
        self.graph_name = self.waker.graph_name

    def __call__(self, thread_id: str, interrupt_id: str, reason: str) -> Any:
        outcome = self.waker(thread_id, interrupt_id, reason)
        if outcome is True:
            self.woken.append((thread_id, interrupt_id))
        return outcome  # NOT_HELD keeps the wake-up owed to the graph that holds the thread

    def settle_claim(self, thread_id: str, interrupt_id: str) -> Any:
        return self.waker.settle_claim(thread_id, interrupt_id)


@app.command()
def sweep(
    ctx: typer.Context,
    ttl: Annotated[
        float | None,
        typer.Option(
            "--ttl",
            metavar="SECONDS",
            help="Overrides the global --ttl. With no TTL at all nothing expires by age "
            "(only runs that moved on); a note on stderr says so.",
            show_default=False,
            parser=flag(seconds),
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would expire; write nothing.")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", metavar="N", parser=flag(count))] = 500,
    graph: Annotated[
        str | None,
        typer.Option(
            "--graph",
            metavar="MODULE:ATTR",
            help="Wake the graphs of the expired threads, and deliver the wake-ups owed to this "
            "graph (by its name) or to no named graph when its checkpointer holds the thread.",
        ),
    ] = None,
    langgraph_url: LangGraphUrl = None,
    langgraph_api_key_file: LangGraphKeyFile = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            metavar="FILE",
            help="The service's policy file (serve --policy): remind of and escalate the open "
            "interrupts its remind_after / escalate_after (with escalate_to) say, once each.",
        ),
    ] = None,
    output: TableOrJsonFormat = TableOrJson.table,
) -> None:
    """Expire every stale pending interrupt (the cron job), and with --policy remind of and
    escalate the open ones.

    Without a TTL (--ttl, SYMFONIC_STORE_TTL) only interrupts whose run moved on expire,
    and a note on stderr says so. Lists what it expired (thread, interrupt, reason) and
    what it reminded of or escalated; a note on stderr says to which graphs wake-ups are
    still owed and what to do.
    """
    woken: list[tuple[str, str]] = []
    if graph is not None and langgraph_url is not None:
        raise InvalidInputError("--langgraph-url", "wakes served graphs: give it or --graph, not both")
    rules = None if policy is None else Policy.from_file(policy)
    compiled = None if graph is None else import_graph(graph)
    stopped: SweepIncompleteError | None = None
    with get_session(ctx).store() as store:
        on_expired = None if compiled is None else _Counting(gateway_for(compiled, store), woken)
        if langgraph_url is not None:
            served = served_graphs(store, langgraph_url, langgraph_api_key_file)
            if not dry_run:
                served.check()  # unreachable: said now, before anything expires
            on_expired = _Counting(served, woken)
        try:
            report = store.sweep(
                ttl_seconds=ttl, dry_run=dry_run, batch_size=batch_size, on_expired=on_expired,
                policy=rules,
            )
        except SweepIncompleteError as exc:
            # What committed before the failure is printed like any report (the failure
            # goes to stderr, exit 1): a cron log must show what was expired.
            report, stopped = exc.report, exc
    if output is TableOrJson.json:
        emit_json({**report.as_dict(), "woken": len(woken)})
    else:
        waking = graph is not None or langgraph_url is not None
        say(str(report) + (f"; woke {len(woken)} graph(s)" if waking else ""))
        if report.expired:
            # A cron log must say which interrupts went, not only how many.
            table(
                f"{len(report.expired)} interrupt(s) "
                + ("would expire" if report.dry_run else "expired"),
                ("thread", "interrupt", "reason"),
                report.expired,
            )
        chased = [(t, i, "reminded", f"after {a}s") for t, i, a in report.reminded] + [
            (t, i, "escalated", f"after {a}s to {', '.join(to)}") for t, i, a, to in report.escalated
        ]
        if chased:
            table(
                f"{len(chased)} reminder(s) and escalation(s) "
                + ("due" if report.dry_run else "recorded"),
                ("thread", "interrupt", "event", "why"),
                chased,
            )
    _notes(ctx, report)
    if report.wake_failures:
        session = get_session(ctx)
        for thread_id, interrupt_id, error in report.wake_failures:
            sys.stderr.write(
                session.redact(
                    f"{PROG}: wake-up failed for thread {thread_id!r}, interrupt "
                    f"{interrupt_id!r}: {error}"
                )
                + "\n"
            )
    if stopped is not None:
        raise Problem(str(stopped))
    if report.wake_failures:
        raise Problem(
            f"{len(report.wake_failures)} graph wake-up(s) failed; the interrupts stay expired"
        )


def _notes(ctx: typer.Context, report: SweepReport) -> None:
    """What an operator must notice, on stderr (the exit code stays the report's)."""
    notes = []
    if report.ttl_seconds is None:
        # A cron line that forgot --ttl would otherwise expire nothing by age, silently.
        notes.append(
            "no TTL configured (--ttl or SYMFONIC_STORE_TTL): only interrupts whose run "
            "moved on (run_id) were expired; nothing expires by age"
        )
    advice = report.owed_advice()
    if advice is not None:
        notes.append(advice)
    session = get_session(ctx)
    for note in notes:
        sys.stderr.write(session.redact(f"{PROG}: note: {note}") + "\n")
