"""The ``symfonic-store`` command line: parse, call the store, render.

``app`` holds the global options and the error vocabulary, ``render`` the output,
``commands/`` one module per group of commands, ``main`` the entry point.
"""

from .main import main

__all__ = ["main"]
