"""``--help`` reads like a command line's: flags without a type, arguments by name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from cli_helpers import run_cli

from symfonic_store.cli.app import app
from symfonic_store.cli.main import main as _main  # noqa: F401 - registers the commands

COLUMNS = {"COLUMNS": "120"}


def command_paths(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            yield from command_paths(sub, (*path, name))


ALL = list(command_paths(typer.main.get_command(app)))


def test_the_tree_of_commands_is_walked() -> None:
    """The walk below reaches the commands it is meant to check."""
    assert {(), ("sweep",), ("replay",), ("db", "downgrade"), ("audit",)} <= set(ALL)


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "(top)")
def test_no_help_shows_a_type_after_a_flag_or_braces_around_an_argument(path: tuple[str, ...]) -> None:
    """Every command's help: no ``<bool>``, no ``{ARG}`` in the usage line."""
    shown = run_cli(*path, "--help", env=COLUMNS)
    assert shown.returncode == 0, shown.stderr
    assert "<bool>" not in shown.stdout
    usage = next(line for line in shown.stdout.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert "--help" in shown.stdout


@pytest.mark.parametrize(
    ("path", "usage", "rows"),
    [
        (("sweep",), "Usage: symfonic-store sweep [OPTIONS]", ["--dry-run", "--batch-size "]),
        (("replay",), "Usage: symfonic-store replay [OPTIONS] THREAD", ["THREAD", "--until"]),
        ((), "Usage: symfonic-store [OPTIONS] COMMAND [ARGS]...", ["--traceback", "--version"]),
    ],
)
def test_help_names_flags_and_arguments_plainly(
    path: tuple[str, ...], usage: str, rows: list[str]
) -> None:
    """A flag's row is its name and help; an argument is named in the usage line as declared."""
    shown = run_cli(*path, "--help", env=COLUMNS)
    assert usage in shown.stdout
    for row in rows:
        line = next(line for line in shown.stdout.splitlines() if row in line)
        assert "<" not in line.split("  ")[0]
    dry_run = [line for line in shown.stdout.splitlines() if "--dry-run" in line]
    for line in dry_run:  # the flag is followed by its help, nothing in between
        assert line.split("--dry-run", 1)[1].split()[0] == "List"


def test_flags_still_parse_after_the_help_change() -> None:
    """Only the help changed: a flag and an argument still parse."""
    shown = run_cli("replay", "--help", "extra", env=COLUMNS)
    assert shown.returncode == 0
    bad = run_cli("replay", env=COLUMNS)
    assert bad.returncode == 2 and "missing THREAD" in bad.stderr


@pytest.mark.parametrize(("path", "name"), [(("db", "upgrade"), "REVISION"), (("replay",), "THREAD")])
def test_an_argument_is_named_the_same_in_usage_and_in_its_panel(path: tuple[str, ...], name: str) -> None:
    """An argument reads as its upper-case name in both places, with no `<str>` after it."""
    shown = run_cli(*path, "--help", env=COLUMNS).stdout
    usage = next(line for line in shown.splitlines() if "Usage:" in line)
    assert name in usage.split()[-1]
    row = next(line for line in shown.splitlines() if f" {name} " in line and "Usage:" not in line)
    assert "<str>" not in row and name.lower() not in row.split()
