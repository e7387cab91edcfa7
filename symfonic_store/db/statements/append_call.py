"""The append in one call: one thread's new events, its projection row and its open
LangGraph interrupts written by the schema's function ``symfonic_append`` (PostgreSQL:
:attr:`~symfonic_store.db.backends.base.Backend.appends_in_one_call`), in autocommit.

The function takes the writers' lock first (so its transaction has no id yet, I11),
answers "already minted?" for a mint, swaps the thread's head (its row must still hold
the version and hash the caller folded onto, or, for a new thread, not exist yet), then
inserts. The rows travel as JSON whose keys are the tables' columns; the events' data
and the pending marker as the canonical text the store encoded (and hashed) once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import NewEvent
from ...projection import ThreadState
from ..executor import executor_for
from ..executors.base import JsonText
from ..pg_append import APPEND_FUNCTION
from ..rows import thread_row
from .log import event_rows

APPLIED = 1
"""What the function returns when it wrote; 0: the head moved (or the new thread
exists), 2: the interrupt of ``probe`` was minted already. Neither writes anything."""


def _json(name: str) -> sa.Cast[Any]:
    return sa.cast(sa.bindparam(name, type_=sa.Text()), sa.JSON())


_CALL = sa.select(
    getattr(sa.func, APPEND_FUNCTION)(
        sa.bindparam("t", type_=sa.Text()),
        sa.bindparam("v", type_=sa.Integer()),
        sa.bindparam("h", type_=sa.Text()),
        sa.bindparam("probe", type_=sa.Text()),
        _json("row"),
        _json("events"),
        _json("opened"),
        _json("closed"),
        type_=sa.Integer(),
    )
)
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _value(value: Any) -> str:
    if type(value) is JsonText:
        return str(value)  # already the canonical text
    if isinstance(value, datetime):
        return '"' + value.isoformat() + '"'
    return _encode(value)


def _object(row: Mapping[str, Any]) -> str:
    return "{" + ",".join(_encode(k) + ":" + _value(v) for k, v in row.items()) + "}"


def _array(rows: Sequence[Mapping[str, Any]]) -> str:
    return "[" + ",".join(_object(r) for r in rows) + "]"


# The arguments of the function, one each: deliberately many.
def append_in_one_call(
    conn: Connection,
    state: ThreadState,
    head: tuple[int, str] | None,
    new_events: Sequence[NewEvent],
    *,
    pending_json: str | None,
    opened: Sequence[Mapping[str, Any]],
    closed: Sequence[str],
    probe: str | None,
    phase: Any,
) -> int:
    """Call ``symfonic_append`` (``phase``: see :meth:`Executor.call_once
    <symfonic_store.db.executors.base.Executor.call_once>`); what it returns."""
    params = {
        "t": state.thread_id,
        "v": 0 if head is None else head[0],
        "h": None if head is None else head[1],
        "probe": probe,
        "row": _object(thread_row(state, pending_json)),
        "events": _array(event_rows(new_events, True)),
        "opened": _array(opened),
        "closed": _encode(list(closed)),
    }
    return int(executor_for(conn).call_once(conn, _CALL, params, phase))
