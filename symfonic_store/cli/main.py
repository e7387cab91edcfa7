"""The entry point: run the app, map errors to exit codes and one line on stderr."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Sequence

import typer

from ..errors import (
    ConcurrencyConflictError,
    EvidenceError,
    InterruptStateError,
    ProjectionMismatchError,
    SymfonicStoreError,
)
from . import commands  # noqa: F401 - registers the commands on the app
from .app import PROG, ClickError, Problem, Session, app, click_errors
from .help import readable_help


def _exit_code(exc: BaseException) -> int:
    if isinstance(
        exc,
        Problem
        | InterruptStateError
        | ConcurrencyConflictError
        | ProjectionMismatchError
        | EvidenceError,
    ):
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


def _flag_name(param: object) -> str:
    """``--format`` for an option, ``THREAD`` for an argument."""
    opts = [o for o in getattr(param, "opts", ()) if isinstance(o, str)]
    if getattr(param, "param_type_name", "") == "option" and opts:
        return max(opts, key=len)
    return str(getattr(param, "metavar", None) or getattr(param, "human_readable_name", "value"))


def _usage_message(exc: Exception) -> str:
    """Click's usage errors in the store's words: ``invalid --format: ...``."""
    param = getattr(exc, "param", None)
    if isinstance(exc, click_errors.MissingParameter) and param is not None:
        return f"missing {_flag_name(param)}"
    if isinstance(exc, click_errors.BadParameter) and param is not None:
        return f"invalid {_flag_name(param)}: {exc.message}"
    if isinstance(exc, click_errors.NoSuchOption):
        hint = ""
        if exc.possibilities:
            hint = f" (did you mean {' or '.join(sorted(exc.possibilities))}?)"
        return f"unknown option {exc.option_name}{hint}"
    # The rest (an unknown command, an extra argument, a flag without its value) keep
    # Click's words in the one-line shape: lower case, no full stop.
    format_message = getattr(exc, "format_message", None)
    text = str(format_message() if callable(format_message) else exc).strip().rstrip(".")
    return text[:1].lower() + text[1:]


class StderrLog(logging.Handler):
    """The package's warnings on the command line: written to ``sys.stderr`` as it is when
    they happen (a test's capture too), the message alone. The library itself prints
    nothing (its loggers end in a ``NullHandler``); the command line is an application and
    says what the server, the sweep and the notifier warn of, as logging's last resort
    would."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # pragma: no cover - as logging.StreamHandler does
            self.handleError(record)


def log_to_stderr() -> None:
    """Give the package's logger a :class:`StderrLog` (once per process)."""
    logger = logging.getLogger("symfonic_store")
    if not any(isinstance(h, StderrLog) for h in logger.handlers):
        logger.addHandler(StderrLog())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    log_to_stderr()
    session = Session()
    command = typer.main.get_command(app)
    readable_help(command)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = command.main(args=args, prog_name=PROG, standalone_mode=False, obj=session)
        return result if isinstance(result, int) else 0
    except ClickError as exc:
        usage_ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":
            # Building the error printed the help already (rich) or carries it (plain).
            if str(exc).strip():
                sys.stderr.write(str(exc).rstrip() + "\n")
            return 2
        if usage_ctx is not None:
            sys.stderr.write(usage_ctx.get_usage() + "\n")
        _fail(session, exc, _usage_message(exc))
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
