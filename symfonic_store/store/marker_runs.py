"""Who runs a seed marker's graph after an answer: a claim, decided by the database.

The approval service answers a seed marker with ``store.resume`` and then, when one of
its ``--graph`` graphs waits on that marker, runs it with the returned command (SPEC §9,
amended in wave 4). Two answers may both get that command -- the same principal sending
the same answer twice (a double click, a retry) is admitted twice, idempotently -- and
two runs of the graph would both run the step after the marker. So, as for LangGraph's
own interrupts (:mod:`.admission`), the run is *claimed* first: a row in the claims
table whose primary key lets one answer hold the marker at a time; a concurrent answer
is refused (``in_progress``, recorded, naming the claimant), and the claim is dropped
once the graph returned.

A marker's claim is told apart from a LangGraph interrupt's by its ``decided`` value
(:data:`~.settlement.MARKER_RUN`): the sweep settles the latter from checkpoints
(:mod:`.settlement`) and leaves a marker's alone. A marker's claim whose process died
is taken over once its lease ran out, by the next answer: running the graph again is
then safe, because the caller runs it only while the checkpoint still waits on the
marker -- the steps after it run only once the marker's own step committed.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.engine import Connection

from ..db.statements.log import was_minted
from ..db.statements.native import claim_row, delete_claim, insert_claim
from ..errors import InterruptInProgressError, UnknownInterruptError
from .append import Refusal, ThreadWriter
from .lifecycle import Answer
from .settlement import MARKER_RUN, is_marker_run


def claim_run(
    conn: Connection,
    thread_id: str,
    interrupt_id: str,
    response: Any,
    actor: str,
    lease_seconds: float,
    authenticated_by: str | None = None,
) -> bool | Refusal:
    """Claim the run of the marker's graph for ``actor``'s answer; True when claimed.

    A claim held by another answer is a refusal (recorded, ``in_progress``), unless its
    lease ran out: then it is taken over (its process is gone)."""
    w = ThreadWriter(conn, thread_id)  # the thread's lock: claims are read under it
    answer = Answer(w, interrupt_id, response, actor, data={"via": "service"})
    if not w.existed or not was_minted(conn, thread_id, interrupt_id):
        raise answer.error(UnknownInterruptError, f"{answer.where} is unknown: nothing was minted with that id")
    held = claim_row(conn, thread_id, interrupt_id)
    now = time.time()
    if held is not None:
        if not is_marker_run(held) or held["claimed_at"] >= now - lease_seconds:
            claimant, claimed_at = held["actor"], held["claimed_at"]
            return answer.refuse("in_progress", answer.error(
                InterruptInProgressError,
                f"{answer.where} is being answered by {claimant!r} (its graph is running the "
                "answer); this answer was not applied and has been recorded as rejected",
                claimant=claimant, claimed_at=claimed_at,
            ), claimant=claimant)
        delete_claim(conn, thread_id, interrupt_id)  # lapsed: its process is gone
    insert_claim(conn, {
        "thread_id": thread_id,
        "interrupt_id": interrupt_id,
        "actor": actor,
        "response": response,
        "claimed_at": now,
        "authenticated_by": authenticated_by,
        "decided": MARKER_RUN,
    })
    return True


def end_run(conn: Connection, thread_id: str, interrupt_id: str) -> bool:
    """Drop the marker's claim once its graph returned; False when none is held."""
    held = claim_row(conn, thread_id, interrupt_id)
    if held is None or not is_marker_run(held):
        return False
    delete_claim(conn, thread_id, interrupt_id)
    return True
