"""What a gateway answer tells when the database fails while its graph runs (SPEC §12)."""

from __future__ import annotations

from ..errors import DatabaseError


def failed_while_running(thread_id: str, interrupt_id: str, exc: DatabaseError) -> DatabaseError:
    """The database failed while the graph ran an admitted answer: the claim is committed
    and the node may have acted, so the answer's outcome is unknown, whatever the failing
    statement's own transaction did. The claim is kept (releasing it would let a second
    answer run the node again)."""
    step = (
        "whether the graph's step was saved is unknown (the connection failed while committing)"
        if exc.outcome_unknown
        else "the graph's step was not saved"
    )
    return DatabaseError(
        f"the database failed while the graph ran the answer to interrupt {interrupt_id!r} on "
        f"thread {thread_id!r}: the answer's claim is committed and the graph may already have "
        f"acted on it; {step}, so the answer's outcome is unknown. The interrupt stays claimed: "
        f"check the thread (`symfonic-store replay {thread_id}`) before answering again",
        outcome_unknown=True,
    )
