"""``sweep``: the cron job that expires stale interrupts and wakes their graphs."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import (
    InvalidInputError,
    SweepIncompleteError,
)
from ..app import (
    PROG,
    Problem,
    TableOrJson,
    app,
    choice,
    count,
    flag,
    get_session,
    seconds,
)
from ..render import (
    emit_json,
    say,
    table,
)

if TYPE_CHECKING:

    pass


def import_graph(spec: str) -> Any:
    """``module:attribute`` (dotted attributes allowed), importable from the current folder."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInputError("--graph", f"must be MODULE:ATTRIBUTE, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInputError("--graph", f"cannot import {module_name!r}: {exc}") from None
    except Exception as exc:
        raise InvalidInputError(
            "--graph", f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise InvalidInputError(
                "--graph", f"module {module_name!r} has no attribute {attribute!r}"
            ) from None
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


class _Counting:
    """The gateway's waker, counting the graphs it woke (and settling abandoned answers)."""

    def __init__(self, gateway: Any, woken: list[tuple[str, str]]) -> None:
        self.waker = gateway.waker()
        self.woken = woken

    def __call__(self, thread_id: str, interrupt_id: str, reason: str) -> None:
        if self.waker(thread_id, interrupt_id, reason):
            self.woken.append((thread_id, interrupt_id))

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
            help="Overrides the global --ttl.",
            show_default=False,
            parser=flag(seconds),
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would expire; write nothing.")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", metavar="N", parser=flag(count))] = 500,
    graph: Annotated[
        str | None,
        typer.Option("--graph", metavar="MODULE:ATTR", help="Wake each expired thread's graph."),
    ] = None,
    output: Annotated[
        TableOrJson,
        typer.Option("--format", help="table or json.", parser=flag(choice(TableOrJson))),
    ] = TableOrJson.table,
) -> None:
    """Expire every stale pending interrupt (the cron job)."""
    woken: list[tuple[str, str]] = []
    compiled = None if graph is None else import_graph(graph)
    stopped: SweepIncompleteError | None = None
    with get_session(ctx).store() as store:
        on_expired = None if compiled is None else _Counting(gateway_for(compiled, store), woken)
        try:
            report = store.sweep(
                ttl_seconds=ttl, dry_run=dry_run, batch_size=batch_size, on_expired=on_expired
            )
        except SweepIncompleteError as exc:
            # What committed before the failure is printed like any report (the failure
            # goes to stderr, exit 1): a cron log must show what was expired.
            report, stopped = exc.report, exc
    if output is TableOrJson.json:
        emit_json({**report.as_dict(), "woken": len(woken)})
    else:
        say(str(report) + (f"; woke {len(woken)} graph(s)" if graph is not None else ""))
        if report.dry_run and report.expired:
            # What a dry run is for: the interrupts it would expire, by id.
            table(
                f"{len(report.expired)} interrupt(s) would expire",
                ("thread", "interrupt", "reason"),
                report.expired,
            )
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
