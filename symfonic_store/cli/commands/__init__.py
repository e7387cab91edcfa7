"""The commands, one module per group; importing them registers them on the app."""

from . import db, demo, history, inbox, serve, sweep

__all__ = ["db", "demo", "history", "inbox", "serve", "sweep"]
