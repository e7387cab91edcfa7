"""The plans of the seed marker's life: mint, route, resume, expire, refusals."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from .. import validation
from ..errors import (
    InvalidInputError,
)
from ..events import REJECTION_WHYS
from ..protocol import PENDING_KEY, normalize_response
from ..services.sweep import CLAIM_LEASE_SECONDS
from ..tracing import span
from . import lifecycle, marker_runs
from .plan import Op, Plan
from .settings import Settings

RESUME_SPAN = "symfonic.resume"
"""The span of ``store.resume`` (:mod:`symfonic_store.tracing`): ids, never the response."""

if TYPE_CHECKING:
    from langgraph.types import Command


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




class MarkerOps(Settings):
    """The writes of the seed marker's lifecycle (:mod:`.lifecycle`)."""

    def mint(
        self,
        thread_id: str,
        marker: dict[str, Any],
        *,
        actor: str | None = None,
        tenant: str | None = None,
    ) -> Plan[bool]:
        """Record ``interrupt.minted``; returns False when the interrupt was already seen.

        ``marker`` is the ``_interrupt_pending`` dict or the whole update containing it.
        Minting while another interrupt is pending expires that one (``superseded``).
        ``tenant``: who may see it through the service (SPEC §15), kept beside the event.

        Raises:
            InvalidMarkerError: not a dict, or ``name``/``interrupt_id`` missing.
            InvalidInputError: a bad thread id, actor or payload.
        """
        t = validation.required_id(thread_id, "thread_id")
        m, encoded = validation.marker_encoded(marker, max_bytes=self.max_payload_bytes)
        a = validation.text_id(actor, "actor", optional=True)
        n = validation.text_id(tenant, "tenant", optional=True)
        minted: bool = yield Op(
            partial(lifecycle.mint, thread_id=t, marker=m, actor=a, encoded=encoded, tenant=n),
            write=True,
            settled=partial(lifecycle.mint_settled, thread_id=t, interrupt_id=m["interrupt_id"]),
            thread=t,
            creates=True,
        )
        return minted

    # A public signature, alike ThreadWriter.__init__ in shape only.
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
        t = validation.required_id(thread_id, "thread_id")
        fn = partial(
            lifecycle.record_route,
            thread_id=t,
            route=validation.route(route),
            run_id=validation.run_id(run_id),
            reason=validation.route_reason(reason),
            interrupt_id=validation.text_id(interrupt_id, "interrupt_id", optional=True),
        )
        yield Op(fn, write=True, thread=t, creates=True)

    def record_router_decision(
        self,
        thread_id: str,
        state: dict[str, Any],
        route: str,
        *,
        ttl_seconds: float | None = None,
        tenant: str | None = None,
        actor: str | None = None,
    ) -> Plan[None]:
        """What a router saw in a graph state, in one transaction (used by the router);
        ``actor``: who ran the graph, the requester of a marker it mints (SPEC §12)."""
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
            tenant=validation.text_id(tenant, "tenant", optional=True),
            actor=validation.text_id(actor, "actor", optional=True),
        )
        yield Op(fn, write=True, thread=t, creates=True)

    def resume(
        self,
        thread_id: str,
        interrupt_id: str,
        response: Any = None,
        *,
        actor: str,
        authenticated_by: str | None = None,
        approvers: tuple[str, ...] | list[str] = (),
    ) -> Plan[Command[Any]]:
        """Admit a person's answer exactly once; returns the ``Command`` to resume the graph.

        ``None`` (or a field-less model) is an acknowledgement. Repeating the identical
        call returns the same command without a new event. ``actor`` is recorded as
        given: the caller vouches for it (the HTTP service passes the authenticated one,
        and says how it authenticated it in ``authenticated_by``, e.g. ``service:jwt``).
        The answer's decision is recorded with it (SPEC §12); ``approvers``, the
        principals whose votes completed a quorum (SPEC §15), as ``data["approvers"]``.

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
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        by = validation.authenticated_by(authenticated_by)
        quorum = tuple(validation.required_id(p, "approvers") for p in approvers)
        r, r_json = validation.json_encoded(
            response_dict(response), "response", max_bytes=self.max_payload_bytes
        )
        # A plan step, alike its neighbours in shape only (another rule, its own keywords):
        # deliberately spelled out.
        with span(RESUME_SPAN, **{"symfonic.thread_id": t, "symfonic.interrupt_id": i}):
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
                    approvers=quorum,
                ),
                write=True,
                thread=t,
            )
        from langgraph.types import Command  # the graph machinery only when a command is made

        from ..protocol import encode_resume

        return Command(resume=encode_resume(admitted))

    def admit_node_resume(
        self,
        thread_id: str,
        pending: dict[str, Any],
        resume_value: Any,
        *,
        actor: str | None,
        authenticated_by: str | None = None,
    ) -> Plan[dict[str, Any]]:
        """The interrupt node's check of an answer it received (see create_interrupt_node);
        ``authenticated_by``: how ``actor`` was established (``agent-server`` for the Agent
        Server's authenticated user), None when the caller named it."""
        t = validation.required_id(thread_id, "thread_id")
        if not isinstance(pending, dict):
            raise InvalidInputError("state._interrupt_pending", "must be a dict marker")
        i = validation.required_id(pending.get("interrupt_id"), "marker.interrupt_id")
        a = validation.text_id(actor, "actor", optional=True)
        by = validation.authenticated_by(authenticated_by)
        # What the seed node hands the agent (N2), as the JSON the store records.
        response, response_json = validation.json_encoded(
            recorded_response(resume_value) if resume_value is not None else {},
            "response",
            max_bytes=self.max_payload_bytes,
        )
        # A plan step, alike the resume above in shape only (the node's keywords): deliberately
        # spelled out.
        fn = partial(
            lifecycle.resume,
            rules=self.rules,
            thread_id=t,
            interrupt_id=i,
            response=response,
            actor=a,
            from_node=True,
            response_json=response_json,
            authenticated_by=by,
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
        t = validation.required_id(thread_id, "thread_id")
        fn = partial(
            lifecycle.expire,
            thread_id=t,
            interrupt_id=validation.required_id(interrupt_id, "interrupt_id"),
            reason=validation.expiry_reason(reason),
            actor=validation.text_id(actor, "actor", optional=True),
        )
        yield Op(fn, write=True, thread=t)

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
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
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
        yield Op(fn, write=True, thread=t)

    def claim_marker_run(
        self,
        thread_id: str,
        interrupt_id: str,
        response: Any = None,
        *,
        actor: str,
        authenticated_by: str | None = None,
    ) -> Plan[bool]:
        """Claim the run of a seed marker's graph for ``actor``'s answer (SPEC §9).

        What the approval service does before it answers a marker its ``--graph`` waits
        on and runs that graph (:mod:`.marker_runs`): one answer holds the marker at a
        time, until :meth:`end_marker_run`; a claim whose process died is taken over once
        the sweep's claim lease ran out. Returns True.

        Raises:
            InterruptInProgressError: another answer holds the claim (recorded as
                ``in_progress``).
            UnknownInterruptError: nothing with that id was minted on the thread
                (nothing written).
        """
        t, i, a = validation.answer_ids(thread_id, interrupt_id, actor)
        by = validation.authenticated_by(authenticated_by)
        r = validation.json_value(response, "response", max_bytes=self.max_payload_bytes)
        claimed: bool = yield Op(
            partial(
                marker_runs.claim_run, thread_id=t, interrupt_id=i, response=r, actor=a,
                lease_seconds=CLAIM_LEASE_SECONDS, authenticated_by=by,
            ),
            write=True,
        )
        return claimed

    def end_marker_run(self, thread_id: str, interrupt_id: str) -> Plan[bool]:
        """Drop the claim of :meth:`claim_marker_run` once the graph returned (or did not
        run); False when none was held."""
        t = validation.required_id(thread_id, "thread_id")
        i = validation.required_id(interrupt_id, "interrupt_id")
        ended: bool = yield Op(
            partial(marker_runs.end_run, thread_id=t, interrupt_id=i), write=True
        )
        return ended
