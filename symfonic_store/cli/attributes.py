"""``MODULE:ATTR`` options: an object named by the command line, imported from the
current folder (the global ``--decisions``)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from ..errors import InvalidInputError


def import_attribute(spec: str, option: str) -> Any:
    """``module:attribute`` (dotted attributes allowed), importable from the current folder.

    Raises:
        InvalidInputError: the spec is malformed, the module does not import, or it lacks
            the attribute (the message names ``option``).
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInputError(option, f"must be MODULE:ATTR, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInputError(option, f"cannot import {module_name!r}: {exc}") from None
    except Exception as exc:
        raise InvalidInputError(
            option, f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise InvalidInputError(
                option, f"module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return target


def decision_rule(spec: str) -> Any:
    """The callable ``--decisions MODULE:ATTR`` names (``fn(name, response) -> str | None``)."""
    target = import_attribute(spec, "--decisions")
    if not callable(target):
        raise InvalidInputError(
            "--decisions", f"{spec!r} is a {type(target).__name__}, not a callable(name, response)"
        )
    return target
