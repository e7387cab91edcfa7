"""Help that reads like a command line's own: a flag shows no type, an argument its name.

Typer's rich help (with its own copy of Click) prints a type after every option, a flag
included (``--dry-run <bool>``, ``--help <bool>``), and wraps a required argument in
braces in the usage line (``replay [OPTIONS] {THREAD}``). :func:`readable_help` gives the
built command tree classes that leave the type off a flag and name an argument the usual
way (``THREAD``; ``[THREAD]`` when optional). Parsing is untouched: only help changes.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


class _Option(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None  # a flag takes no value
        return super().display_type_rich(ctx)


class _Argument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        if self.metavar is not None:
            return None  # the name says what it is (THREAD, MODULE:ATTR)
        return super().display_type_rich(ctx)

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.metavar or (self.name or "").upper()
        if not self.required:
            name = f"[{name}]"
        return [name + ("..." if self.nargs != 1 else "")]


def _tidy(param: object) -> None:
    # Exact types only: a parameter class of someone else's keeps its own rendering.
    if type(param) is TyperOption:
        param.__class__ = _Option
    elif type(param) is TyperArgument:
        param.__class__ = _Argument
        if param.metavar is None and param.name:  # `revision` in the panel, REVISION in usage
            param.metavar = param.name.upper()


class _Command(TyperCommand):
    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _tidy(option)
        return option


class _Group(TyperGroup):
    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _tidy(option)
        return option


def readable_help(command: object) -> None:
    """Give ``command`` (``typer.main.get_command(app)``) and its subcommands readable help."""
    if type(command) is TyperGroup:
        command.__class__ = _Group
    elif type(command) is TyperCommand:
        command.__class__ = _Command
    for param in getattr(command, "params", ()):
        _tidy(param)
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)
