"""The plans of LangGraph's own interrupts (SPEC §8): waiting, claims, settlements."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from .. import validation
from ..errors import (
    InvalidInputError,
)
from . import admission, settlement
from .plan import Op, Plan
from .settings import Settings

if TYPE_CHECKING:
    pass


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




class NativeOps(Settings):
    """The writes and reads of native interrupts and their claims (:mod:`.admission`)."""

    def record_waiting(
        self,
        thread_id: str,
        waiting: list[dict[str, Any]],
        *,
        actor: str | None = None,
        graph: str | None = None,
        tenant: str | None = None,
    ) -> Plan[list[str]]:
        """Record what a thread waits on: mint the unseen (for ``tenant``, SPEC §15),
        close what LangGraph dropped.

        ``waiting`` is :func:`~symfonic_store.langgraph.waiting.waiting_on` of the
        thread's state. Returns the ids minted. Used by the gateway after each call.
        A breakpoint item is minted only when ``declared`` (absent: declared) and no
        answer's claim on the thread is live (SPEC §8).
        """
        t = validation.required_id(thread_id, "thread_id")
        items = _waiting_items(waiting, self.max_payload_bytes)
        a = validation.text_id(actor, "actor", optional=True)
        g = None if graph is None else str(graph)[: validation.MAX_ID_LENGTH]
        n = validation.text_id(tenant, "tenant", optional=True)
        minted: list[str] = yield Op(
            partial(
                admission.record_waiting, thread_id=t, waiting=items, actor=a, graph=g, tenant=n
            ),
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
        approvers: tuple[str, ...] | list[str] = (),
    ) -> Plan[dict[str, Any]]:
        """An answer's first phase: claim a LangGraph interrupt for ``response`` (SPEC §8).

        Returns the open interrupt. The claim commits before the graph runs; settle it
        with :meth:`confirm` or :meth:`release`. ``actor`` is recorded as given;
        ``approvers``, a quorum's (SPEC §15), as the answer's ``data["approvers"]``.

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
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        by = validation.authenticated_by(authenticated_by)
        quorum = tuple(validation.required_id(p, "approvers") for p in approvers)
        r = validation.json_value(response, "response", max_bytes=self.max_payload_bytes)
        # A plan step, alike the marker path's in shape only (another rule, its own keywords):
        # deliberately spelled out.
        opened: dict[str, Any] = yield Op(
            partial(
                admission.claim,
                rules=self.rules,
                thread_id=t,
                interrupt_id=i,
                response=r,
                actor=a,
                authenticated_by=by,
                approvers=quorum,
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
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
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
        decision: str | None = None,
        decided_by: str | None = None,
        authenticated_by: str | None = None,
        identity: dict[str, str] | None = None,
    ) -> Plan[None]:
        """A graph wrote a checkpoint after ``checkpoint_id`` (the recording checkpointer);
        ``decision``: what the update decided of what it closes (e.g. ``ignore``), by whom
        (``decided_by``, established as ``authenticated_by`` says). ``identity``: how
        ``actor`` was established (``authenticated_by``, ``claimed_actor``), recorded
        beside it on a breakpoint the graph ran past."""
        t = validation.required_id(thread_id, "thread_id")
        fn = partial(
            admission.record_checkpoint_moved,
            thread_id=t,
            checkpoint_id=str(checkpoint_id),
            checkpoint_ns=str(checkpoint_ns or ""),
            source=source,
            actor=validation.text_id(actor, "actor", optional=True),
            decision=validation.text_id(decision, "decision", optional=True),
            decided_by=validation.text_id(decided_by, "decided_by", optional=True),
            authenticated_by=validation.authenticated_by(authenticated_by),
            identity=admission.valid_identity(identity),
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
