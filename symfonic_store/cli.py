"""The ``symfonic-store`` command line: parse, call the store, render.

Every command opens an :class:`~symfonic_store.InterruptStore` on ``--db`` (else
``SYMFONIC_STORE_URL``, else ``sqlite:///symfonic_store.db``), calls one store method and
renders the result: rich tables for people, ``--format json`` (or ``csv``) for programs.

Exit codes: 0 success; 1 the operation found or met a problem (a broken chain, a refused
resume, an unknown thread to replay, a failed ``--graph`` wake-up); 2 bad usage or
configuration (a bad flag or value, a bad URL, an unreachable database, a schema behind
the migrations). Errors are one line on stderr, never with a database password, and
without a traceback unless ``--traceback`` is given.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import io
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from . import validation
from .errors import (
    ConcurrencyConflictError,
    InterruptStateError,
    InvalidInputError,
    SymfonicStoreError,
)
from .persistence import DEFAULT_URL, parse_url, safe_url, scrub

if TYPE_CHECKING:
    from rich.console import Console
    from sqlalchemy.engine import Connection

    from .events import StoredEvent
    from .services.audit import AuditRecord
    from .store import InterruptStore

PROG = "symfonic-store"
URL_ENV = "SYMFONIC_STORE_URL"
TTL_ENV = "SYMFONIC_STORE_TTL"
DEMO_URL = "sqlite:///symfonic_demo.db"

# Click is vendored inside newer Typer releases; its root exception is public there as
# ``typer.TyperException``, and is ``click.ClickException`` with older ones.
_ClickError: type[Exception] = (
    getattr(typer, "TyperException", None) or importlib.import_module("click").ClickException
)


class Problem(Exception):
    """The operation ran and found a problem (exit code 1)."""


@dataclass
class Session:
    """What the global options say, shared by every command through ``ctx.obj``."""

    db: str | None = None
    ttl: float | None = None
    traceback: bool = False
    secrets: set[str] = field(default_factory=set)

    def url(self) -> str:
        return self.db or os.environ.get(URL_ENV) or DEFAULT_URL

    def remember_password(self, url: str) -> None:
        """Keep the URL's password, so that no output can ever show it."""
        with contextlib.suppress(SymfonicStoreError):
            password = parse_url(url).password
            if password:
                self.secrets.add(str(password))
        match = re.search(r"://[^:/@\s]+:([^@\s]+)@", url)
        if match:
            self.secrets.add(match.group(1))

    def redact(self, text: str) -> str:
        text = scrub(text)
        for secret in sorted(self.secrets, key=len, reverse=True):
            if len(secret) >= 3:
                text = text.replace(secret, "***")
        return text

    @contextlib.contextmanager
    def store(self, url: str | None = None, ttl_seconds: float | None = None) -> Iterator[InterruptStore]:
        from .store import InterruptStore

        url = url or self.url()
        self.remember_password(url)
        try:
            store = InterruptStore(url, ttl_seconds=self.ttl if ttl_seconds is None else ttl_seconds)
        except ImportError as exc:
            raise InvalidInputError(
                "database URL",
                f"its driver is not installed ({exc}); for PostgreSQL: "
                "pip install 'symfonic-store[postgres]'",
            ) from None
        try:
            yield store
        finally:
            store.close()


class TableOrJson(StrEnum):
    table = "table"
    json = "json"


class AuditFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


app = typer.Typer(
    name=PROG,
    help="An event-sourced store for LangGraph human-in-the-loop interrupts: "
    "the inbox, approvals, the expiry sweep, the audit trail and replays.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
db_app = typer.Typer(help="Schema migrations (Alembic).", no_args_is_help=True)
projection_app = typer.Typer(help="The persisted projection of the event log.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(projection_app, name="projection")


def _session(ctx: typer.Context) -> Session:
    obj = ctx.find_object(Session)
    if obj is None:  # invoked without main(): build one from the options
        obj = Session()
        ctx.obj = obj
    return obj


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help=f"Database URL; else ${URL_ENV}, else {DEFAULT_URL} in the current folder.",
            show_default=False,
        ),
    ] = None,
    ttl: Annotated[
        float | None,
        typer.Option(
            "--ttl",
            metavar="SECONDS",
            help=f"How long an interrupt stays current; else ${TTL_ENV}, else none.",
            show_default=False,
        ),
    ] = None,
    show_traceback: Annotated[
        bool, typer.Option("--traceback", help="Show the full traceback of an error.")
    ] = False,
) -> None:
    """Run `symfonic-store COMMAND --help` for a command's options."""
    session = _session(ctx)
    session.traceback = show_traceback
    session.db = db
    if db:
        session.remember_password(db)
    source = "--ttl"
    if ttl is None:
        env = os.environ.get(TTL_ENV, "").strip()
        if env:
            source = TTL_ENV
            try:
                ttl = float(env)
            except ValueError:
                raise InvalidInputError(TTL_ENV, f"must be a number of seconds, got {env!r}") from None
    session.ttl = validation.ttl(ttl, source)


# --- rendering ----------------------------------------------------------------------


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output is read by grep: a row stays on one line and no id is cut short.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 100_000
    return Console(
        file=stream, width=width, highlight=False, emoji=False, markup=False, soft_wrap=False
    )


def _emit(text: str) -> None:
    """Write machine-readable output as UTF-8, whatever the locale."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
    else:
        buffer.write(text.encode("utf-8"))
        buffer.flush()


def _emit_json(value: Any, *, indent: int | None = 2) -> None:
    _emit(json.dumps(value, ensure_ascii=False, indent=indent, default=str) + "\n")


def _when(value: datetime | float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _age(minted_at: Any) -> str:
    if not isinstance(minted_at, int | float) or isinstance(minted_at, bool):
        return "-"
    seconds = max(0, int(time.time() - minted_at))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return _when(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def _table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, wide: Sequence[str] = ()
) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for name in columns:
        if name in wide:
            table.add_column(name, overflow="fold")
        else:
            table.add_column(name, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(_cell(v)) for v in row))
    _console().print(table)


def _say(text: str) -> None:
    _console().print(text)


# --- db -----------------------------------------------------------------------------


def _migrate(ctx: typer.Context, change: Callable[[Connection], None] | None) -> str:
    """Run ``change`` on a store connection (no schema check); return the revision after."""
    from alembic.util import CommandError

    from .persistence import current_revision, head_revision, translate_errors

    session = _session(ctx)
    with session.store() as store, translate_errors(), store.engine.connect() as conn:
        try:
            if change is not None:
                with conn.begin():
                    change(conn)
        except CommandError as exc:
            raise InvalidInputError("revision", str(exc)) from None
        with conn.begin():
            current = current_revision(conn)
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
    from .persistence import upgrade

    _say(_migrate(ctx, lambda conn: upgrade(conn, revision)))


@db_app.command("downgrade")
def db_downgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision; `base` removes the schema.")],
) -> None:
    """Migrate the database down to REVISION (`base` drops the store's tables)."""
    from .persistence import downgrade

    _say(_migrate(ctx, lambda conn: downgrade(conn, revision)))


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Show the database's schema revision and the newest one."""
    _say(_migrate(ctx, None))


# --- pending ------------------------------------------------------------------------


@app.command()
def pending(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Option("--thread", metavar="T", help="Only this thread.")] = None,
    older_than: Annotated[
        float | None,
        typer.Option("--older-than", metavar="SECONDS", min=0, help="Only markers older than this."),
    ] = None,
    output: Annotated[TableOrJson, typer.Option("--format", help="Output format.")] = TableOrJson.table,
) -> None:
    """The inbox: pending interrupts across all threads, oldest first."""
    with _session(ctx).store() as store:
        items = store.list_pending(older_than=older_than)
    if thread is not None:
        items = [p for p in items if p["thread_id"] == thread]
    if output is TableOrJson.json:
        _emit_json(items)
        return
    if not items:
        _say("no pending interrupts")
        return
    rows = [
        (p["thread_id"], p["interrupt_id"], p["name"], _when(_number(p.get("minted_at"))),
         _age(p.get("minted_at")), p.get("run_id"), p.get("payload"))
        for p in items
    ]
    _table(
        f"{len(items)} pending interrupt(s)",
        ("thread", "interrupt", "name", "minted", "age", "run_id", "payload"),
        rows,
        wide=("payload",),
    )


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


# --- resume -------------------------------------------------------------------------


@app.command()
def resume(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", show_default=False)],
    interrupt_id: Annotated[str, typer.Argument(metavar="INTERRUPT_ID", show_default=False)],
    actor: Annotated[str, typer.Option("--actor", metavar="NAME", help="Who answers (recorded).")],
    response: Annotated[
        str | None,
        typer.Option("--response", metavar="JSON", help="The answer; none: an acknowledgement."),
    ] = None,
) -> None:
    """Admit an answer exactly once; print the resume value for Command(resume=...)."""
    value: Any = None
    if response is not None:
        try:
            value = json.loads(response)
        except ValueError as exc:
            raise InvalidInputError("--response", f"is not JSON ({exc})") from None
    with _session(ctx).store() as store:
        command = store.resume(thread, interrupt_id, value, actor=actor)
    _emit_json(command.resume, indent=None)


# --- sweep --------------------------------------------------------------------------


def _import_graph(spec: str) -> Any:
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


@app.command()
def sweep(
    ctx: typer.Context,
    ttl: Annotated[
        float | None,
        typer.Option("--ttl", metavar="SECONDS", help="Overrides the global --ttl.", show_default=False),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would expire; write nothing.")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", metavar="N", min=1)] = 500,
    graph: Annotated[
        str | None,
        typer.Option("--graph", metavar="MODULE:ATTR", help="Wake each expired thread's graph."),
    ] = None,
    output: Annotated[TableOrJson, typer.Option("--format", help="Output format.")] = TableOrJson.table,
) -> None:
    """Expire every stale pending interrupt (the cron job)."""
    from .langgraph import make_graph_waker

    on_expired = None
    woken: list[tuple[str, str]] = []
    if graph is not None:
        waker = make_graph_waker(_import_graph(graph))

        def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
            if waker(thread_id, interrupt_id, reason):
                woken.append((thread_id, interrupt_id))

    with _session(ctx).store() as store:
        report = store.sweep(
            ttl_seconds=ttl, dry_run=dry_run, batch_size=batch_size, on_expired=on_expired
        )
    if output is TableOrJson.json:
        _emit_json({**report.as_dict(), "woken": len(woken)})
    else:
        _say(str(report) + (f"; woke {len(woken)} graph(s)" if graph is not None else ""))
    if report.wake_failures:
        session = _session(ctx)
        for thread_id, interrupt_id, error in report.wake_failures:
            sys.stderr.write(
                session.redact(
                    f"{PROG}: wake-up failed for thread {thread_id!r}, interrupt "
                    f"{interrupt_id!r}: {error}"
                )
                + "\n"
            )
        raise Problem(
            f"{len(report.wake_failures)} graph wake-up(s) failed; the interrupts stay expired"
        )


# --- audit --------------------------------------------------------------------------


@app.command()
def audit(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Option("--thread", metavar="T")] = None,
    actor: Annotated[str | None, typer.Option("--actor", metavar="A")] = None,
    since: Annotated[
        str | None, typer.Option("--since", metavar="ISO", help="Minted at or after (no offset: UTC).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", metavar="ISO", help="Minted at or before (no offset: UTC).")
    ] = None,
    output: Annotated[AuditFormat, typer.Option("--format", help="Output format.")] = AuditFormat.table,
) -> None:
    """Who approved what: one record per interrupt, oldest first."""
    from .services.audit import AUDIT_FIELDS

    bounds = validation.moment(since, "--since"), validation.moment(until, "--until")
    with _session(ctx).store() as store:
        records = store.audit(thread_id=thread, actor=actor, since=bounds[0], until=bounds[1])
    if output is AuditFormat.json:
        _emit_json([r.as_dict() for r in records])
    elif output is AuditFormat.csv:
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(AUDIT_FIELDS)
        writer.writerows(r.as_csv_row() for r in records)
        _emit(text.getvalue())
    else:
        _audit_table(records)


def _audit_table(records: Sequence[AuditRecord]) -> None:
    if not records:
        _say("no interrupts match")
        return
    rows = [
        (r.minted_at, r.thread_id, r.interrupt_id, r.name, r.outcome, r.reason, r.actor,
         r.response, r.resolved_at, r.payload)
        for r in records
    ]
    _table(
        f"audit: {len(records)} interrupt(s)",
        ("minted", "thread", "interrupt", "name", "outcome", "reason", "actor", "response",
         "resolved", "payload"),
        rows,
        wide=("response", "payload"),
    )


# --- replay -------------------------------------------------------------------------


def _as_of(value: str | None) -> int | datetime | None:
    if value is None:
        return None
    if value.strip().isdigit():
        return int(value)
    return validation.moment(value, "--until")


@app.command()
def replay(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", show_default=False)],
    until: Annotated[
        str | None,
        typer.Option("--until", metavar="POSITION|ISO", help="Stop at a global position or a time."),
    ] = None,
    output: Annotated[TableOrJson, typer.Option("--format", help="Output format.")] = TableOrJson.table,
) -> None:
    """A thread's history: each event with the state right after it."""
    bound = _as_of(until)
    with _session(ctx).store() as store:
        steps = list(store.replay(thread, until=bound))
        if not steps and (bound is None or not store.history(thread)):
            raise Problem(f"thread {thread!r} has no events: nothing to replay")
    if output is TableOrJson.json:
        _emit_json([{"event": e.as_dict(), "state": s} for e, s in steps])
        return
    _replay_table(thread, steps)


def _replay_table(thread: str, steps: Sequence[tuple[StoredEvent, dict[str, Any]]]) -> None:
    rows = []
    for event, state in steps:
        marker = state.get("_interrupt_pending") or {}
        rows.append(
            (event.position, event.version, event.occurred_at, event.type, event.interrupt_id,
             event.actor, event.data, marker.get("interrupt_id"), state.get("run_id"))
        )
    _table(
        f"replay of thread {thread!r}: {len(steps)} event(s)",
        ("position", "version", "occurred", "type", "interrupt", "actor", "data",
         "pending after", "run_id after"),
        rows,
        wide=("data",),
    )


# --- verify -------------------------------------------------------------------------


@app.command()
def verify(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Option("--thread", metavar="T", help="Only this thread.")] = None,
) -> None:
    """Check the tamper-evidence hash chains; exit 1 when one is broken."""
    with _session(ctx).store() as store:
        report = store.verify(thread)
    _say(str(report))
    if not report.ok:
        first = report.broken[0]
        raise Problem(
            f"{len(report.broken)} broken hash chain(s); first: thread {first.thread_id!r} "
            f"at version {first.version}, position {first.position}"
        )


# --- projection ---------------------------------------------------------------------


@projection_app.command("rebuild")
def projection_rebuild(ctx: typer.Context) -> None:
    """Rebuild the projection from the event log (a progress bar on a terminal)."""
    with _session(ctx).store() as store, _progress("folding events") as progress:
        folded = store.rebuild_projection(progress=progress)
    _say(f"rebuilt the projection from {folded} event(s)")


@contextlib.contextmanager
def _progress(label: str) -> Iterator[Callable[[int], None] | None]:
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
        console=_console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done: bar.update(task, completed=done)


# --- demo ---------------------------------------------------------------------------


@app.command()
def demo(ctx: typer.Context) -> None:
    """Run a scripted agent: approvals by alice and bob, an expiry, the audit, a replay.

    Uses --db if given, else symfonic_demo.db in the current folder; never
    $SYMFONIC_STORE_URL, so a demo sweep cannot touch a real store.
    """
    from .demo import run_demo

    session = _session(ctx)
    url = session.db or DEMO_URL
    session.remember_password(url)
    result = run_demo(url, say=_say)
    _say("")
    _audit_table(result.audit)
    _say("")
    _replay_table(result.replay_thread, result.replay)
    _say(
        f"\nExplore the store: {PROG} --db {safe_url(url)} audit "
        f"(or: pending, replay {result.replay_thread}, verify)"
    )


# --- entry point --------------------------------------------------------------------


def _exit_code(exc: BaseException) -> int:
    if isinstance(exc, Problem | InterruptStateError | ConcurrencyConflictError):
        return 1
    if isinstance(exc, SymfonicStoreError):
        return 2
    return 1


def _fail(session: Session, exc: BaseException, message: str | None = None) -> int:
    if session.traceback:
        sys.stderr.write(session.redact("".join(traceback.format_exception(exc))))
    text = message if message is not None else str(exc) or type(exc).__name__
    if not isinstance(exc, Problem | SymfonicStoreError) and message is None:
        text = f"unexpected {type(exc).__name__}: {text}"
        if not session.traceback:
            text += " (run with --traceback for details)"
    line = " ".join(session.redact(text).split())
    sys.stderr.write(f"{PROG}: error: {line}\n")
    return _exit_code(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    session = Session()
    command = typer.main.get_command(app)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = command.main(args=args, prog_name=PROG, standalone_mode=False, obj=session)
        return result if isinstance(result, int) else 0
    except _ClickError as exc:
        usage_ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":
            # Building the error printed the help already (rich) or carries it (plain).
            if str(exc).strip():
                sys.stderr.write(str(exc).rstrip() + "\n")
            return 2
        if usage_ctx is not None:
            sys.stderr.write(usage_ctx.get_usage() + "\n")
        format_message = getattr(exc, "format_message", None)
        message = format_message() if callable(format_message) else str(exc)
        _fail(session, exc, message)
        return int(getattr(exc, "exit_code", 2))
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:
        return _fail(session, exc)


if __name__ == "__main__":
    sys.exit(main())
