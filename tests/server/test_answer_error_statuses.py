"""The HTTP status and body an answer gets for each store error, on both of its writes."""

from __future__ import annotations

from typing import Any

import pytest

from symfonic_store.errors import (
    ConstraintViolationError,
    DatabaseError,
    DatabaseUnreachableError,
    InterruptAlreadyResolvedError,
    InvalidInputError,
    PayloadTooLargeError,
    ProjectionMismatchError,
    SymfonicStoreError,
    UnknownInterruptError,
)
from symfonic_store.server.approvals import Approvals, interrupt_digest
from symfonic_store.server.policy import Policy
from symfonic_store.server.principal import Principal

THREAD, IID = "t-1", "i-1"
ALICE = Principal("alice", frozenset({"clerk"}))


class FailingStore:
    """A store whose one seed-marker interrupt exists, and whose writes raise ``error``."""

    def __init__(self, error: SymfonicStoreError) -> None:
        self.error = error

    def interrupt_record(self, thread_id: str, interrupt_id: str) -> dict[str, Any]:
        return {"name": "refund", "payload": {"amount": 1}, "actor": "bob"}

    def record_refusal(self, *args: Any, **kwargs: Any) -> None:
        raise self.error

    def resume(self, *args: Any, **kwargs: Any) -> None:
        raise self.error

    def history(self, thread_id: str, interrupt_id: str | None = None) -> list[Any]:
        return []

    def assignment(self, thread_id: str, interrupt_id: str) -> None:
        return None  # not assigned (SPEC §15)

    def admit_assignee(self, *args: Any, **kwargs: Any) -> None:
        return None  # not assigned (SPEC §15): admitted, nothing written

    def interrupt_tenants(self, keys: Any) -> dict[tuple[str, str], str | None]:
        return {(t, i): None for t, i in keys}  # minted without a tenant (SPEC §15)


def answer(error: SymfonicStoreError, *, refused: bool) -> tuple[int, dict[str, Any]]:
    """Answer through Approvals; ``refused``: the policy refuses, so the write is the refusal's."""
    policy = Policy.from_dict({"refund": {"roles": ["finance"]}}) if refused else None
    approvals = Approvals(FailingStore(error), policy=policy)  # type: ignore[arg-type]
    digest = interrupt_digest(THREAD, IID, {"amount": 1})
    result = approvals.answer(ALICE, THREAD, IID, {"approved": True}, digest)
    return result.status, result.body


WRITE_ERRORS = [
    (PayloadTooLargeError("response", "too large"), 413),
    (InvalidInputError("response", "bad"), 400),
    (UnknownInterruptError("unknown", thread_id=THREAD, interrupt_id=IID), 404),
    (ConstraintViolationError("a trigger refused it", code="P0001"), 500),
    (ProjectionMismatchError("a gap", thread_ids=[THREAD]), 500),
    (SymfonicStoreError("other"), 500),
]


@pytest.mark.parametrize("refused", [True, False], ids=["refusal", "answer"])
@pytest.mark.parametrize(("error", "status"), WRITE_ERRORS, ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v))
def test_a_write_error_has_the_same_status_on_both_writes(error: SymfonicStoreError, status: int, refused: bool) -> None:
    """The refusal's record and the answer tell a failed write by the same status, the message as the body."""
    assert answer(error, refused=refused) == (status, {"error": str(error)})


@pytest.mark.parametrize("outcome_unknown", [True, False])
def test_a_database_failure_is_503_and_only_the_answer_says_whether_it_may_have_committed(
    outcome_unknown: bool,
) -> None:
    """An unavailable database is a 503; the answer's body adds outcome_unknown, the refusal's does not."""
    error = DatabaseError("the connection was lost", outcome_unknown=outcome_unknown)
    assert answer(error, refused=True) == (503, {"error": str(error)})
    assert answer(error, refused=False) == (
        503, {"error": str(error), "outcome_unknown": outcome_unknown}
    )
    unreachable = DatabaseUnreachableError("nothing answered", errno=111)
    assert answer(unreachable, refused=False)[0] == 503


def test_an_interrupt_error_the_refusal_cannot_meet_is_a_500_there() -> None:
    """Only the answer tells 'already resolved' as a 409; recording a refusal that meets it is a 500."""
    error = InterruptAlreadyResolvedError("resolved", thread_id=THREAD, interrupt_id=IID)
    assert answer(error, refused=True) == (500, {"error": str(error)})
    status, body = answer(error, refused=False)
    assert (status, body["in_progress"]) == (409, False)
