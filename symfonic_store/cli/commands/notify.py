"""``notify``: deliver the log's events to webhooks and Apprise URLs (SPEC §14), and the
subscriptions' ``status``, ``retry`` of dead letters and ``enable`` after a 410."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer

from ...errors import DatabaseError, InvalidInputError, SchemaNotMigratedError
from ..app import Problem, Session, TableOrJson, TableOrJsonFormat, app, flag, get_session, seconds
from ..render import emit_json, say, table

if TYPE_CHECKING:
    from ...notify import Notifier, NotifyConfig

notify_app = typer.Typer(
    help="Deliver the log's events to webhooks and Apprise URLs (docs/notify.md).",
    invoke_without_command=True,
)
app.add_typer(notify_app, name="notify")

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", metavar="FILE", help="The subscriptions (JSON, docs/notify.md)."),
]


def _at_least(minimum: float) -> Any:
    """A number of seconds no smaller than ``minimum``, told in the store's words."""

    def parse(value: Any) -> float:
        number = seconds(value)
        if number < minimum:
            raise InvalidInputError("value", f"must be at least {minimum:g} seconds, got {number:g}")
        return number

    return parse

def _config(session: Session, path: Path | None) -> NotifyConfig:
    from ...notify import load_config

    if path is None:
        raise InvalidInputError("--config", "give --config FILE: the subscriptions to deliver to")
    config = load_config(path)
    for sub in config.subscriptions:  # URLs carry secrets: never in an error line
        for url in sub.destination.urls:
            session.secrets.add(url)
            with contextlib.suppress(ValueError):
                parts = urlsplit(url)
                for piece in (parts.username, parts.password, parts.path, parts.query):
                    if piece and len(piece) > 3:
                        session.secrets.add(piece)
    return config


@contextlib.contextmanager
def _notifier(ctx: typer.Context, config: Path | None, **options: Any) -> Iterator[Notifier]:
    """The store and a notifier on it; a store that cannot be reached is exit code 1."""
    from ...notify import Notifier

    session = get_session(ctx)
    loaded = _config(session, config)
    try:
        with session.store() as store, Notifier(store, loaded, **options) as notifier:
            yield notifier
    except (DatabaseError, SchemaNotMigratedError) as exc:
        raise Problem(f"could not run: {exc}") from exc


@notify_app.callback()
def notify(
    ctx: typer.Context,
    config: ConfigOption = None,
    once: Annotated[
        bool, typer.Option("--once", help="Deliver what is due, then exit (for cron).")
    ] = False,
    inbox_url: Annotated[
        str | None,
        typer.Option("--inbox-url", metavar="URL",
                     help="The approval service's address: messages link to its interrupts."),
    ] = None,
    from_start: Annotated[
        bool,
        typer.Option("--from-start",
                     help="Start at the log's beginning, not its end: a new subscription is "
                     "made there, an existing one rewound there (said on stderr)."),
    ] = False,
    lease_seconds: Annotated[
        float,
        typer.Option("--lease-seconds", metavar="S", parser=flag(_at_least(1.0)),
                     help="How long a stopped process holds a subscription before another takes it over; "
                          "above every subscription's timeout."),
    ] = 60.0,
    poll_seconds: Annotated[
        float,
        typer.Option("--poll-seconds", metavar="S", parser=flag(_at_least(0.05)),
                     help="Pause between passes when long-running."),
    ] = 1.0,
) -> None:
    """Deliver the log's events to the config's subscriptions: at least once, in log order.

    Runs until stopped (SIGTERM or Ctrl-C finish the delivery in flight), or with --once
    delivers what is due and exits: 0 when it ran (failed deliveries are recorded for
    their retry and counted), 1 when the store could not be reached, 2 for a bad config.
    """
    if ctx.invoked_subcommand is not None:
        return
    options = {"inbox_url": inbox_url, "from_start": from_start,
               "lease_seconds": lease_seconds, "poll_seconds": poll_seconds}
    _quiet_logs()
    with _notifier(ctx, config, **options) as notifier:
        if once:
            report = notifier.run_once()
            say(f"delivered {report.total('delivered')}, failed {report.total('failed')}, "
                f"dead-lettered {report.total('dead_lettered')}, "
                f"disabled {report.total('disabled')}, busy {report.total('busy')}")
            return
        stop = threading.Event()

        def stopping(signum: int, frame: object) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, stopping)
        signal.signal(signal.SIGINT, stopping)
        say(f"notify: delivering to {len(notifier.config.subscriptions)} subscription(s)")
        notifier.run(stop)
        say("notify: stopped")


def _quiet_logs() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("symfonic_store.notify")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # said once: not again by the command line's own handler


@notify_app.command("status")
def status(ctx: typer.Context, config: ConfigOption = None, output: TableOrJsonFormat = TableOrJson.table) -> None:
    """Each subscription: where it goes (scheme and host only), its cursor, state, counts
    and dead letters."""
    with _notifier(ctx, config) as notifier:
        rows = notifier.status()
        unknown = notifier.unknown_patterns()
    if output is TableOrJson.json:
        emit_json(rows)
        return
    table(
        "Subscriptions",
        ["name", "target", "position", "state", "delivered", "failed", "dead letters", "last error"],
        [[r["name"], r["target"], r["position"], r["state"], r["delivered"], r["failed"],
          len(r["dead_letters"]), r["last_error"] or ""] for r in rows],
    )
    letters = [(r["name"], d) for r in rows for d in r["dead_letters"]]
    if letters:
        table(
            "Dead letters (notify retry NAME sends them again)",
            ["subscription", "position", "type", "thread", "interrupt", "tries", "error"],
            [[n, d["position"], d["type"], d["thread_id"], d["interrupt_id"] or "", d["tries"], d["error"] or ""]
             for n, d in letters],
        )
    for name, pattern in unknown:
        say(f"note: {name}: events pattern {pattern!r} matches no event type of this release")


@notify_app.command("retry")
def retry(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The subscription.")],
    config: ConfigOption = None,
) -> None:
    """Send a subscription's dead letters again (exit 1 when one still fails)."""
    with _notifier(ctx, config) as notifier:
        result = notifier.retry(name)
    say(f"{name}: re-sent {result.resent}, still failing {result.failed}")
    if result.failed:
        raise Problem(f"{result.failed} dead letter(s) of {name} still fail: see notify status")


@notify_app.command("enable")
def enable(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The subscription.")],
    config: ConfigOption = None,
) -> None:
    """Resume a subscription a 410 disabled, at the event it stopped on."""
    with _notifier(ctx, config) as notifier:
        changed = notifier.enable(name)
    say(f"{name}: enabled" if changed else f"{name}: was not disabled")
