"""What a plan is: the steps a store operation yields, and what its runners share.

A plan is a generator function with the signature and docstring of a store method
(:mod:`.ops`): it validates its arguments, then yields its steps and returns the
method's result. A step is one of

- :class:`Op`: a function of a synchronous ``Connection`` (run in a transaction);
- :class:`Call`: a user callback (``on_expired``), run outside any transaction;
- :class:`Emit`: items handed to the caller of a streaming method (``iter_events``).

The runner (:mod:`.runner`) drives plans: the sync store runs each ``Op`` on a pooled
connection, the async store through ``AsyncConnection.run_sync`` (and awaits callbacks
that return awaitables). A step that raises is thrown back into its plan, so a plan can
keep what it already did (the sweep reports the batches it committed).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.engine import Connection

T = TypeVar("T")

OnExpired = Callable[[str, str, str], Any]
"""``on_expired(thread_id, interrupt_id, reason)``; the async store awaits an awaitable."""


@dataclass(frozen=True, slots=True)
class Op(Generic[T]):
    """One database step: a function of a ``Connection``, and whether it writes."""

    fn: Callable[[Connection], T]
    write: bool
    settled: Callable[[Connection], tuple[bool, T]] | None = None
    """A read-only check run first (no write lock): ``(True, result)`` proves the write
    would record nothing and answers the call; ``(False, _)`` falls back to ``fn``,
    which decides again under the write lock."""
    appends: bool = True
    """May the write insert events? False for checkpoints and archive removals: on
    PostgreSQL their transactions do not join the writers (they wait for them instead,
    :func:`~symfonic_store.db.statements.final_max_position`)."""
    thread: str | None = None
    """The one thread this write appends to, when it is a store method's own transaction:
    the runner may then try the single-append path first (:mod:`.single`)."""
    creates: bool = False
    """May the write make the thread (a mint, a route decision)? Then the single-append
    path takes a thread its cache does not hold for a new one; otherwise such a thread
    goes straight to the transactional path."""


@dataclass(frozen=True, slots=True)
class Call:
    """A user callback, called by the runner outside any transaction."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Emit:
    """Items a streaming plan hands to its caller."""

    items: Iterable[Any]


Step = Op[Any] | Call | Emit
Plan = Generator[Step, Any, T]


# --- what the runners share -----------------------------------------------------------


def start(plan: Plan[None]) -> tuple[Plan[None], Step | None]:
    """Run a streaming plan to its first step now, so bad arguments fail at the call."""
    return plan, advance(plan, None, None)


def advance(plan: Plan[Any], result: Any, error: BaseException | None) -> Step | None:
    """Send a step's result (or throw its error) into a streaming plan: its next step."""
    try:
        return plan.send(result) if error is None else plan.throw(error)
    except StopIteration:
        return None



def copy_face(method: Callable[..., Any], plan: Callable[..., Any], returns: str | None = None) -> None:
    """Give a runner's method the plan's name, docstring and signature (``self`` = the store).

    The return annotation is what the method returns: ``T`` of the plan's ``Plan[T]``,
    or ``returns`` when given (the iterators of streaming plans).
    """
    functools.update_wrapper(
        method, plan, assigned=("__name__", "__qualname__", "__doc__"), updated=()
    )
    signature = inspect.signature(plan)
    annotation = signature.return_annotation
    if returns is not None:
        annotation = returns
    elif isinstance(annotation, str) and annotation.startswith("Plan[") and annotation.endswith("]"):
        annotation = annotation[len("Plan[") : -1]
    method.__signature__ = signature.replace(return_annotation=annotation)  # type: ignore[attr-defined]
