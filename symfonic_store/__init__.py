"""symfonic-store: an event-sourced, durable store for LangGraph human-in-the-loop interrupts.

Every mint, route decision, resume and stale expiry of an interrupt is appended to an SQL
event table; the pending interrupt of each thread is a projection of those events. Use it
to audit who approved what, expire abandoned interrupts with a cron sweep, and replay a
thread's history.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .errors import (
    AnswerNotTakenError,
    ConcurrencyConflictError,
    ConstraintViolationError,
    DatabaseConfigurationError,
    DatabaseError,
    DatabaseUnreachableError,
    EvidenceError,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptInProgressError,
    InterruptOutcomeUnknownError,
    InterruptStateError,
    InvalidInputError,
    InvalidMarkerError,
    PayloadTooLargeError,
    ProjectionMismatchError,
    ResumeNotAllowedError,
    SchemaNotMigratedError,
    SchemaTooNewError,
    SweepIncompleteError,
    SymfonicStoreError,
    UnknownInterruptError,
)
from .events import (
    ASSIGNED,
    ESCALATED,
    EXPIRED,
    MINTED,
    REMINDED,
    RESUME_REJECTED,
    RESUMED,
    ROUTE_DECIDED,
    VOTED,
    StoredEvent,
)
from .protocol import (
    INTERRUPT_ACK_SENTINEL,
    ask_user_pending_is_current,
    build_interrupt_marker,
    expired_resume_value,
    interrupt_condition,
    interrupt_pending_is_current,
    new_interrupt_id,
    tools_condition,
)

# A library prints nothing on its own: without this, a warning of the package's loggers
# (``symfonic_store.*``) reaches stderr through logging's last resort in an application
# that configured no logging. The application's own handlers still see every record.
logging.getLogger(__name__).addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from .decisions import DecisionRule
    from .langgraph import (
        InterruptGateway,
        InterruptRequest,
        InterruptState,
        create_interrupt_node,
        create_tools_node,
        make_async_graph_waker,
        make_graph_waker,
        make_interrupt_router,
        request_interrupt,
    )
    from .services.audit import AuditRecord
    from .services.sweep import NOT_HELD
    from .services.verify import BrokenLink, VerifyReport
    from .store import AsyncInterruptStore, InterruptStore
    from .store.read_ops import ReaderLag
    from .sweep_report import SweepReport

__version__ = "0.1.0"

# Names load on first use: the LangGraph integration imports LangGraph and LangChain
# (seconds of CPU), the store SQLAlchemy (a fifth of a second). `import symfonic_store`
# and `symfonic-store --help` pay for neither; `from symfonic_store import X` works as
# usual.
_LAZY = {
    "AsyncInterruptStore": "store",
    "InterruptStore": "store",
    "AuditRecord": "services.audit",
    "DecisionRule": "decisions",
    "SweepReport": "sweep_report",
    "NOT_HELD": "services.sweep",
    "ReaderLag": "store.read_ops",
    "BrokenLink": "services.verify",
    "VerifyReport": "services.verify",
    "InterruptGateway": "langgraph",
    "InterruptRequest": "langgraph",
    "InterruptState": "langgraph",
    "create_interrupt_node": "langgraph",
    "create_tools_node": "langgraph",
    "make_async_graph_waker": "langgraph",
    "make_graph_waker": "langgraph",
    "make_interrupt_router": "langgraph",
    "request_interrupt": "langgraph",
}


# Deliberately repeated in symfonic_store/store/__init__.py: each lazy face loads its own names.
def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'symfonic_store' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

# Deliberately repeated: errors.__all__'s names stand here again, literally, because static tools
# read only a literal list.
__all__ = [
    "ASSIGNED",
    "ESCALATED",
    "EXPIRED",
    "MINTED",
    "NOT_HELD",
    "REMINDED",
    "RESUMED",
    "RESUME_REJECTED",
    "ROUTE_DECIDED",
    "VOTED",
    "AsyncInterruptStore",
    "AuditRecord",
    "BrokenLink",
    "DecisionRule",
    "InterruptStore",
    "ReaderLag",
    "StoredEvent",
    "SweepReport",
    "VerifyReport",
    "INTERRUPT_ACK_SENTINEL",
    "ConcurrencyConflictError",
    "ConstraintViolationError",
    "DatabaseConfigurationError",
    "DatabaseError",
    "DatabaseUnreachableError",
    "EvidenceError",
    "AnswerNotTakenError",
    "InterruptAlreadyResolvedError",
    "InterruptGateway",
    "InterruptInProgressError",
    "InterruptOutcomeUnknownError",
    "InterruptExpiredError",
    "InterruptRequest",
    "InterruptState",
    "InterruptStateError",
    "InvalidInputError",
    "InvalidMarkerError",
    "PayloadTooLargeError",
    "ProjectionMismatchError",
    "ResumeNotAllowedError",
    "SchemaNotMigratedError",
    "SchemaTooNewError",
    "SweepIncompleteError",
    "SymfonicStoreError",
    "UnknownInterruptError",
    "__version__",
    "ask_user_pending_is_current",
    "build_interrupt_marker",
    "create_interrupt_node",
    "create_tools_node",
    "expired_resume_value",
    "interrupt_condition",
    "interrupt_pending_is_current",
    "make_async_graph_waker",
    "make_graph_waker",
    "make_interrupt_router",
    "new_interrupt_id",
    "request_interrupt",
    "tools_condition",
]
