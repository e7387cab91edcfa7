"""The app: global options, the session every command shares, the error vocabulary.

Every command opens an :class:`~symfonic_store.InterruptStore` on ``--db`` (else
``SYMFONIC_STORE_URL``, else ``sqlite:///symfonic_store.db``), calls one store method and
renders the result: rich tables for people, ``--format json`` (or ``csv``) for programs.

Exit codes: 0 success; 1 the operation found or met a problem (a broken chain, a refused
resume, an unknown thread to replay, a failed ``--graph`` wake-up); 2 bad usage or
configuration (a bad flag or value, a bad URL, an unreachable database, a database, role
or password the server refuses, a schema behind the migrations). Errors are one line on stderr, never with a database password, and
without a traceback unless ``--traceback`` is given.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import quote, quote_plus

import typer

from .. import __version__, validation
from ..db.urls import DEFAULT_URL, parse_url, scrub
from ..errors import InvalidInputError, SchemaNotMigratedError, SymfonicStoreError

if TYPE_CHECKING:
    from ..store import InterruptStore

PROG = "symfonic-store"
URL_ENV = "SYMFONIC_STORE_URL"
TTL_ENV = "SYMFONIC_STORE_TTL"
DEMO_URL = "sqlite:///symfonic_demo.db"

# Click is vendored inside newer Typer releases; its root exception is public there as
# ``typer.TyperException``, and is ``click.ClickException`` with older ones.
ClickError: type[Exception] = (
    getattr(typer, "TyperException", None) or importlib.import_module("click").ClickException
)
# The module holding Click's usage errors (vendored by Typer or not), for main() to tell them apart.
click_errors = sys.modules[typer.BadParameter.__module__]


class Problem(Exception):
    """The operation ran and found a problem (exit code 1)."""


@dataclass
class Session:
    """What the global options say, shared by every command through ``ctx.obj``."""

    db: str | None = None
    ttl: float | None = None
    decisions: str | None = None
    """``--decisions MODULE:ATTR``: the store's decisions function (SPEC §12)."""
    traceback: bool = False
    secrets: set[str] = field(default_factory=set)

    def url(self) -> str:
        return self.db or os.environ.get(URL_ENV) or DEFAULT_URL

    def remember_password(self, url: str) -> None:
        """Keep the URL's password, so that no output can ever show it.

        In every form it could be printed in: as given, decoded, percent-encoded, and as
        SQLAlchemy renders it (which leaves a space as a space, so a pattern that stops
        at whitespace would miss it).
        """
        texts = [url]
        with contextlib.suppress(SymfonicStoreError):
            parsed = parse_url(url)
            if parsed.password:
                password = str(parsed.password)
                self.secrets |= {password, quote(password, safe=""), quote_plus(password)}
                texts.append(parsed.render_as_string(hide_password=False))
        for text in texts:
            match = re.search(r"://[^:/@]*:([^@]+)@", text)
            if match:
                self.secrets.add(match.group(1))

    def redact(self, text: str) -> str:
        text = scrub(text)
        for secret in sorted(self.secrets, key=len, reverse=True):
            if len(secret) >= 3:
                text = text.replace(secret, "***")
        return text

    @contextlib.contextmanager
    def store(
        self, url: str | None = None, ttl_seconds: float | None = None, *, create: bool = False
    ) -> Iterator[InterruptStore]:
        """The store on ``url`` (else the session's); ``create``: a missing SQLite file may be made."""
        from ..store import InterruptStore

        url = url or self.url()
        self.remember_password(url)
        check_database(url, create=create)
        rule = None
        if self.decisions is not None:
            from .attributes import decision_rule

            rule = decision_rule(self.decisions)
        try:
            store = InterruptStore(
                url,
                ttl_seconds=self.ttl if ttl_seconds is None else ttl_seconds,
                decisions=rule,
            )
        except ImportError as exc:
            raise InvalidInputError(
                "database URL",
                f"its driver is not installed ({exc}); for PostgreSQL: "
                "pip install '.[postgres]' in a checkout of symfonic-store",
            ) from None
        try:
            yield store
        finally:
            store.close()


def check_database(url: str, *, create: bool) -> None:
    """Refuse, before anything connects, a URL the store would misread or a missing file.

    SQLite creates a database file on first connect, so `pending` with a mistyped path
    would leave an empty file behind and then complain that it has no schema. Only
    ``db upgrade`` (and ``demo``, which sets its store up) may create one.
    """
    try:
        parsed = parse_url(url)
    except InvalidInputError:
        return  # the store refuses it with its own message
    from ..db.backends import backend_for_url, misread_scheme

    problem = misread_scheme(parsed)
    if problem is not None:
        raise InvalidInputError("database URL", problem)
    backend = backend_for_url(parsed)
    if backend is None or create:
        return
    file = backend.database_file(parsed)  # None: a server's, in memory, or the driver's to resolve
    if file is not None and not file.exists():
        raise SchemaNotMigratedError(
            f"the SQLite database {str(file)!r} does not exist: run `{PROG} db upgrade` "
            "to create it, or check the path"
        )


class TableOrJson(StrEnum):
    table = "table"
    json = "json"


class AuditFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


# --- flag values ----------------------------------------------------------------------
#
# Every typed flag is parsed here rather than by Typer (whose wording, and whose use of
# pydantic, changes between releases), so a bad value is told in the store's own words:
# `invalid --format: 'xml' is not one of table, json`. Each parser takes the flag's text
# (or its default) and raises InvalidInputError; `flag()` turns that into Click's
# BadParameter, so main() can add the command's usage line and name the flag.

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


def seconds(value: Any, field: str = "value") -> float:
    """A number of seconds: finite and >= 0 (``--ttl``, ``--older-than``, ``$SYMFONIC_STORE_TTL``)."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        raise InvalidInputError(
            field, f"must be a number of seconds, got {validation.shown(text)}"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise InvalidInputError(
            field, f"must be a finite number of seconds >= 0, got {validation.shown(text)}"
        )
    return number


def count(value: Any, field: str = "value") -> int:
    """A whole number from 1 up to what SQL compares (``--batch-size``)."""
    text = str(value).strip()
    problem = f"must be a whole number from 1 to {validation.MAX_SQL_INT}, got {validation.shown(text)}"
    try:
        number = int(text)
    except ValueError:  # not digits, or more of them than int() converts
        raise InvalidInputError(field, problem) from None
    if not 1 <= number <= validation.MAX_SQL_INT:
        raise InvalidInputError(field, problem)
    return number


def json_value(value: Any, field: str = "value") -> Any:
    """Strict JSON text (no NaN or Infinity), however deep or malformed the input."""

    def no_constant(name: str) -> Any:
        raise InvalidInputError(field, f"is not JSON ({name} is not a JSON value)")

    def whole_number(digits: str) -> int:
        limit = sys.get_int_max_str_digits()
        if limit and len(digits.lstrip("-")) > limit:
            raise InvalidInputError(field, f"has a number with more than {limit} digits")
        return int(digits)

    try:
        return json.loads(str(value), parse_constant=no_constant, parse_int=whole_number)
    except InvalidInputError:
        raise
    # Worded as the server's policy file words a decode error (server/policy.py), on
    # purpose: one vocabulary; the two read different things (a flag, a file) otherwise.
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            field, f"is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise InvalidInputError(field, "is nested too deeply to be read as JSON") from None
    except ValueError as exc:  # e.g. a number with more digits than int() converts
        raise InvalidInputError(field, f"cannot be read as JSON ({exc})") from None


def moment(value: Any, field: str = "value") -> datetime | None:
    """An ISO 8601 date or time; no offset means UTC (``audit --since/--until``)."""
    return validation.moment(value, field)


def position_or_moment(value: Any, field: str = "value") -> int | datetime | None:
    """A global event position (digits) or an ISO 8601 time (``replay --until``)."""
    text = str(value).strip()
    if text.isdecimal():
        try:
            number = int(text)
        except ValueError:  # more digits than int() converts: beyond any position
            number = validation.MAX_SQL_INT + 1
        return validation.as_of(number, field)
    return validation.moment(text, field)


def choice(kind: type[E]) -> Callable[[Any], E]:
    """One of the values of the enum ``kind``."""
    names = ", ".join(member.value for member in kind)

    def parse(value: Any, field: str = "value") -> E:
        try:
            return kind(str(value))
        except ValueError:
            raise InvalidInputError(
                field, f"{validation.shown(str(value))} is not one of {names}"
            ) from None

    return parse


def flag(parse: Callable[[Any], T]) -> Callable[[Any], T]:
    """``parse`` as a Typer ``parser=``: its InvalidInputError becomes a usage error."""

    def parser(value: Any) -> T:
        try:
            return parse(value)
        except InvalidInputError as exc:
            raise typer.BadParameter(exc.problem) from None

    return parser


# Each command declares its options where Typer reads them, one ``Annotated[...]`` each:
# such declarations look alike (Typer's shape) but each is its own flag, so they stay
# where they are read, deliberately; an option several commands share is an alias here.
TableOrJsonFormat = Annotated[
    TableOrJson,
    typer.Option("--format", help="table or json.", parser=flag(choice(TableOrJson))),
]
"""The ``--format`` option of every command that prints a table for people or JSON."""


def show_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"{PROG} {__version__}\n")
        raise typer.Exit(0)


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
            parser=flag(seconds),
        ),
    ] = None,
    # Options alike others in shape only, deliberately declared where they are read.
    decisions: Annotated[
        str | None,
        typer.Option(
            "--decisions",
            metavar="MODULE:ATTR",
            help="fn(name, response) -> decision word or None, asked first for what each "
            "answer decided (else the built-in rules).",
            show_default=False,
        ),
    ] = None,
    show_traceback: Annotated[
        bool, typer.Option("--traceback", help="Show the full traceback of an error.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=show_version, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Run `symfonic-store COMMAND --help` for a command's options."""
    session = get_session(ctx)
    session.traceback = show_traceback
    session.db = db
    session.decisions = decisions
    if db:
        session.remember_password(db)
    if ttl is None:
        env = os.environ.get(TTL_ENV, "").strip()
        if env:
            ttl = seconds(env, TTL_ENV)
    session.ttl = ttl
