"""The table of operations both stores share: every public method, written once.

Each public store method is a *plan* here: a generator function with the method's own
signature and docstring, which validates its arguments, then yields the steps it needs
and returns the method's result. A step is one of

- :class:`Op`: a function of a synchronous ``Connection`` (run in a transaction);
- :class:`Call`: a user callback (``on_expired``), run outside any transaction;
- :class:`Emit`: items handed to the caller of a streaming method (``iter_events``).

Two thin runners drive the same plans: :class:`~symfonic_store.InterruptStore` runs
each ``Op`` on a pooled connection, :class:`~symfonic_store.AsyncInterruptStore`
through ``AsyncConnection.run_sync`` (and awaits callbacks that return awaitables). A
step that raises is thrown back into its plan, so a plan can keep what it already did
(the sweep reports the batches it committed). :func:`operation` and :func:`stream`
turn a plan into a method of each runner, with the plan's signature and docstring, so
the two public surfaces cannot drift.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from sqlalchemy.engine import Connection

from .. import validation
from .append import Refusal, utc_now
from ..db.executor import executor_for
from ..db.statements import (
    claim_rows,
    events_after,
    events_behind_horizon,
    load_thread,
    open_rows,
    pending_threads,
    read_horizon,
    read_open_interrupts,
    read_page,
    thread_events_query,
)
from ..decisions import DecisionRule
from ..errors import (
    ConcurrencyConflictError,
    DatabaseError,
    EvidenceError,
    InvalidInputError,
    SweepIncompleteError,
    SymfonicStoreError,
)
from ..events import REJECTION_WHYS, StoredEvent
from ..native import MARKER_SOURCE, NATIVE_SOURCE
from ..projection import ThreadState
from ..protocol import PENDING_KEY, interrupt_pending_is_current, normalize_response
from ..services import archive as archiving
from ..services import chain as chaining
from ..services import evidence
from ..services import wakeups as wakeup_service
from ..services.archive import ArchiveResult
from ..services.audit import AuditRecord, audit
from ..services.evidence import Checkpoint, CheckpointProblem, CheckpointReport
from ..services.rebuild import Progress, rebuild
from ..services.replay import Replay
from ..services.sweep import (
    CLAIM_LEASE_SECONDS,
    NOT_HELD,
    Expiry,
    SweepReport,
    WakeClaim,
    claim_owed,
    count_owed,
    let_go,
    settle_wakeup,
    sweep_batch,
    sweep_native_batch,
)
from ..services.verify import VerifyReport, verify
from . import admission, lifecycle, settlement
from .lifecycle import ApproverPolicy, Rules, payload_approvers

if TYPE_CHECKING:
    from langgraph.types import Command

T = TypeVar("T")
P = ParamSpec("P")

OnExpired = Callable[[str, str, str], Any]
"""``on_expired(thread_id, interrupt_id, reason)``; the async store awaits an awaitable."""


@dataclass(frozen=True, slots=True)
class Op(Generic[T]):
    """One database step: a function of a ``Connection``, and whether it writes."""

    fn: Callable[[Connection], T]
    write: bool
    settled: Callable[[Connection], tuple[bool, T]] | None = None
    """A read-only check run first (no write lock): ``(True, result)`` proves the write
    would record nothing and answers the call; ``(False, _)`` falls back to ``fn``,
    which decides again under the write lock."""
    appends: bool = True
    """May the write insert events? False for checkpoints and archive removals: on
    PostgreSQL their transactions do not join the writers (they wait for them instead,
    :func:`~symfonic_store.db.statements.final_max_position`)."""


@dataclass(frozen=True, slots=True)
class ReaderLag:
    """How far gap-safe readers of :meth:`~symfonic_store.InterruptStore.events` are behind."""

    events: int
    """Committed events not readable yet: they wait for an older writer to end."""
    writers: int
    """The store's write transactions in flight when it was measured."""
    oldest_writer_seconds: float | None
    """How long the oldest of them had been open; None when none is (or, on PostgreSQL,
    when the server does not show this role that session's start)."""


@dataclass(frozen=True, slots=True)
class Call:
    """A user callback, called by the runner outside any transaction."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Emit:
    """Items a streaming plan hands to its caller."""

    items: Iterable[Any]


Step = Op[Any] | Call | Emit
Plan = Generator[Step, Any, T]

PAGE_SIZE = 1000


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


def recorded_response(value: Any) -> Any:
    """N2 as the store records it (JSON-ready), its failures as :class:`InvalidInputError`.

    The one normaliser of ``store.resume`` and of the interrupt node's path.
    """
    try:
        return normalize_response(value, json_ready=True)
    except RecursionError:
        raise InvalidInputError("response", "is nested too deeply to record") from None
    except Exception as exc:  # model_dump() or str() of a hostile object
        raise InvalidInputError(
            "response", f"cannot be turned into JSON ({type(exc).__name__}: {exc})"
        ) from None


def response_dict(value: Any) -> dict[str, Any]:
    """What ``store.resume`` records and sends: N2, always a dict.

    ``None`` is an acknowledgement (``{}``); a model that dumps to something other than
    a dict (a RootModel of a list, say) travels as ``{"value": str(dump)}`` like a scalar.
    """
    if value is None:
        return {}
    response = recorded_response(value)
    return response if isinstance(response, dict) else {"value": str(response)}


def _waiting_items(waiting: Any, max_bytes: int | None) -> list[dict[str, Any]]:
    if not isinstance(waiting, list) or not all(isinstance(w, dict) for w in waiting):
        raise InvalidInputError("waiting", "must be a list of dicts (langgraph.waiting.waiting_on(snapshot))")
    items = []
    for w in waiting:
        items.append(
            {
                **w,
                "interrupt_id": validation.required_id(w.get("interrupt_id"), "waiting.interrupt_id"),
                "value": validation.json_value(
                    admission.json_safe(w.get("value")), "waiting.value", max_bytes=max_bytes
                ),
            }
        )
    return items


def _native_open(row: dict[str, Any]) -> dict[str, Any]:
    """An open LangGraph interrupt as ``open_interrupts()`` lists it."""
    return {
        "thread_id": row["thread_id"],
        "interrupt_id": row["interrupt_id"],
        "name": row["name"],
        "payload": row["payload"],
        "minted_at": row["minted_at"],
        "source": NATIVE_SOURCE,
        "graph": row["graph"],
        "breakpoint": row["breakpoint"],
        "checkpoint_id": row["checkpoint_id"],
        "actor": row["actor"],
    }


def _native_pending(row: dict[str, Any]) -> dict[str, Any]:
    """An open LangGraph interrupt as ``list_pending()`` lists it: the marker's keys."""
    return {
        "name": row["name"],
        "interrupt_id": row["interrupt_id"],
        "payload": row["payload"],
        "tool_call_id": None,
        "run_id": None,
        "minted_at": row["minted_at"],
        "thread_id": row["thread_id"],
        "source": NATIVE_SOURCE,
        "graph": row["graph"],
    }


SCOPE_SIZE = 500
"""Thread ids per statement when a sweep is limited to given threads (one bind each)."""


def _scopes(thread_ids: tuple[str, ...] | None) -> list[tuple[str, ...] | None]:
    """The sweep's scopes: every thread (None), or the given ids in bounded chunks."""
    if thread_ids is None:
        return [None]
    return [thread_ids[i : i + SCOPE_SIZE] for i in range(0, len(thread_ids), SCOPE_SIZE)]


def _wake(
    report: SweepReport,
    on_expired: OnExpired,
    claim: WakeClaim,
    items: list[Expiry],
    *,
    owed_before: bool,
) -> Plan[None]:
    """Call back once for each wake-up, recording after each call whether it was delivered.

    Settling one wake-up at a time keeps at-least-once tight: if the sweep dies, only the
    wake-up being delivered at that moment is delivered again later.
    """
    for thread_id, interrupt_id, reason in items:
        error: str | None = None
        try:
            woken = yield Call(on_expired, (thread_id, interrupt_id, reason))
        except Exception as exc:
            report.wake_failed(thread_id, interrupt_id, exc)
            error = report.wake_failures[-1][2]
        else:
            if woken is NOT_HELD:  # another graph's thread: it stays owed, untouched
                report.not_held.append((thread_id, interrupt_id, reason))
                yield Op(
                    partial(wakeup_service.let_go_of, thread_id=thread_id, interrupt_id=interrupt_id),
                    write=True,
                )
                continue
            if owed_before:
                report.redelivered.append((thread_id, interrupt_id, reason))
        yield Op(
            partial(
                settle_wakeup,
                claim=claim,
                thread_id=thread_id,
                interrupt_id=interrupt_id,
                error=error,
                renew=claim.renewal_due(),
            ),
            write=True,
        )


def _settle_claims(
    report: SweepReport, settle: Callable[[str, str], Any], scope: tuple[str, ...] | None
) -> Plan[None]:
    """Settle the gateway answers whose process stopped before they settled (SPEC §8)
    when the checkpoint shows them taken; the others are left to :func:`_mark_unknown`."""
    stale: list[tuple[str, str]] = yield Op(
        partial(
            settlement.lapsed_claims,
            claimed_before=time.time() - CLAIM_LEASE_SECONDS,
            thread_ids=scope,
        ),
        write=False,
    )
    for thread_id, interrupt_id in stale:
        try:
            outcome = yield Call(settle, (thread_id, interrupt_id))
        except Exception as exc:
            report.wake_failed(thread_id, interrupt_id, exc)
            continue
        if outcome:
            report.claims_settled.append((thread_id, interrupt_id, str(outcome)))


def _mark_unknown(report: SweepReport, scope: tuple[str, ...] | None) -> Plan[None]:
    """Every claim whose lease ran out, not shown taken: ``outcome_unknown`` (SPEC §12)."""
    marked: list[tuple[str, str]] = yield Op(
        partial(
            settlement.mark_unknown,
            claimed_before=time.time() - CLAIM_LEASE_SECONDS,
            thread_ids=scope,
        ),
        write=True,
    )
    report.claims_settled.extend((t, i, settlement.OUTCOME_UNKNOWN) for t, i in marked)


def _deliver_owed(
    report: SweepReport,
    on_expired: OnExpired,
    claim: WakeClaim,
    scope: tuple[str, ...] | None,
    size: int,
    graph: str | None,
) -> Plan[None]:
    """Deliver the wake-ups earlier sweeps still owe (to ``graph``, or to no named graph,
    when given), each at most once in this sweep.

    The keyset cursor only moves forward, so a wake-up whose callback fails again is
    left owed for the next sweep instead of being retried here in a loop.
    """
    after = ("", "")
    while True:
        owed: list[Expiry] = yield Op(
            partial(claim_owed, claim=claim, after=after, limit=size, thread_ids=scope, graph=graph),
            write=True,
        )
        yield from _wake(report, on_expired, claim, owed, owed_before=True)
        if len(owed) < size:
            return
        after = (owed[-1][0], owed[-1][1])


def _state_of(thread: ThreadState | None) -> dict[str, Any]:
    if thread is None:
        return {PENDING_KEY: None, "run_id": None}
    return thread.as_state()


class Operations:
    """The store's settings and every public operation, as plans (see the module doc).

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

    # --- writes ---------------------------------------------------------------

    def mint(self, thread_id: str, marker: dict[str, Any], *, actor: str | None = None) -> Plan[bool]:
        """Record ``interrupt.minted``; returns False when the interrupt was already seen.

        ``marker`` is the ``_interrupt_pending`` dict or the whole update containing it.
        Minting while another interrupt is pending expires that one (``superseded``).

        Raises:
            InvalidMarkerError: not a dict, or ``name``/``interrupt_id`` missing.
            InvalidInputError: a bad thread id, actor or payload.
        """
        t = validation.required_id(thread_id, "thread_id")
        m, encoded = validation.marker_encoded(marker, max_bytes=self.max_payload_bytes)
        a = validation.text_id(actor, "actor", optional=True)
        minted: bool = yield Op(
            partial(lifecycle.mint, thread_id=t, marker=m, actor=a, encoded=encoded),
            write=True,
            settled=partial(lifecycle.mint_settled, thread_id=t, interrupt_id=m["interrupt_id"]),
        )
        return minted

    def record_route(
        self,
        thread_id: str,
        route: str,
        *,
        run_id: str | None = None,
        reason: str | None = None,
        interrupt_id: str | None = None,
    ) -> Plan[None]:
        """Record ``route.decided`` (and the thread's ``run_id`` when given).

        ``interrupt_id`` is the marker the decision looked at; by default the pending one.
        """
        fn = partial(
            lifecycle.record_route,
            thread_id=validation.required_id(thread_id, "thread_id"),
            route=validation.route(route),
            run_id=validation.run_id(run_id),
            reason=validation.route_reason(reason),
            interrupt_id=validation.text_id(interrupt_id, "interrupt_id", optional=True),
        )
        yield Op(fn, write=True)

    def record_router_decision(
        self, thread_id: str, state: dict[str, Any], route: str, *, ttl_seconds: float | None = None
    ) -> Plan[None]:
        """What a router saw in a graph state, in one transaction (used by the router)."""
        t = validation.required_id(thread_id, "thread_id")
        if not isinstance(state, dict):
            raise InvalidInputError("state", f"must be a dict, got {type(state).__name__}")
        r = validation.route(route)
        raw = state.get(PENDING_KEY)
        marker, encoded = (
            validation.marker_encoded(raw, max_bytes=self.max_payload_bytes)
            if isinstance(raw, dict) and raw
            else (None, None)
        )
        validation.run_id(state.get("run_id"), "state.run_id")
        view = {PENDING_KEY: raw, "run_id": state.get("run_id")}
        fn = partial(
            lifecycle.record_router_decision,
            thread_id=t,
            state=view,
            route=r,
            marker=marker,
            ttl_seconds=self.ttl(ttl_seconds),
            encoded=encoded,
        )
        yield Op(fn, write=True)

    def resume(
        self,
        thread_id: str,
        interrupt_id: str,
        response: Any = None,
        *,
        actor: str,
        authenticated_by: str | None = None,
    ) -> Plan[Command[Any]]:
        """Admit a person's answer exactly once; returns the ``Command`` to resume the graph.

        ``None`` (or a field-less model) is an acknowledgement. Repeating the identical
        call returns the same command without a new event. ``actor`` is recorded as
        given: the caller vouches for it (the HTTP service passes the authenticated one,
        and says how it authenticated it in ``authenticated_by``, e.g. ``service:jwt``).
        The answer's decision is recorded with it (SPEC §12).

        Raises:
            UnknownInterruptError: nothing with that id was minted on the thread.
            InterruptAlreadyResolvedError: someone else (or another answer) got there first.
            InterruptExpiredError: it is expired, or stale by TTL/run_id (now recorded).
            ResumeNotAllowedError: the approvers policy refuses ``actor``.
            ProjectionMismatchError: the log shows no ending but the projection does not
                hold the interrupt pending (its ending was removed?); nothing recorded.
            InvalidInputError: bad ids, a response that is not JSON, or a decisions
                function that raised or returned no decision word (nothing recorded).
        """
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        a = validation.required_id(actor, "actor")
        by = validation.authenticated_by(authenticated_by)
        r, r_json = validation.json_encoded(
            response_dict(response), "response", max_bytes=self.max_payload_bytes
        )
        admitted: Any = yield Op(
            partial(
                lifecycle.resume,
                rules=self.rules,
                thread_id=t,
                interrupt_id=i,
                response=r,
                actor=a,
                response_json=r_json,
                authenticated_by=by,
            ),
            write=True,
        )
        from langgraph.types import Command  # the graph machinery only when a command is made

        from ..protocol import encode_resume

        return Command(resume=encode_resume(admitted))

    def admit_node_resume(
        self, thread_id: str, pending: dict[str, Any], resume_value: Any, *, actor: str | None
    ) -> Plan[dict[str, Any]]:
        """The interrupt node's check of an answer it received (see create_interrupt_node)."""
        t = validation.required_id(thread_id, "thread_id")
        if not isinstance(pending, dict):
            raise InvalidInputError("state._interrupt_pending", "must be a dict marker")
        i = validation.required_id(pending.get("interrupt_id"), "marker.interrupt_id")
        a = validation.text_id(actor, "actor", optional=True)
        # What the seed node hands the agent (N2), as the JSON the store records.
        response, response_json = validation.json_encoded(
            recorded_response(resume_value) if resume_value is not None else {},
            "response",
            max_bytes=self.max_payload_bytes,
        )
        fn = partial(
            lifecycle.resume,
            rules=self.rules,
            thread_id=t,
            interrupt_id=i,
            response=response,
            actor=a,
            from_node=True,
            response_json=response_json,
        )
        settled = partial(
            lifecycle.node_resume_settled, thread_id=t, interrupt_id=i, response=response
        )
        admitted: dict[str, Any] = yield Op(fn, write=True, settled=settled)
        return admitted

    def expire(
        self,
        thread_id: str,
        interrupt_id: str,
        *,
        reason: str = "cancelled",
        actor: str | None = None,
    ) -> Plan[None]:
        """Declare a pending interrupt dead (``detected_by: api``).

        Raises:
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError.
        """
        fn = partial(
            lifecycle.expire,
            thread_id=validation.required_id(thread_id, "thread_id"),
            interrupt_id=validation.required_id(interrupt_id, "interrupt_id"),
            reason=validation.expiry_reason(reason),
            actor=validation.text_id(actor, "actor", optional=True),
        )
        yield Op(fn, write=True)

    def record_refusal(
        self,
        thread_id: str,
        interrupt_id: str,
        response: Any = None,
        *,
        actor: str,
        error: str,
        why: str = "not_allowed",
        via: str = "service",
    ) -> Plan[None]:
        """Record an answer its caller refused (``interrupt.resume_rejected``, ``why``).

        For a caller with rules of its own -- the approval service's policy file -- so
        its refusals are in the audit beside the store's, with ``actor`` (the principal
        it authenticated) and ``error`` (why, in words). Nothing is admitted.

        Raises:
            UnknownInterruptError: nothing with that id was minted on the thread; nothing
                was recorded.
            InvalidInputError: bad ids, an unknown ``why``, or a response that is not JSON.
        """
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        a = validation.required_id(actor, "actor")
        if why not in REJECTION_WHYS:
            raise InvalidInputError("why", f"must be one of {', '.join(REJECTION_WHYS)}")
        r = validation.json_value(response, "response", max_bytes=self.max_payload_bytes)
        fn = partial(
            lifecycle.record_refusal,
            thread_id=t,
            interrupt_id=i,
            response=r,
            actor=a,
            why=why,
            error=str(error)[:1000],
            via=str(via)[: validation.MAX_ID_LENGTH],
        )
        yield Op(fn, write=True)

    # --- LangGraph's own interrupts (SPEC §8; used by the gateway) -----------------

    def record_waiting(
        self,
        thread_id: str,
        waiting: list[dict[str, Any]],
        *,
        actor: str | None = None,
        graph: str | None = None,
    ) -> Plan[list[str]]:
        """Record what a thread waits on: mint the unseen, close what LangGraph dropped.

        ``waiting`` is :func:`~symfonic_store.langgraph.waiting.waiting_on` of the
        thread's state. Returns the ids minted. Used by the gateway after each call.
        """
        t = validation.required_id(thread_id, "thread_id")
        items = _waiting_items(waiting, self.max_payload_bytes)
        a = validation.text_id(actor, "actor", optional=True)
        g = None if graph is None else str(graph)[: validation.MAX_ID_LENGTH]
        minted: list[str] = yield Op(
            partial(admission.record_waiting, thread_id=t, waiting=items, actor=a, graph=g),
            write=True,
            settled=partial(admission.waiting_settled, thread_id=t, waiting=items),
        )
        return minted

    def claim(
        self,
        thread_id: str,
        interrupt_id: str,
        response: Any,
        *,
        actor: str,
        authenticated_by: str | None = None,
    ) -> Plan[dict[str, Any]]:
        """An answer's first phase: claim a LangGraph interrupt for ``response`` (SPEC §8).

        Returns the open interrupt. The claim commits before the graph runs; settle it
        with :meth:`confirm` or :meth:`release`. ``actor`` is recorded as given.

        Raises:
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError,
                ResumeNotAllowedError: refused and recorded (nothing on a thread
                without events).
            InterruptInProgressError: another answer holds the claim (recorded).
            InterruptOutcomeUnknownError: a claim whose process died and whose outcome is
                unknown holds it until :meth:`settle` (recorded).
            InvalidInputError: the decisions function raised or returned no decision
                word (nothing recorded).
        """
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        a = validation.required_id(actor, "actor")
        by = validation.authenticated_by(authenticated_by)
        r = validation.json_value(response, "response", max_bytes=self.max_payload_bytes)
        opened: dict[str, Any] = yield Op(
            partial(
                admission.claim,
                rules=self.rules,
                thread_id=t,
                interrupt_id=i,
                response=r,
                actor=a,
                authenticated_by=by,
            ),
            write=True,
        )
        return opened

    def confirm(
        self, thread_id: str, interrupt_id: str, *, decision: str | None = None
    ) -> Plan[bool]:
        """A claim's second phase: LangGraph consumed the answer (``interrupt.resumed``)."""
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        d = validation.text_id(decision, "decision", optional=True)
        done: bool = yield Op(
            partial(admission.confirm, thread_id=t, interrupt_id=i, decision=d),
            write=True,
            settled=partial(admission.confirm_settled, thread_id=t, interrupt_id=i),
        )
        return done

    def release(self, thread_id: str, interrupt_id: str, *, error: str) -> Plan[bool]:
        """The graph did not take the claimed answer: ``not_taken``; the interrupt reopens."""
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        done: bool = yield Op(
            partial(admission.release, thread_id=t, interrupt_id=i, error=str(error)[:1000]),
            write=True,
        )
        return done

    def settle(
        self,
        thread_id: str,
        interrupt_id: str,
        *,
        outcome: settlement.Outcome,
        actor: str,
    ) -> Plan[None]:
        """Say what became of an answer whose outcome is unknown (SPEC §12).

        A sweep records a gateway answer whose process stopped, and whose checkpoint does
        not show it taken, as ``outcome_unknown``; the interrupt then refuses every answer
        until this call. ``outcome="taken"`` records the claimed answer as
        ``interrupt.resumed`` (actor: the claimant); ``"not_taken"`` records it as
        ``interrupt.resume_rejected`` (``why: "not_taken"``) and the interrupt is open
        again. Both record the operator ``actor`` as ``data["settled_by"]``.

        Raises:
            InvalidInputError: a bad outcome or id, or the interrupt has no answer of
                unknown outcome (nothing written).
        """
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        a = validation.required_id(actor, "actor")
        if outcome not in settlement.OUTCOMES:
            raise InvalidInputError("outcome", f"must be one of {', '.join(settlement.OUTCOMES)}")
        yield Op(
            partial(settlement.settle, thread_id=t, interrupt_id=i, outcome=outcome, actor=a),
            write=True,
        )

    def record_task_writes(self, record: dict[str, Any]) -> Plan[None]:
        """What the recording checkpointer saw a task write (interrupts, an answer)."""
        if not isinstance(record, dict):
            raise InvalidInputError("record", "must be a dict")
        validation.required_id(record.get("thread_id"), "record.thread_id")
        yield Op(
            partial(admission.record_task_writes, rules=self.rules, record=record), write=True
        )

    def record_checkpoint_moved(
        self,
        thread_id: str,
        checkpoint_id: str,
        checkpoint_ns: str = "",
        *,
        source: str | None = None,
        actor: str | None = None,
    ) -> Plan[None]:
        """A graph wrote a checkpoint after ``checkpoint_id`` (the recording checkpointer)."""
        t = validation.required_id(thread_id, "thread_id")
        fn = partial(
            admission.record_checkpoint_moved,
            thread_id=t,
            checkpoint_id=str(checkpoint_id),
            checkpoint_ns=str(checkpoint_ns or ""),
            source=source,
            actor=validation.text_id(actor, "actor", optional=True),
        )
        yield Op(fn, write=True, settled=partial(admission.moved_settled, thread_id=t, checkpoint_id=str(checkpoint_id)))

    def interrupt_record(self, thread_id: str, interrupt_id: str) -> Plan[dict[str, Any] | None]:
        """The mint of an interrupt: its data, the requester (``actor``), or None."""
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        record: dict[str, Any] | None = yield Op(
            partial(admission.interrupt_record, thread_id=t, interrupt_id=i), write=False
        )
        return record

    def sweep(
        self,
        *,
        ttl_seconds: float | None = None,
        dry_run: bool = False,
        batch_size: int = 500,
        on_expired: OnExpired | None = None,
        thread_ids: list[str] | tuple[str, ...] | set[str] | frozenset[str] | None = None,
        graph: str | None = None,
    ) -> Plan[SweepReport]:
        """Expire every stale pending interrupt (TTL passed or run moved on).

        ``on_expired(thread_id, interrupt_id, reason)`` is called after each batch of
        expiries is committed (use :func:`~symfonic_store.make_graph_waker` to wake the
        graphs; the async store awaits a coroutine function); a callback that raises is
        reported in ``wake_failures``. ``thread_ids`` limits the sweep to those threads:
        nothing is read from or written to any other thread.

        Wake-ups are at-least-once: each expiry records the wake-up it owes in the same
        transaction, and the record is deleted only once ``on_expired`` returned. A sweep
        with ``on_expired`` first delivers the wake-ups earlier sweeps still owe (a
        commit whose acknowledgement was lost, a callback that raised, a sweep without a
        callback), listed in ``redelivered``; ``owed`` counts what is still owed after
        it. A wake-up whose callback raises stays owed and is tried once per sweep.

        A wake-up is owed to the graph whose name the interrupt's mint recorded.
        ``graph`` names the graph ``on_expired`` wakes (a gateway's ``waker()`` names its
        own): only wake-ups owed to it, or to no named graph, are handed to the
        callback; the others stay owed (``owed_to`` says to whom). A callback that
        returns :data:`~symfonic_store.NOT_HELD` (its graph's checkpointer does not hold
        the thread) leaves that wake-up owed too, listed in ``not_held``. Without
        ``graph`` the callback gets every wake-up.

        Each batch is its own transaction. A store error after a batch committed raises
        :class:`~symfonic_store.SweepIncompleteError`, whose ``report`` lists what was
        committed; when nothing was written the error itself is raised.

        Raises:
            InvalidInputError: a bad TTL, batch size, dry-run flag, callback, thread ids or
                graph name.
            SweepIncompleteError: the sweep stopped partway (see above).
            DatabaseError, SchemaNotMigratedError: it failed before writing anything.
        """
        if not isinstance(dry_run, bool):
            raise InvalidInputError("dry_run", "must be True or False")
        size = validation.positive_int(batch_size, "batch_size")
        assert size is not None
        if on_expired is not None and not callable(on_expired):
            raise InvalidInputError(
                "on_expired", "must be None or a callable(thread_id, interrupt_id, reason)"
            )
        ttl = self.ttl(ttl_seconds)
        only = validation.thread_ids(thread_ids)
        if graph is None:
            graph = getattr(on_expired, "graph_name", None)
        if graph is not None:
            graph = validation.required_id(graph, "graph")
        report = SweepReport(dry_run=dry_run, ttl_seconds=ttl, owed=0)
        wake = None if dry_run else on_expired
        claim = None if wake is None else WakeClaim()
        try:
            for scope in _scopes(only):
                if wake is not None and claim is not None:
                    yield from _deliver_owed(report, wake, claim, scope, size, graph)
                settle = getattr(wake, "settle_claim", None)
                if callable(settle):
                    yield from _settle_claims(report, settle, scope)
                if not dry_run:
                    yield from _mark_unknown(report, scope)
                after = ""
                while True:
                    batch = yield Op(
                        partial(
                            sweep_batch,
                            ttl_seconds=ttl,
                            after_thread=after,
                            batch_size=size,
                            dry_run=dry_run,
                            thread_ids=scope,
                            claim=claim,
                        ),
                        write=not dry_run,
                    )
                    report.expired.extend(batch.expired)
                    if wake is not None and claim is not None:
                        yield from _wake(report, wake, claim, batch.to_wake, owed_before=False)
                    if batch.last_thread is None:
                        break
                    after = batch.last_thread
                # LangGraph's own interrupts: the TTL applies to them too (SPEC §8).
                native_after: tuple[str, str] = ("", "")
                while ttl is not None:
                    nbatch = yield Op(
                        partial(
                            sweep_native_batch,
                            ttl_seconds=ttl,
                            after=native_after,
                            batch_size=size,
                            dry_run=dry_run,
                            thread_ids=scope,
                            claim=claim,
                            graph=graph,
                        ),
                        write=not dry_run,
                    )
                    report.expired.extend(nbatch.expired)
                    if wake is not None and claim is not None:
                        yield from _wake(report, wake, claim, nbatch.to_wake, owed_before=False)
                    if nbatch.last_key is None:
                        break
                    native_after = nbatch.last_key
                owed: dict[str | None, int] = yield Op(
                    partial(count_owed, thread_ids=scope), write=False
                )
                report.owed = (report.owed or 0) + sum(owed.values())
                for owed_graph, n in owed.items():
                    report.owed_to[owed_graph] = report.owed_to.get(owed_graph, 0) + n
        except SymfonicStoreError as exc:
            # Batches are separate transactions: what committed stays committed, so the
            # caller must learn it even though a later batch failed.
            failed = SweepIncompleteError(report, exc)
            if claim is not None:
                # Let go of what this sweep holds, so the next one need not wait out the
                # lease; if the database is gone too, the lease runs out instead.
                with contextlib.suppress(SymfonicStoreError):
                    yield Op(partial(let_go, claim=claim), write=True)
            touched = (
                report.expired or report.redelivered or report.wake_failures or report.claims_settled
            )
            if not touched and not failed.outcome_unknown:
                raise  # nothing of this sweep was written or called, and that is known
            report.complete = False
            report.owed = None
            report.owed_to = {}
            raise failed from None
        return report

    def rebuild_projection(
        self, *, progress: Progress | None = None, force: bool = False
    ) -> Plan[int]:
        """Rebuild the projection from the events; returns the number of events folded.

        ``progress(folded)`` is called as batches are written. A projection head that
        the events no longer reach (a thread's last events removed, or its last event
        rewritten) is the only trace of that change, so the rebuild refuses to erase it
        unless ``force`` is True.

        Raises:
            ProjectionMismatchError: such a head exists and ``force`` is False; nothing
                was changed (``verify()`` names the threads).
        """
        if not isinstance(force, bool):
            raise InvalidInputError("force", "must be True or False")
        folded: int = yield Op(partial(rebuild, progress=progress, force=force), write=True)
        return folded

    # --- reads ----------------------------------------------------------------

    def _thread(self, thread_id: Any) -> Op[ThreadState | None]:
        t = validation.required_id(thread_id, "thread_id")
        return Op(partial(load_thread, thread_id=t, for_update=False), write=False)

    def pending(self, thread_id: str) -> Plan[dict[str, Any] | None]:
        """The thread's projected ``_interrupt_pending`` (the seed's shape), or None."""
        thread = yield self._thread(thread_id)
        pending: dict[str, Any] | None = _state_of(thread)[PENDING_KEY]
        return pending

    def state(self, thread_id: str) -> Plan[dict[str, Any]]:
        """``{"_interrupt_pending": ..., "run_id": ...}`` as projected from the events."""
        thread = yield self._thread(thread_id)
        return _state_of(thread)

    def is_current(self, thread_id: str, ttl_seconds: float | None = None) -> Plan[bool]:
        """The seed predicate on the projected state (the store's TTL by default)."""
        ttl = self.ttl(ttl_seconds)
        thread = yield self._thread(thread_id)
        return interrupt_pending_is_current(_state_of(thread), ttl)

    def list_pending(
        self, *, older_than: float | None = None, limit: int | None = None
    ) -> Plan[list[dict[str, Any]]]:
        """Pending interrupts across all threads, oldest first: each marker plus ``thread_id``."""
        age = validation.ttl(older_than, "older_than")
        n = validation.positive_int(limit, "limit", optional=True)

        def run(conn: Connection) -> list[dict[str, Any]]:
            since_before = None if age is None else time.time() - age
            rows = pending_threads(conn, since_before=since_before, limit=n)
            markers = [
                (r.pending_since or 0.0, {**(r.pending or {}), "thread_id": r.thread_id})
                for r in rows
            ]
            natives = [
                (row["minted_at"], _native_pending(row))
                for row in read_open_interrupts(conn, since_before=since_before, limit=n)
            ]
            merged = sorted(markers + natives, key=lambda pair: pair[0])
            return [item for _, item in (merged if n is None else merged[:n])]

        items: list[dict[str, Any]] = yield Op(run, write=False)
        return items

    def open_interrupts(self, thread_id: str) -> Plan[list[dict[str, Any]]]:
        """Everything the thread waits on, oldest first: the seed marker and LangGraph's own.

        Each is a dict with ``thread_id``, ``interrupt_id``, ``name``, ``payload``,
        ``minted_at`` (Unix seconds) and ``source`` (``"marker"`` or ``"langgraph"``);
        LangGraph's also carry ``graph``, ``breakpoint``, ``checkpoint_id``, the
        requester (``actor``) and, while an answer is in flight, ``claimed_by``; an
        answer whose outcome is unknown (SPEC §12) adds ``outcome_unknown: True`` and
        ``claimed_at`` (Unix seconds).
        """
        t = validation.required_id(thread_id, "thread_id")

        def run(conn: Connection) -> list[dict[str, Any]]:
            thread = load_thread(conn, t, for_update=False)
            if thread is None:
                return []
            items = []
            if thread.pending is not None:
                items.append(
                    {
                        "thread_id": t,
                        "interrupt_id": thread.pending_interrupt_id,
                        "name": thread.pending.get("name"),
                        "payload": thread.pending.get("payload"),
                        "minted_at": thread.pending_since,
                        "source": MARKER_SOURCE,
                    }
                )
            claims = claim_rows(conn, t)
            for row in open_rows(conn, t):
                item = _native_open(row)
                held = claims.get(row["interrupt_id"])
                if held is not None:
                    item["claimed_by"] = held["actor"]
                    if settlement.unknown_record(conn, t, row["interrupt_id"], held) is not None:
                        item["outcome_unknown"] = True
                        item["claimed_at"] = held["claimed_at"]
                items.append(item)
            return sorted(items, key=lambda i: i["minted_at"] or 0.0)

        items: list[dict[str, Any]] = yield Op(run, write=False)
        return items

    def owed_wakeups(self) -> Plan[int]:
        """How many wake-ups expiries still owe their graphs (delivered by the next sweep
        with a callback; see :meth:`sweep`). Dropped ones are owed to nobody."""
        owed: dict[str | None, int] = yield Op(partial(count_owed, thread_ids=None), write=False)
        return sum(owed.values())

    def list_wakeups(self) -> Plan[list[dict[str, Any]]]:
        """The wake-ups still owed, by graph: dicts with ``graph`` (the name the mint
        recorded, or None), ``thread_id``, ``interrupt_id``, ``reason``, ``expired_at``,
        ``attempts`` and ``last_error``. Dropped ones are not listed."""
        items: list[dict[str, Any]] = yield Op(wakeup_service.owed, write=False)
        return items

    def drop_wakeups(self, *, graph: str | None, actor: str) -> Plan[list[dict[str, Any]]]:
        """Give up every wake-up owed to ``graph`` (None: those whose mint names no graph),
        recording ``actor`` and the time in the wake-up table; returns them (as
        :meth:`list_wakeups`). Dropped wake-ups are no longer owed, delivered or counted.

        Raises:
            InvalidInputError: a bad actor or graph name, or no wake-up is owed to ``graph``
                (the message lists the graphs that are owed some); nothing was changed.
        """
        a = validation.required_id(actor, "actor")
        g = None if graph is None else validation.required_id(graph, "graph")
        dropped: list[dict[str, Any]] = yield Op(
            partial(wakeup_service.drop, graph=g, actor=a), write=True
        )
        return dropped

    def history(self, thread_id: str) -> Plan[list[StoredEvent]]:
        """The thread's events in order."""
        t = validation.required_id(thread_id, "thread_id")
        events: list[StoredEvent] = yield Op(
            partial(read_page, query=thread_events_query(t)), write=False
        )
        return events

    def events(self, *, after: int = 0, limit: int | None = None) -> Plan[list[StoredEvent]]:
        """Events after a global position, in a commit-safe order (page with ``limit``).

        Pass the position of the last event you saw as ``after``: each event comes once,
        and one that commits late is never skipped (I11). On SQLite the order is
        position order; on PostgreSQL, whose writers commit in parallel, it is commit-safe
        order -- position order within each thread, though positions across threads may
        then not be strictly increasing (see docs/reliability.md).
        """
        a = validation.non_negative_int(after, "after")
        n = validation.positive_int(limit, "limit", optional=True)
        events: list[StoredEvent] = yield Op(partial(events_after, after=a, limit=n), write=False)
        return events

    def iter_events(self, *, after: int = 0, page_size: int = PAGE_SIZE) -> Plan[None]:
        """Every event after ``after`` in the order of :meth:`events`, page by page."""
        cursor = validation.non_negative_int(after, "after")
        size = validation.positive_int(page_size, "page_size")
        assert size is not None
        while True:
            page: list[StoredEvent] = yield Op(
                partial(events_after, after=cursor, limit=size), write=False
            )
            yield Emit(page)
            if len(page) < size:
                return
            cursor = page[-1].position

    def reader_lag(self) -> Plan[ReaderLag]:
        """How far gap-safe readers are behind the log, for monitoring (``/metrics``).

        On PostgreSQL :meth:`events` returns an event only once every write transaction
        of the store that started before it has ended (I11): a writer that stays open
        holds readers back. The report says how many committed events wait, and for how
        long the oldest writer still in flight has been open. Always zero on SQLite.
        """

        def run(conn: Connection) -> ReaderLag:
            if not executor_for(conn).reads_below_horizon:
                return ReaderLag(events=0, writers=0, oldest_writer_seconds=None)
            horizon = read_horizon(conn)
            return ReaderLag(
                events=events_behind_horizon(conn, horizon),
                writers=horizon.writers,
                oldest_writer_seconds=horizon.oldest_writer_seconds,
            )

        lag: ReaderLag = yield Op(run, write=False)
        return lag

    def replay(self, thread_id: str, *, until: int | datetime | None = None) -> Plan[None]:
        """Each event of the thread with the state after it; ``until`` a position or time.

        Iterate the result (``async for`` on the async store, or ``await`` it for a
        list). The events are read in pages by version, each page in a short read.
        """
        t = validation.required_id(thread_id, "thread_id")
        bound = validation.as_of(until)
        if isinstance(bound, datetime):
            query = thread_events_query(t, until_time=bound)
        else:
            query = thread_events_query(t, until_position=bound)
        fold = Replay(t)
        last_version = 0
        while True:
            page_query = query.where(query.selected_columns.version > last_version).limit(PAGE_SIZE)
            page: list[StoredEvent] = yield Op(partial(read_page, query=page_query), write=False)
            yield Emit(fold.steps(page))
            if len(page) < PAGE_SIZE:
                return
            last_version = page[-1].version

    def audit(
        self,
        *,
        thread_id: str | None = None,
        actor: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        decision: str | None = None,
    ) -> Plan[list[AuditRecord]]:
        """One record per interrupt, oldest first: who answered what, and when.

        ``decision`` keeps the records whose reported decision (recorded or derived,
        SPEC §12) is exactly that word."""
        fn = partial(
            audit,
            thread_id=validation.text_id(thread_id, "thread_id", optional=True),
            actor=validation.text_id(actor, "actor", optional=True),
            since=validation.moment(since, "since"),
            until=validation.moment(until, "until"),
            decision=validation.text_id(decision, "decision", optional=True),
        )
        records: list[AuditRecord] = yield Op(fn, write=False)
        return records

    def verify(self, thread_id: str | None = None) -> Plan[VerifyReport]:
        """Check the hash chains, and each thread's projection head against its last event.

        The report names the first problem per thread: a broken link of its chain, or a
        projection head its events no longer reach (events removed from the end of the
        thread). With ``thread_id``, a thread that has no events is a problem too.
        """
        t = validation.text_id(thread_id, "thread_id", optional=True)
        report: VerifyReport = yield Op(partial(verify, thread_id=t), write=False)
        return report


    # --- evidence (SPEC §10) ----------------------------------------------------

    def checkpoint(
        self,
        private_key: Any,
        *,
        previous: Any = None,
        full: bool = False,
        chain: str | os.PathLike[str] | None = None,
        public_keys: Sequence[Any] = (),
    ) -> Plan[Checkpoint]:
        """Take and sign a checkpoint of the whole log up to its current position.

        ``private_key`` is an Ed25519 private key, its PEM (bytes) or the path of its PEM
        file (``symfonic-store keygen`` makes one). The checkpoint follows the latest one
        the store recorded; ``previous`` (a checkpoint, its file or its JSON) pins which
        one that must be. ``full`` recomputes every thread's head from the log instead of
        the threads changed since the previous checkpoint (a new start after a refusal).
        Keep the returned document outside the database (``checkpoint.to_json()``).

        ``chain`` (a folder; instead of ``previous``) follows the newest checkpoint file
        there that the key signed, whatever the database recorded, and writes the new one
        into it; other files there are passed over with an :class:`IgnoredCheckpointFile`
        warning, except files signed by one of ``public_keys`` (the old key after a
        rotation). ``full`` then recomputes every head, still only once the log is
        proven to extend that file.

        Raises:
            EvidenceError: the log no longer extends the latest checkpoint (with
                ``chain``: the folder's newest, even if the database lost its record),
                the state kept for it was altered, or ``previous`` is not the latest;
                nothing is signed or written.
            InvalidInputError: not an Ed25519 private key, a bad ``previous``, or
                ``chain`` with ``previous`` or not a writable folder, or
                ``public_keys`` without ``chain`` or not public keys.
        """
        key = evidence.load_private_key(private_key)
        pinned = None if previous is None else checkpoint_arg(previous, "previous")
        if not isinstance(full, bool):
            raise InvalidInputError("full", "must be True or False")
        if chain is not None and pinned is not None:
            raise InvalidInputError("chain", "replaces previous: give one of them")
        if isinstance(public_keys, str | bytes) or (public_keys and chain is None):
            raise InvalidInputError("public_keys", "is a list of public keys, and counts only with chain")
        also = evidence.keys_by_id(public_keys)
        found = None if chain is None else chaining.open_chain(chain, key, also=also)
        follow = None if found is None else found.follow
        try:
            taken: Checkpoint = yield Op(
                partial(evidence.take, key=key, previous=pinned, full=full, now=utc_now(), follow=follow),
                write=True,
                appends=False,
            )
            if found is not None:
                found.keep(taken)
        finally:
            if found is not None:
                found.close()
        return taken

    def verify_chain(
        self,
        chain: str | os.PathLike[str],
        *,
        public_keys: Sequence[Any],
        archives: Sequence[Any] = (),
        thread_id: str | None = None,
    ) -> Plan[chaining.ChainReport]:
        """Check a chain folder: every file signed by one of ``public_keys`` and naming the
        one before it, and the log against the newest (and against the file before any
        ``full`` restart, which did not prove the log extended it).

        Raises:
            InvalidInputError: ``chain`` is not a folder; no or bad public keys.
        """
        if isinstance(public_keys, str | bytes) or not public_keys:
            raise InvalidInputError("public_keys", "must list at least one public key")
        found = chaining.read_chain(chaining.chain_folder(chain, writable=False), evidence.keys_by_id(public_keys))
        report = chaining.ChainReport(found.folder, len(found.files), found.ignored, chaining.chain_problems(found))
        newest = found.newest
        for checked in [*chaining.restarts(found), *([] if newest is None else [newest])]:
            result: CheckpointReport = yield from self.verify_checkpoint(
                checked.checkpoint, public_keys=public_keys, archives=archives,
                thread_id=thread_id, chain=list(found.known().values()),
            )
            result.source = f"checkpoint {str(checked.path)!r}"
            report.reports.append(result)
        return report

    def verify_checkpoint(
        self,
        checkpoint: Any,
        *,
        public_keys: Sequence[Any],
        archives: Sequence[Any] = (),
        thread_id: str | None = None,
        chain: Sequence[Any] = (),
    ) -> Plan[CheckpointReport]:
        """Check that the log still holds, unchanged, everything ``checkpoint`` committed to.

        ``public_keys``: the keys that may have signed it (several when keys rotated).
        ``archives``: archive files holding threads removed since the checkpoint was
        taken. ``chain``: earlier checkpoints (or files), used to name what differs when
        the store's own record of them is gone. Events appended after the checkpoint are
        not flagged; one pass reads the events it covers (``thread_id``: that thread's).

        Raises:
            EvidenceError: ``checkpoint`` is not a checkpoint document.
            InvalidInputError: no public key, or one that is not an Ed25519 public key.
        """
        cp = checkpoint_arg(checkpoint, "checkpoint")
        if isinstance(public_keys, str | bytes) or not public_keys:
            raise InvalidInputError("public_keys", "must list at least one public key")
        keys = evidence.keys_by_id(public_keys)
        t = validation.text_id(thread_id, "thread_id", optional=True)
        known = {c.id: c for c in (checkpoint_arg(c, "chain") for c in chain)}
        read: list[archiving.Archive] = []
        failed = CheckpointReport(cp, thread_id=t)
        for source in archives:
            check = archiving.verify_archive(_path(source, "archives"), keys if _signed_by_given(source, keys) else None)
            if check.ok and check.archive is not None:
                read.append(check.archive)
            else:
                failed.problems.extend(CheckpointProblem(None, None, f"archive {str(check.path)!r}: {p}") for p in check.problems)
        if failed.problems:
            return failed
        report: CheckpointReport = yield Op(
            partial(
                evidence.verify_checkpoint,
                checkpoint=cp,
                keys=keys,
                archives=read,
                known=known,
                thread_id=t,
            ),
            write=False,
        )
        return report

    def archive(
        self, before: datetime | str, out: str | os.PathLike[str], *, key: Any = None
    ) -> Plan[ArchiveResult]:
        """Move whole finished threads whose last event is before ``before`` into an archive.

        Writes a JSON Lines archive to ``out`` (gzip when it ends in ``.gz``; never over an
        existing file) with a manifest signed by ``key`` (optional), reads it back and
        verifies it, then removes those threads' events in one transaction. Each thread's
        projection head stays, marked archived, so a later event chains on from it;
        ``verify`` keeps passing, and older checkpoints do with ``archives=[out]``.

        Raises:
            InvalidInputError: a bad time, path or key, or ``out`` exists.
            EvidenceError: a thread's chain does not hold, or the written archive does not
                verify; nothing is removed (and the file is deleted).
            ConcurrencyConflictError: a thread changed meanwhile; nothing is removed.
        """
        moment = validation.moment(before, "before")
        if moment is None:
            raise InvalidInputError("before", "is required (an ISO 8601 time)")
        path = _path(out, "out")
        if path.exists():
            raise InvalidInputError("out", f"{str(path)!r} exists: an archive is never overwritten")
        signer = None if key is None else evidence.load_private_key(key)
        now = utc_now()
        found: list[tuple[str, int, str]] = yield Op(partial(archiving.candidates, before=moment), write=False)
        result = ArchiveResult(path=None, before=moment)
        if not found:
            return result
        written: archiving.Archive = yield Op(
            partial(archiving.write, path=path, threads=found, before=moment, now=now, key=signer),
            write=False,
        )
        keys = None if signer is None else {evidence.key_id(signer.public_key()): signer.public_key()}
        check = archiving.verify_archive(path, keys)
        if not check.ok or check.archive is None or check.archive.root != written.root:
            path.unlink(missing_ok=True)
            raise EvidenceError(f"the archive did not verify after writing, so nothing was removed: {check}")
        try:
            removed: int = yield Op(
                partial(_remove_archived, archive=check.archive, now=now), write=True, appends=False
            )
        except SymfonicStoreError as exc:
            if not (isinstance(exc, DatabaseError) and exc.outcome_unknown):
                path.unlink(missing_ok=True)  # nothing was removed: the file archives nothing
            raise
        return ArchiveResult(
            path=path,
            before=moment,
            threads=sorted(check.archive.heads),
            events=check.events,
            removed=removed,
            root=check.archive.root,
            signed=signer is not None,
        )


def checkpoint_arg(value: Any, field: str) -> Checkpoint:
    """A checkpoint given as itself, its JSON object or text, or the path of its file."""
    if isinstance(value, Checkpoint):
        return value
    if isinstance(value, Mapping):
        return evidence.parse_checkpoint(value)
    if isinstance(value, str) and value.lstrip().startswith("{"):
        return evidence.parse_checkpoint(value)
    path = _path(value, field)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(field, f"cannot read {str(path)!r}: {exc.strerror}") from None
    return evidence.parse_checkpoint(text, what=f"checkpoint file {str(path)!r}")


def _path(value: Any, field: str) -> Path:
    if isinstance(value, str | os.PathLike) and str(value):
        return Path(value)
    raise InvalidInputError(field, f"must be a path, got {type(value).__name__}")


def _signed_by_given(source: Any, keys: Mapping[str, Any]) -> bool:
    """Check an archive's signature only when one of the given keys made it: otherwise the
    checkpoint alone vouches for its content (an archive may be made without a key)."""
    try:
        return archiving.read_archive(_path(source, "archives")).key_id in keys
    except EvidenceError:
        return False


def _remove_archived(conn: Connection, *, archive: archiving.Archive, now: datetime) -> int | Refusal:
    try:
        return archiving.remove(conn, archive=archive, now=now)
    except ConcurrencyConflictError as exc:
        # A thread changed since it was written: trying again cannot make the file match.
        return Refusal(exc)


class Integrations:
    """What both stores offer that is not a database operation: LangGraph integrations."""

    def recording_checkpointer(self, saver: Any) -> Any:
        """A checkpointer that delegates to ``saver`` and records what bypasses the gateway.

        Every interrupt a graph compiled with it raises, and every answer LangGraph
        consumes, is recorded whoever invoked the graph: the actor is
        ``config["configurable"]["actor"]`` when given, and such answers carry
        ``via: "direct"`` (see :mod:`symfonic_store.langgraph.recording`). With an
        asyncio store, run the graph with ``ainvoke``/``astream``.
        """
        from ..langgraph.recording import RecordingCheckpointer

        return RecordingCheckpointer(saver, self)  # type: ignore[arg-type]

    def checkpointer(self) -> Any:
        """A LangGraph checkpointer that keeps the graph's checkpoints in this store's database.

        Each step's checkpoint and the events the step caused (route decisions, mints,
        the confirmation of an admitted answer) commit in one transaction: no commit of
        the store's own per step, and no instant at which the audit and the graph's
        state disagree. The checkpoints sit in the tables of LangGraph's own SQLite or
        PostgreSQL saver, written by their SQL and serialised by their JSON-plus
        serialiser (never pickle). Answers are still admitted before the graph runs
        (``resume``, the gateway's claim). It also offers ``copy_thread``,
        ``delete_for_runs`` and ``prune``; none of them deletes an event. On the
        asyncio store it is the async twin (``ainvoke``/``astream``); see
        :mod:`symfonic_store.langgraph.checkpointer`.
        """
        from ..langgraph.checkpointer import checkpointer_for

        return checkpointer_for(self)  # type: ignore[arg-type]


# --- turning plans into methods of the two runners -----------------------------------


def start(plan: Plan[None]) -> tuple[Plan[None], Step | None]:
    """Run a streaming plan to its first step now, so bad arguments fail at the call."""
    return plan, advance(plan, None, None)


def advance(plan: Plan[Any], result: Any, error: BaseException | None) -> Step | None:
    """Send a step's result (or throw its error) into a streaming plan: its next step."""
    try:
        return plan.send(result) if error is None else plan.throw(error)
    except StopIteration:
        return None


PlanFn = Callable[Concatenate[Operations, P], Plan[T]]


def copy_face(method: Callable[..., Any], plan: Callable[..., Any], returns: str | None = None) -> None:
    """Give a runner's method the plan's name, docstring and signature (``self`` = the store).

    The return annotation is what the method returns: ``T`` of the plan's ``Plan[T]``,
    or ``returns`` when given (the iterators of streaming plans).
    """
    functools.update_wrapper(
        method, plan, assigned=("__name__", "__qualname__", "__doc__"), updated=()
    )
    signature = inspect.signature(plan)
    annotation = signature.return_annotation
    if returns is not None:
        annotation = returns
    elif isinstance(annotation, str) and annotation.startswith("Plan[") and annotation.endswith("]"):
        annotation = annotation[len("Plan[") : -1]
    method.__signature__ = signature.replace(return_annotation=annotation)  # type: ignore[attr-defined]
