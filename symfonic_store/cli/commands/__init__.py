"""The commands, one module per group; importing them registers them on the app."""

from . import db, demo, evidence, history, inbox, notify, serve, settle, sweep, wakeups

__all__ = ["db", "demo", "evidence", "history", "inbox", "notify", "serve", "settle", "sweep", "wakeups"]
