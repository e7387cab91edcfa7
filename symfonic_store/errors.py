"""The error tree of symfonic-store.

Every error the store raises on purpose derives from one root, so callers (and the
command line) can catch the whole family in one ``except``::

    SymfonicStoreError
    ├── InvalidInputError            bad argument: names the field, nothing written
    │   ├── InvalidMarkerError       the interrupt marker itself is malformed
    │   └── PayloadTooLargeError     a JSON value exceeds the configured size limit
    ├── InterruptStateError          the interrupt cannot take this transition
    │   ├── UnknownInterruptError    no such interrupt on this thread
    │   ├── InterruptAlreadyResolvedError   it already has its one ending
    │   ├── InterruptExpiredError    it is (or just became) expired
    │   ├── ResumeNotAllowedError    the approvers policy refuses this actor
    │   ├── InterruptInProgressError another answer holds the claim (gateway)
    │   ├── InterruptOutcomeUnknownError  a claimed answer's process died: did the
    │   │                            graph act? an operator settles it (gateway)
    │   └── AnswerNotTakenError      the graph did not take the answer (gateway)
    ├── ConcurrencyConflictError     a racing writer won; retry
    ├── ProjectionMismatchError      the projection and the event log disagree
    ├── EvidenceError                a checkpoint or an archive does not hold (tampering)
    ├── SchemaNotMigratedError       the schema is missing or behind the migrations
    │   └── SchemaTooNewError        a newer release migrated it: upgrade the package
    ├── DatabaseError                the database could not be reached or failed
    │   ├── DatabaseConfigurationError  no such database or role, a refused password:
    │   │                               fix the settings; retrying cannot help
    │   ├── DatabaseUnreachableError nothing answered at the server's address: retry
    │   └── ConstraintViolationError it refused a write (trigger, NOT NULL, CHECK):
    │                                not a race, so never retried
    └── SweepIncompleteError         a sweep stopped partway; carries what it committed

Messages always say what to do next. Driver exceptions are translated into this tree in
exactly one place (:func:`symfonic_store.db.translate.translate_errors`), by error code
(SQLSTATE, SQLite's extended result codes, constraint names), never by message text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sweep_report import SweepReport


class SymfonicStoreError(Exception):
    """Root of every error raised by symfonic-store."""


class InvalidInputError(SymfonicStoreError, ValueError):
    """An argument is invalid; the message names the field. Nothing was written."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"invalid {field}: {problem}")


class InvalidMarkerError(InvalidInputError):
    """The ``_interrupt_pending`` marker is not a dict or lacks a required key."""


class PayloadTooLargeError(InvalidInputError):
    """A JSON payload exceeds the store's configured size limit."""


class InterruptStateError(SymfonicStoreError):
    """The interrupt cannot take the requested transition."""

    def __init__(self, message: str, *, thread_id: str, interrupt_id: str) -> None:
        self.thread_id = thread_id
        self.interrupt_id = interrupt_id
        super().__init__(message)


class UnknownInterruptError(InterruptStateError):
    """No interrupt with this id was ever minted on this thread."""


class InterruptAlreadyResolvedError(InterruptStateError):
    """The interrupt already has its one ending (resumed, or resumed differently)."""


class InterruptExpiredError(InterruptStateError):
    """The interrupt is expired (TTL passed, run moved on, superseded or cancelled)."""

    def __init__(
        self, message: str, *, thread_id: str, interrupt_id: str, reason: str | None = None
    ) -> None:
        self.reason = reason
        super().__init__(message, thread_id=thread_id, interrupt_id=interrupt_id)


class ResumeNotAllowedError(InterruptStateError):
    """The configured approvers policy does not allow this actor to resume."""


class InterruptInProgressError(InterruptStateError):
    """Another answer claimed the interrupt and its graph run has not settled yet."""

    # A signature alike ThreadWriter's in shape only (keyword-only optionals).
    def __init__(
        self,
        message: str,
        *,
        thread_id: str,
        interrupt_id: str,
        claimant: str | None = None,
        claimed_at: float | None = None,
    ) -> None:
        self.claimant = claimant
        self.claimed_at = claimed_at
        super().__init__(message, thread_id=thread_id, interrupt_id=interrupt_id)


class InterruptOutcomeUnknownError(InterruptStateError):
    """A claimed answer's process stopped and its lease ran out without the checkpoint
    showing the answer taken: the graph may have acted. Every answer is refused until an
    operator settles it (``symfonic-store settle`` / ``store.settle``)."""

    def __init__(
        self,
        message: str,
        *,
        thread_id: str,
        interrupt_id: str,
        claimant: str,
        claimed_at: float,
    ) -> None:
        self.claimant = claimant
        self.claimed_at = claimed_at
        super().__init__(message, thread_id=thread_id, interrupt_id=interrupt_id)


class AnswerNotTakenError(InterruptStateError):
    """The graph raised on the answer or left the interrupt pending; it stays open."""

    def __init__(self, message: str, *, thread_id: str, interrupt_id: str, error: str) -> None:
        self.error = error
        super().__init__(message, thread_id=thread_id, interrupt_id=interrupt_id)


class ConcurrencyConflictError(SymfonicStoreError):
    """Another writer appended to the same thread first; the operation may be retried."""


class ProjectionMismatchError(SymfonicStoreError):
    """The projection and the event log disagree about a thread.

    Each projection row is written in the append's transaction (I6), so this means one
    of them was changed behind the store's back. Either the projection holds a head, or
    an answer, that the log no longer reaches -- events removed from the end of a
    thread, or a last event rewritten: the store refuses to act on either side's word
    (``rebuild_projection()`` would erase the last trace of the removal, and an answer
    to an interrupt whose ending is gone could be applied twice). Or the log is ahead
    of the projection -- a row deleted or set back: a write would collide with the
    log's events on every try, so it is refused (not called a race) and the message
    names ``symfonic-store projection rebuild``, which restores the row from the log.
    Nothing is written either way.
    """

    def __init__(self, message: str, *, thread_ids: tuple[str, ...]) -> None:
        self.thread_ids = thread_ids
        super().__init__(message)


class EvidenceError(SymfonicStoreError):
    """The evidence does not hold: a signed checkpoint or archive fails its check, or the
    state the store keeps for them was altered, so the store will not sign or remove on it.

    ``thread_id`` (and ``position``, where it can tell) name the first place affected.
    """

    def __init__(
        self, message: str, *, thread_id: str | None = None, position: int | None = None
    ) -> None:
        self.thread_id = thread_id
        self.position = position
        super().__init__(message)


class SchemaNotMigratedError(SymfonicStoreError):
    """The database schema does not match this release: missing, behind, or (the subclass
    :class:`SchemaTooNewError`) ahead of the migrations shipped with it."""


class SchemaTooNewError(SchemaNotMigratedError):
    """A newer release of symfonic-store migrated the database past this release's head.

    A subclass of :class:`SchemaNotMigratedError` because it is the same fact seen from
    the other side -- the schema and this code do not match, so the store will not run
    on it -- and code that already stops on a schema mismatch should stop here too. The
    remedy differs: upgrade the package, not the database.
    """

    def __init__(self, current: str, head: str) -> None:
        self.current = current
        self.head = head
        super().__init__(
            f"the database is at revision {current}, newer than this release's head "
            f"{head}: upgrade symfonic-store"
        )


class DatabaseError(SymfonicStoreError):
    """The database could not be reached, or failed in a way the store cannot fix.

    ``outcome_unknown`` is True when the failure came at or after COMMIT (the connection
    was lost while committing): the transaction may have committed, so the message never
    says that nothing was written.
    """

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        self.outcome_unknown = outcome_unknown
        super().__init__(message)


class DatabaseConfigurationError(DatabaseError):
    """The database server refused the connection's settings: the database does not
    exist, the role does not exist or may not connect, or the password was refused.

    A configuration error (the command line exits 2): retrying with the same URL cannot
    help, so the message names what to fix instead. ``code`` is the server's SQLSTATE
    (``3D000``, ``28000``, ``28P01``, ``42501``), read by code, never from its text.
    """

    def __init__(self, message: str, *, code: str) -> None:
        self.code = code
        super().__init__(message)


class DatabaseUnreachableError(DatabaseError):
    """Nothing answered at the database server's address: the connection was refused or
    timed out, the host has no route or its name does not resolve.

    No connection was opened, so nothing was written; retry once the server answers.
    ``errno`` is the socket's error number.
    """

    def __init__(self, message: str, *, errno: int | None) -> None:
        self.errno = errno
        super().__init__(message)


class SweepIncompleteError(SymfonicStoreError):
    """A sweep stopped on a store error after it had done part of its work.

    ``report`` is the :class:`~symfonic_store.SweepReport` of what was committed (and
    called back for) before the failure, with ``complete`` False; ``error`` is the store error
    that stopped it; ``outcome_unknown`` says whether the failing batch may have
    committed too.
    """

    def __init__(self, report: SweepReport, error: SymfonicStoreError) -> None:
        self.report = report
        self.error = error
        self.outcome_unknown = isinstance(error, DatabaseError) and error.outcome_unknown
        owed = (
            " (if that batch did commit, its wake-ups are owed and the next sweep delivers them)"
            if self.outcome_unknown
            else ""
        )
        delivered = (
            f" and delivered {len(report.redelivered)} owed wake-up(s)" if report.redelivered else ""
        )
        if report.claims_settled:
            unknown = sum(1 for *_, outcome in report.claims_settled if outcome == "outcome_unknown")
            delivered += (
                f", settled {len(report.claims_settled) - unknown} lapsed answer claim(s) and "
                f"recorded {unknown} as outcome_unknown"
            )
        super().__init__(
            f"the sweep stopped partway: it committed {report.count} expiry(ies){delivered} "
            f"before it failed (the report lists them); the failing step: {error}{owed}; run "
            "the sweep again to finish the work"
        )


class ConstraintViolationError(DatabaseError):
    """The database refused a write by one of its rules, and not because a writer raced.

    A trigger (the event table is append-only), a NOT NULL, CHECK or foreign key
    constraint, or a unique index that is not one of the store's concurrency guards.
    Retrying cannot help, so the store does not; the transaction was rolled back.
    ``code`` is the SQLSTATE (PostgreSQL) or the extended result code name (SQLite);
    ``constraint`` the constraint's name when the database reports it.
    """

    def __init__(self, message: str, *, code: str | None, constraint: str | None = None) -> None:
        self.code = code
        self.constraint = constraint
        super().__init__(message)


# symfonic_store/__init__.py lists these names again, on purpose: the package's __all__ is
# its whole public face in one list, the errors among the names loaded lazily.
# Deliberately repeated: symfonic_store/__init__.py lists these names again, literally (static tools
# read only a literal list).
__all__ = [
    "AnswerNotTakenError",
    "ConcurrencyConflictError",
    "ConstraintViolationError",
    "DatabaseConfigurationError",
    "DatabaseError",
    "DatabaseUnreachableError",
    "EvidenceError",
    "InterruptAlreadyResolvedError",
    "InterruptExpiredError",
    "InterruptInProgressError",
    "InterruptOutcomeUnknownError",
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
]
