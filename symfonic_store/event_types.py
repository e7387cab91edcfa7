"""The event types, each declared once: its name and every rule that depends on it.

An :class:`EventType` says what the rest of the store needs to know about a type, and
the projection (:func:`~symfonic_store.projection.apply` and its SQL twin), the audit
columns, the audit's type lists, the metrics and the inbox's timeline read it from here
instead of naming types one by one:

- ``ending``: a terminal event (I3: at most one per interrupt; the database's one-ending
  index says which types, so a new ending also needs a migration);
- ``opens``: the mint -- a seed marker's becomes the pending marker, a LangGraph
  interrupt's opens it (SPEC §8);
- ``run_id``: the projected ``run_id`` is the latest non-null one of these types (I6);
- ``fold``: any other change the type makes to a thread's state (of the built-in types,
  ``interrupt.assigned``'s: the interrupt's ``assigned_to``; its SQL twin in
  ``db/statements/projection.py`` reads the latest assignment);
- ``audit``: the values of its audit columns (:mod:`symfonic_store.audit_columns`);
- ``label``, ``summary``, ``detail``: how the inbox's timeline shows it (``describe``
  overrides the summary line); the metrics count every registered type by its name.

The built-in types are declared below, in the order of ``EVENT_TYPES``. A type declared
elsewhere (an extension, a test) is added with :func:`register` or, for a while,
:func:`registered`; an unregistered type is still stored and replayed, with no rule.

Adding a built-in type: one ``_declare(EventType(...))`` below (its name constant, re-
exported by ``events.py`` and, when public, by ``symfonic_store/__init__.py``), the
store operation that appends it, and its strategy in ``tests/strategies.py`` (the
property test refuses to run without one). An ending or a mint also needs a migration of
the database's unique indexes; a ``fold`` rule, its twin in the SQL fold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from .decisions import builtin, reported
from .native import NATIVE_SOURCE

if TYPE_CHECKING:
    from .projection import EventLike, ThreadState

Data = dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventType:
    """One event type and its rules (see the module docstring)."""

    name: str
    label: str
    """A short word: the inbox's tone for it (a CSS class of the timeline)."""
    summary: str = ""
    """The timeline's line, ``str.format`` over the event's data (a missing key reads
    ``None``); empty: the type's name."""
    detail: tuple[str, ...] = ()
    """Keys of data shown under the line: the first that holds a true value, else the
    last one's value."""
    ending: bool = False
    opens: bool = False
    run_id: bool = False
    fold: Callable[[ThreadState, EventLike], None] | None = None
    audit: Callable[[Data, datetime], Data] | None = None
    """Its audit columns that hold a value, by column name; None: it has none."""
    audit_copy: str | None = None
    """The key of data an audit column copies as JSON (so the append encodes it once)."""
    describe: Callable[[Data], tuple[str, str]] | None = None
    """``(line, tone)`` for the timeline, when the summary and label cannot say it."""


_REGISTRY: dict[str, EventType] = {}
_BUILT_IN: list[str] = []


def register(spec: EventType) -> EventType:
    """Add an event type to the registry; returns it.

    Raises:
        ValueError: the name is taken; or the type is an ending or a mint (I3 and I4
            are kept by the database's unique indexes: such a type is declared in this
            module, with the migration that adds it to them), or has a ``fold`` rule
            (the SQL fold of a rebuild needs its twin: declared here, with it).
    """
    if spec.name in _REGISTRY:
        raise ValueError(f"event type {spec.name!r} is already registered")
    if spec.ending or spec.opens:
        raise ValueError(
            f"event type {spec.name!r}: endings and mints are kept by the database's "
            "unique indexes; declare one in symfonic_store/event_types.py with its migration"
        )
    if spec.fold is not None:
        raise ValueError(
            f"event type {spec.name!r}: a fold rule needs its twin in the SQL fold "
            "(projection_rows_query); declare it in symfonic_store/event_types.py with it"
        )
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a type :func:`register` added (a built-in type stays).

    Raises:
        ValueError: ``name`` is a built-in type.
        KeyError: ``name`` is not registered.
    """
    if name in _BUILT_IN:
        raise ValueError(f"event type {name!r} is built in")
    del _REGISTRY[name]


@contextmanager
def registered(spec: EventType) -> Iterator[EventType]:
    """``spec`` registered inside the ``with`` block, unregistered after it."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


def spec_of(name: str) -> EventType | None:
    """The registered type called ``name``, or None."""
    return _REGISTRY.get(name)


def all_types() -> tuple[EventType, ...]:
    """Every registered type: the built-in ones first, in declaration order."""
    return tuple(_REGISTRY.values())


def built_in_types() -> tuple[EventType, ...]:
    """The types this module declares, in declaration order (``EVENT_TYPES``)."""
    return tuple(_REGISTRY[name] for name in _BUILT_IN)


def ending_types() -> tuple[str, ...]:
    return tuple(t.name for t in _REGISTRY.values() if t.ending)


def opening_types() -> tuple[str, ...]:
    return tuple(t.name for t in _REGISTRY.values() if t.opens)


def run_id_types() -> tuple[str, ...]:
    return tuple(t.name for t in _REGISTRY.values() if t.run_id)


def audited_types() -> tuple[str, ...]:
    """The types with audit columns."""
    return tuple(t.name for t in _REGISTRY.values() if t.audit is not None)


def _declare(spec: EventType) -> str:
    _REGISTRY[spec.name] = spec
    _BUILT_IN.append(spec.name)
    return spec.name


# --- the built-in types' rules ----------------------------------------------------------


def marker_minted_at(data: Data, occurred_at: datetime) -> datetime:
    """The marker's ``minted_at`` (Unix seconds) as a UTC datetime, else ``occurred_at``."""
    # Deliberately the same as ``_minted_at`` of migration 0011, which filled the column
    # for older events: a frozen migration imports nothing from the package.
    minted_at = data.get("minted_at")
    if isinstance(minted_at, int | float) and not isinstance(minted_at, bool):
        try:
            return datetime.fromtimestamp(minted_at, UTC)
        except (OverflowError, OSError, ValueError):
            return occurred_at
    return occurred_at


def _minted_audit(data: Data, occurred_at: datetime) -> Data:
    return {
        "audit_name": data.get("name"),
        "audit_payload": data.get("payload"),
        "audit_minted_at": marker_minted_at(data, occurred_at),
        "audit_native": data.get("source") == NATIVE_SOURCE,
    }


def _resumed_audit(data: Data, occurred_at: datetime) -> Data:
    if "decisions" in data:
        found = data["decisions"]
        decisions: list[Any] | None = list(found) if isinstance(found, list) else None
    elif "decision" in data:
        decisions = [data["decision"]]
    else:
        decisions = None
    authenticated_by = data.get("authenticated_by")
    return {
        "audit_response": data.get("response"),
        "audit_decisions": decisions,
        "audit_authenticated_by": authenticated_by if isinstance(authenticated_by, str) else None,
    }


def _expired_audit(data: Data, occurred_at: datetime) -> Data:
    # An expiry that decided (Agent Inbox's thread-level ignore, SPEC §13) carries its
    # decision and how its actor was established, as an answer does (migration
    # ``0021_ignore_audit`` filled them in for the expiries appended before it).
    authenticated_by = data.get("authenticated_by")
    return {
        "audit_reason": data.get("reason"),
        "audit_decisions": [data["decision"]] if "decision" in data else None,
        "audit_authenticated_by": authenticated_by if isinstance(authenticated_by, str) else None,
    }


def _rejected_audit(data: Data, occurred_at: datetime) -> Data:
    return {"audit_reason": data.get("why"), "audit_error": data.get("error")}


def _resumed_line(data: Data) -> tuple[str, str]:
    # The decision words the answer recorded (SPEC §12); an older answer that recorded
    # none gets the built-in rules' reading of its response.
    response = data.get("response")
    found = data.get("decisions")
    words = [reported(w) for w in found] if isinstance(found, list) else [reported(data.get("decision"))]
    if not any(words):
        words = builtin(None, response)
    shown = [w or "-" for w in words] if any(words) else []
    what = f"answered: {', '.join(shown)}" if shown else "answered"
    tone = "rejected" if shown and all(w in ("reject", "ignore") for w in words) else "approved"
    return what, tone


def assignee_of(data: Data) -> str:
    """An ``interrupt.assigned`` event's assignee as the API shows it: the principal, or
    ``role:<name>`` (the projection's ``assigned_to``)."""
    return f"role:{data.get('to')}" if data.get("kind") == "role" else str(data.get("to"))


def assign(state: ThreadState, event: EventLike) -> None:
    """The fold of ``interrupt.assigned``: the interrupt's latest assignment stands (the
    pending marker's, or an open LangGraph interrupt's the state holds)."""
    shown = assignee_of(event.data)
    if state.pending is not None and state.pending_interrupt_id == event.interrupt_id:
        state.assigned_to = shown
    elif (row := state.open.get(str(event.interrupt_id))) is not None:
        row["assigned_to"] = shown


def _escalated_line(data: Data) -> str:
    to = data.get("to")
    roles = ", ".join(map(str, to)) if isinstance(to, list) else str(to)
    return f"escalated after {data.get('after')}s to {roles}"


# --- the built-in types -----------------------------------------------------------------

MINTED: Final = _declare(EventType(
    "interrupt.minted", label="asked", summary="asked", detail=("payload",),
    opens=True, run_id=True, audit=_minted_audit, audit_copy="payload",
))
ROUTE_DECIDED: Final = _declare(EventType(
    "route.decided", label="route", summary="route: {route}", run_id=True,
))
RESUMED: Final = _declare(EventType(
    "interrupt.resumed", label="approved", summary="answered", detail=("response",),
    ending=True, audit=_resumed_audit, audit_copy="response", describe=_resumed_line,
))
EXPIRED: Final = _declare(EventType(
    "interrupt.expired", label="expired",
    summary="expired ({reason}, detected by {detected_by})", ending=True, audit=_expired_audit,
))
RESUME_REJECTED: Final = _declare(EventType(
    "interrupt.resume_rejected", label="refused", summary="refused ({why})",
    detail=("error", "response"), audit=_rejected_audit,
))
REMINDED: Final = _declare(EventType(
    "interrupt.reminded", label="reminded", summary="reminded after {after}s",
))
"""The sweep's reminder of an interrupt still open ``after`` seconds (the policy's
``remind_after``, SPEC §14): once per interrupt (``uq_symfonic_events_one_reminder``), not
an ending."""
ESCALATED: Final = _declare(EventType(
    "interrupt.escalated", label="escalated", summary="escalated",
    describe=lambda data: (_escalated_line(data), "escalated"),
))
"""The sweep's escalation of an interrupt still open ``after`` seconds to the roles ``to``
(the policy's ``escalate_after`` and ``escalate_to``, SPEC §14), who may then answer it
too: once per interrupt (``uq_symfonic_events_one_escalation``), not an ending."""
ASSIGNED: Final = _declare(EventType(
    "interrupt.assigned", label="assigned", summary="assigned to {to} ({kind})",
    fold=assign,
))
"""An interrupt handed to a principal or a role (SPEC §15; data: ``to``, ``kind``:
``principal`` or ``role``): from then on only that principal, or a holder of that role,
may answer it. Not an ending; the latest one stands."""
VOTED: Final = _declare(EventType(
    "interrupt.voted", label="voted", summary="voted: {decision}", detail=("response",),
))
"""One principal's vote on an interrupt whose policy entry asks a ``quorum`` (SPEC §15;
data: ``decision``, ``response``): once per principal
(``uq_symfonic_events_one_vote``), not an ending."""
