"""Every private name of LangGraph and SQLAlchemy that the store relies on, in one place.

The store uses a few names that its dependencies do not promise to keep (LangGraph's
``langgraph._internal`` constants, runnable and per-task scratchpad; SQLAlchemy's event
dispatch, compiled-statement internals, error wrapping, greenlet await and clause
adapter). Each is imported or reached here and nowhere else, so an upgrade that moves
one breaks this module -- and its canary test, ``tests/core/test_compat.py`` -- instead
of a call deep in the store.

Importing this module imports LangGraph only for the LangGraph section's names, on first
use (``import symfonic_store`` and the CLI start without LangGraph): the LangGraph names
are module attributes resolved lazily by :func:`__getattr__`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    from langgraph._internal._runnable import RunnableCallable as RunnableCallable
    from sqlalchemy.sql.compiler import SQLCompiler
    from sqlalchemy.sql.elements import BindParameter

# --- LangGraph -----------------------------------------------------------------------

# The values LangGraph 1.x gives its private constants: used only when a release moved
# them (the canary test then fails, loudly; the store keeps working on these values).
_LANGGRAPH_CONSTANTS: dict[str, str] = {
    "CONFIG_KEY_SCRATCHPAD": "__pregel_scratchpad",  # a task's scratchpad (its answers)
    "CONFIG_KEY_CHECKPOINTER": "__pregel_checkpointer",  # a task's checkpointer
    "CONFIG_KEY_TASK_ID": "__pregel_task_id",  # a task's id
    "CONFIG_KEY_CHECKPOINT_MAP": "checkpoint_map",  # namespace -> the step's checkpoint
    "RESUME": "__resume__",  # the channel of a task's answers
    "INTERRUPT": "__interrupt__",  # the channel of a task's interrupts
    "ERROR": "__error__",  # the channel of a task's error
    "NS_SEP": "|",  # between a checkpoint namespace's levels
}

def _langgraph_constant(name: str) -> str:
    try:
        from langgraph._internal import _constants
    except ImportError:  # pragma: no cover - a LangGraph that moved them
        return _LANGGRAPH_CONSTANTS[name]
    value = getattr(_constants, name, None)
    return value if isinstance(value, str) else _LANGGRAPH_CONSTANTS[name]


def __getattr__(name: str) -> Any:
    """The LangGraph names, imported on first use."""
    if name in _LANGGRAPH_CONSTANTS:
        value: Any = _langgraph_constant(name)
    elif name == "RunnableCallable":
        # LangGraph's own runnable for node and path functions (no callback run of its own).
        from langgraph._internal._runnable import RunnableCallable

        value = RunnableCallable
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # found once: later reads do not come here
    return value


if TYPE_CHECKING:
    CONFIG_KEY_SCRATCHPAD: str
    CONFIG_KEY_CHECKPOINTER: str
    CONFIG_KEY_TASK_ID: str
    CONFIG_KEY_CHECKPOINT_MAP: str
    RESUME: str
    INTERRUPT: str
    ERROR: str
    NS_SEP: str

NOT_VISIBLE: Any = object()
"""What :func:`task_resume` returns when the task's scratchpad cannot be read."""


def task_resume(configurable: Mapping[str, Any]) -> Any:
    """The answer ``interrupt()`` is about to return in the running task, read where
    ``interrupt()`` reads it: the task's scratchpad (its saved or mapped answers first,
    then the run's ``Command(resume=...)``). ``None`` when there is none;
    :data:`NOT_VISIBLE` when the scratchpad is not there or not as relied on."""
    scratchpad = configurable.get(_langgraph_constant("CONFIG_KEY_SCRATCHPAD"))
    if scratchpad is None:
        return NOT_VISIBLE
    try:
        saved = scratchpad.resume
        if saved:
            return saved[0]
        return scratchpad.get_null_resume(False)
    except (AttributeError, TypeError):
        return NOT_VISIBLE


def agent_server_request_user() -> Any:
    """The user LangGraph's Agent Server authenticated for the request being served, or
    None: langgraph-api's per-request auth context (``langgraph_api.utils.get_auth_ctx``),
    which it sets around every API request, a state update's included. Read only where
    the server already loaded it (never imported here)."""
    import sys

    get = getattr(sys.modules.get("langgraph_api.utils"), "get_auth_ctx", None)
    if not callable(get):
        return None
    try:
        return getattr(get(), "user", None)
    except Exception:  # pragma: no cover - a langgraph-api that changed it
        return None


# --- SQLAlchemy ----------------------------------------------------------------------


def fire_commit(conn: Connection) -> None:
    """Fire ``conn``'s ``commit`` event listeners, for a COMMIT the store sends on the
    driver itself (SQLAlchemy's ``Connection.dispatch``, undocumented); none listening
    (the usual case), nothing to call."""
    listeners = conn.dispatch.commit
    if listeners:
        listeners(conn)


def fire_rollback(conn: Connection) -> None:
    """Fire ``conn``'s ``rollback`` event listeners, for a ROLLBACK sent on the driver."""
    listeners = conn.dispatch.rollback
    if listeners:
        listeners(conn)


def invalidate_lost(conn: Connection, exc: BaseException) -> None:
    """After ``exc`` said ``conn``'s server is gone, invalidate ``conn`` and mark every
    connection its pool opened so far as outdated, as ``Connection.execute`` does on a
    disconnect (``Pool._invalidate``, private): they reached the same server (lost to a
    failover or a restart), so the pool opens new ones at their next checkout instead of
    handing them out to fail in turn, and no checkout pings."""
    if conn.invalidated:
        return
    conn.engine.pool._invalidate(conn.connection, exc)  # as SQLAlchemy's own handler
    conn.invalidate(exc)


def outdated(conn: Connection) -> bool:
    """Was ``conn`` (held open between calls, so never checked out again) opened before its
    pool was last invalidated by :func:`invalidate_lost` (its server then was lost)?"""
    record = getattr(conn.connection, "_connection_record", None)
    started = getattr(record, "starttime", None)
    return started is not None and conn.engine.pool._invalidate_time > started


def has_cursor_listeners(engine: Engine) -> bool:
    """Does anything listen to ``engine``'s ``before_cursor_execute`` or
    ``after_cursor_execute`` (a statement sent on the driver would bypass it)?"""
    dispatch = engine.dispatch
    return bool(dispatch.before_cursor_execute) or bool(dispatch.after_cursor_execute)


def compiled_binds(compiled: SQLCompiler) -> tuple[bool, list[tuple[str, str, BindParameter[Any]]]]:
    """A compiled statement's parameters, as its driver takes them.

    ``(named, [(name, placeholder, bind), ...])``: ``named`` when the driver takes a dict
    by placeholder name, else a tuple in the list's order (``positiontup``); the
    placeholder is the name as escaped in the SQL (``escaped_bind_names``).
    """
    named = compiled.positiontup is None
    names = list(compiled.binds) if named else list(compiled.positiontup or ())
    escaped: Mapping[str, str] = compiled.escaped_bind_names or {}
    return named, [(name, escaped.get(name, name), compiled.binds[name]) for name in names]


def dbapi_error(
    statement: str | None,
    params: Any,
    orig: Exception,
    error_class: type[Exception],
    *,
    dialect: sa.engine.Dialect | None = None,
    connection_invalidated: bool = False,
) -> sa.exc.StatementError:
    """A driver's exception wrapped as SQLAlchemy wraps it (``DBAPIError.instance``): its
    PEP 249 class kept, e.g. ``OperationalError`` (a ``StatementError`` when ``orig`` is
    not the driver's)."""
    return sa.exc.DBAPIError.instance(
        statement,
        params,
        orig,
        error_class,
        dialect=dialect,
        connection_invalidated=connection_invalidated,
    )


def await_in_greenlet(awaitable: Awaitable[Any]) -> Any:
    """Await from the synchronous code ``AsyncConnection.run_sync`` runs (its greenlet):
    ``sqlalchemy.util.concurrency.await_`` (``await_only`` before SQLAlchemy 2.1)."""
    from sqlalchemy.util import concurrency

    wait = getattr(concurrency, "await_", None) or concurrency.await_only
    return wait(awaitable)


def clause_adapter(selectable: sa.FromClause) -> Any:
    """SQLAlchemy's ``ClauseAdapter`` for ``selectable`` (``sqlalchemy.sql.util``, not
    public): ``.traverse(clause)`` rewrites ``clause``'s columns onto ``selectable``."""
    from sqlalchemy.sql.util import ClauseAdapter

    return ClauseAdapter(selectable)
