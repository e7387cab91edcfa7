"""What a principal may see of a thread's log (SPEC §15): the rule of
:mod:`symfonic_store.redaction` (which the notifier's subscriptions follow too), applied
to the principal's tenants (:attr:`Principal.scope`), and the audit's pages built from
what it may see (the store reads them so scoped, SPEC §15).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import redaction

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


def audit_page(records: Sequence[AuditRecord], *, limit: int) -> tuple[list[AuditRecord], str | None]:
    """One page of the audit (``GET /api/audit`` and the inbox's audit page) from the
    store's read of ``limit + 1`` records after the cursor, and the next page's cursor
    (the last shown record's; None when nothing follows).

    The store read the principal's page already scoped to its tenants (``tenants=``), the
    actor of a superseded marker's expiry hidden where the principal may not see the
    interrupt that superseded it, and an ``actor`` filter not matching through a hidden
    name -- so a page and its cursor tell a hidden name from an unknown one no more than
    the records do (SPEC §15)."""
    page = list(records[:limit])
    return page, page[-1].cursor if len(records) > limit and page else None
