"""The settings every operation reads: the TTL, the payload limit, the rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import validation
from ..decisions import DecisionRule
from ..errors import (
    InvalidInputError,
)
from .lifecycle import ApproverPolicy, Rules, payload_approvers

if TYPE_CHECKING:
    pass


def _approver_policy(approvers: Any) -> ApproverPolicy | None:
    if approvers is None:
        return None
    if approvers == "payload":
        return payload_approvers
    if callable(approvers):
        return approvers  # type: ignore[no-any-return]
    raise InvalidInputError(
        "approvers", "must be None, 'payload' or a callable(thread_id, marker, actor) -> bool"
    )


def _decision_rule(decisions: Any) -> DecisionRule | None:
    if decisions is None or callable(decisions):
        return decisions  # type: ignore[no-any-return]
    raise InvalidInputError("decisions", "must be None or a callable(name, response) -> str | None")



class Settings:
    """The store's settings, shared by the plans of every operation (see :mod:`.ops`).

    Raises (every method): :class:`~symfonic_store.InvalidInputError` for a bad argument,
    before anything is written.
    """

    def __init__(
        self,
        *,
        ttl_seconds: float | None,
        approvers: Any,
        max_payload_bytes: int | None,
        decisions: Any = None,
    ) -> None:
        self.ttl_seconds = validation.ttl(ttl_seconds)
        self.max_payload_bytes = validation.positive_int(
            max_payload_bytes, "max_payload_bytes", optional=True
        )
        self.rules = Rules(
            ttl_seconds=self.ttl_seconds,
            approvers=_approver_policy(approvers),
            decisions=_decision_rule(decisions),
        )

    def ttl(self, ttl_seconds: Any) -> float | None:
        """A TTL argument, or the store's TTL when it is None."""
        checked = validation.ttl(ttl_seconds)
        return self.ttl_seconds if checked is None else checked
