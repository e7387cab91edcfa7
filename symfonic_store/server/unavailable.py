"""While the database is unreachable the service says so: 503 with ``Retry-After``.

Every route reaches the store from a handler, so a :class:`~symfonic_store.DatabaseError`
is mapped here, once, for all of them (SPEC §12): the JSON API answers ``{"error": ...}``
and the inbox an HTML page, both 503 with ``Retry-After``. Never a 500: a 500 goes
through Starlette's last-resort handler, which re-raises after answering, and uvicorn
then closes the keep-alive connection under the client's next request.
"""

from __future__ import annotations

import logging

from ..errors import ConstraintViolationError, DatabaseError
from .web import Problem

RETRY_AFTER_SECONDS = 5
"""What ``Retry-After`` asks a client to wait before it asks again."""

log = logging.getLogger("symfonic_store.server")


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot serve right now (and a retry may help).

    A :class:`~symfonic_store.ConstraintViolationError` is the database refusing a write
    by its rules: no later retry helps, so it is not an unavailability.
    """
    return isinstance(exc, DatabaseError) and not isinstance(exc, ConstraintViolationError)


def unavailable(exc: DatabaseError) -> Problem:
    """The 503 problem for a database failure; its details go to the server log only
    (they name hosts and ports, not something to tell whoever asks)."""
    log.error("the database is not available: %s", exc)
    committed = (
        " A write this request started may have been committed: look before you send it again."
        if exc.outcome_unknown
        else ""
    )
    return Problem(
        503,
        f"the store's database is not available right now: try again in {RETRY_AFTER_SECONDS} s."
        + committed,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
