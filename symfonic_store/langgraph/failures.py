"""What a gateway answer tells when the database fails while its graph runs (SPEC §12)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..db.translate import as_dbapi_error, scrubbed_cause, translated
from ..errors import DatabaseError

READS = frozenset({"get_state", "saved_answers"})
"""The gateway's graph steps that write nothing."""


def store_error(exc: Exception, *, step: str | None) -> Exception:
    """``exc``, or the store's error for it when it is a driver's or SQLAlchemy's: what a
    LangGraph saver the caller gave the graph (on its own connection) raised, classified
    by code like the store's own (the driver's error stays the ``__cause__``). Such a
    saver commits on its own, so only a read (``step`` in :data:`READS`) is known to
    have written nothing."""
    error = translated(exc, may_have_committed=step not in READS)
    if error is None:
        return exc
    error.__cause__ = scrubbed_cause(as_dbapi_error(exc) or exc)
    error.__suppress_context__ = True
    return error


@contextlib.contextmanager
def store_errors(step: str) -> Iterator[None]:
    """Raise :func:`store_error` of what the graph's ``step`` raises (a stream's chunks)."""
    try:
        yield
    except Exception as exc:
        error = store_error(exc, step=step)
        if error is exc:
            raise
        raise error from error.__cause__


def failed_while_running(
    thread_id: str, interrupt_id: str, exc: DatabaseError, *, resumed: bool = False
) -> DatabaseError:
    """The database failed while the graph ran an admitted answer: the claim (or, for the
    seed marker's interrupt, the resume) is committed and the node may have acted, so the
    answer's outcome is unknown, whatever the failing statement's own transaction did. A
    claim is kept (releasing it would let a second answer run the node again)."""
    step = (
        "whether the graph's step was saved is unknown"
        if exc.outcome_unknown
        else "the graph's step was not saved"
    )
    admitted = "the answer is recorded (resumed)" if resumed else "the answer's claim is committed"
    after = (
        "A second answer is refused as already answered"
        if resumed
        else "The interrupt stays claimed"
    )
    return DatabaseError(
        f"the database failed while the graph ran the answer to interrupt {interrupt_id!r} on "
        f"thread {thread_id!r}: {admitted} and the graph may already have acted on it; "
        f"{step}, so the answer's outcome is unknown. {after}: check the thread "
        f"(`symfonic-store replay {thread_id}`) before acting on it again",
        outcome_unknown=True,
    )
