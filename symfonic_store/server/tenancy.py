"""What a principal may see of a thread's log (SPEC §15): the rule of
:mod:`symfonic_store.redaction` (which the notifier's subscriptions follow too), applied
to the principal's tenants (:attr:`Principal.scope`), and the audit's pages built from
what it may see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import redaction
from .paging import audit_page_of

if TYPE_CHECKING:
    from ..events import StoredEvent
    from ..services.audit import AuditRecord
    from .principal import Principal


def visible_events(store: Any, principal: Principal, events: Sequence[StoredEvent]) -> list[StoredEvent]:
    """The events ``principal`` may see, each without references to interrupts it may not
    (and then without ``hash`` and ``version``: :class:`~symfonic_store.redaction.RedactedEvent`)."""
    return redaction.visible_events(store, principal.scope, events)


def visible_open(
    store: Any, principal: Principal, thread_id: str, opened: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The thread's open interrupts (each with ``interrupt_id``) ``principal`` may see."""
    return redaction.visible_open(store, principal.scope, thread_id, opened)


def visible_steps(
    store: Any, principal: Principal, steps: Sequence[tuple[StoredEvent, dict[str, Any]]]
) -> list[tuple[StoredEvent, dict[str, Any]]]:
    """A replay's ``(event, state)`` steps ``principal`` may see; a state's pending marker
    of an interrupt it may not see is shown as none."""
    return redaction.visible_steps(store, principal.scope, steps)


def visible_records(
    store: Any, principal: Principal, records: Sequence[AuditRecord], actor: str | None = None
) -> list[AuditRecord]:
    """Audit records of ``principal``'s tenants' interrupts (the store scoped them), as
    :func:`symfonic_store.redaction.visible_records` shows them."""
    return redaction.visible_records(store, principal.scope, records, actor)


def audit_page(
    store: Any, principal: Principal, records: Sequence[AuditRecord], *,
    actor: str | None, after: str | None, limit: int,
) -> tuple[list[AuditRecord], str | None]:
    """One page of the audit ``principal`` may see, and the next page's cursor
    (``GET /api/audit`` and the inbox's audit page).

    Filtered by ``actor``, the records it may not see under that name are dropped
    *before* the page is cut: a page, and its cursor, built from the store's matches
    would tell a hidden name from an unknown one. Without ``actor`` what it may see
    changes no record's place, so only the page is redacted (the cheap way).

    Raises:
        BadRequest: ``after`` is not a cursor of this list.
    """
    if actor is not None:
        return audit_page_of(visible_records(store, principal, records, actor), after=after, limit=limit)
    page, cursor = audit_page_of(records, after=after, limit=limit)
    return visible_records(store, principal, page), cursor
