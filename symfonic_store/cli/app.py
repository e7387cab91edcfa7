"""The app: global options, the session every command shares, the error vocabulary.

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
import importlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from .. import validation
from ..db.urls import DEFAULT_URL, parse_url, scrub
from ..errors import InvalidInputError, SymfonicStoreError

if TYPE_CHECKING:
    from ..store import InterruptStore

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
        from ..store import InterruptStore

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


def get_session(ctx: typer.Context) -> Session:
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
    session = get_session(ctx)
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
