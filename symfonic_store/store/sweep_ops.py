"""The plans of the sweep and the wake-ups it owes, and of the projection's rebuild."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from .. import validation
from ..db.statements.chase import ChaseKey
from ..errors import (
    InvalidInputError,
    SweepIncompleteError,
    SymfonicStoreError,
)
from ..policy import Policy, policy_of
from ..services import chase as chase_service
from ..services import wakeups as wakeup_service
from ..services.rebuild import Progress, rebuild
from ..services.sweep import (
    CLAIM_LEASE_SECONDS,
    FIRST_MARKERS,
    NOT_HELD,
    WakeClaim,
    claim_owed,
    count_owed,
    let_go,
    settle_wakeup,
    sweep_batch,
    sweep_native_batch,
)
from ..sweep_report import Expiry, SweepReport
from ..tracing import span
from . import settlement
from .plan import Call, OnExpired, Op, Plan
from .settings import Settings

if TYPE_CHECKING:
    pass


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
    # Alike mark_lapsed's step in shape, deliberately: this one only reads the lapsed claims.
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
    # Alike the reading step above in shape, deliberately: this one writes the marks.
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



def _expire_batches(
    report: SweepReport,
    wake: OnExpired | None,
    claim: WakeClaim | None,
    dry_run: bool,
    expire: Callable[..., Any],
    cursor: tuple[str, Any, str],
) -> Plan[None]:
    """Expire batch after batch (each its own transaction), waking each batch's
    expiries once it committed. ``cursor`` is the keyset cursor: the keyword that takes
    it, where it starts, and the batch attribute naming the next one (None: the last)."""
    keyword, after, last = cursor
    while True:
        batch = yield Op(partial(expire, **{keyword: after}), write=not dry_run)
        report.expired.extend(batch.expired)
        if wake is not None and claim is not None:
            yield from _wake(report, wake, claim, batch.to_wake, owed_before=False)
        after = getattr(batch, last)
        if after is None:
            return


def _chase(
    report: SweepReport, policy: Policy, dry_run: bool, size: int, scope: tuple[str, ...] | None
) -> Plan[None]:
    """Remind of and escalate what the policy says (SPEC §14), page after page: each page
    read, then what it is due for recorded in its own transaction (decided again under
    each thread's lock, see :mod:`~symfonic_store.services.chase`). A dry run leaves out
    what it would expire."""
    skip = {(t, i) for t, i, _ in report.expired} if dry_run else set()
    for native in (False, True):
        after: ChaseKey | None = None
        while True:
            page: chase_service.ChasePage = yield Op(
                partial(
                    chase_service.chase_page, policy=policy, native=native, after=after,
                    limit=size, thread_ids=scope, skip=skip,
                ),
                write=False,
            )
            recorded = page.due
            if page.due and not dry_run:
                recorded = yield Op(
                    partial(chase_service.record, items=page.due, native=native), write=True
                )
            for item in recorded:
                item.report_to(report)
            if page.last_key is None:
                break
            after = page.last_key


def _traced(report: SweepReport, sweep: Any) -> None:
    """The sweep's span: counts, and an event per interrupt it expired or chased (ids only)."""
    sweep.set_attribute("symfonic.expired", len(report.expired))
    sweep.set_attribute("symfonic.reminded", len(report.reminded))
    sweep.set_attribute("symfonic.escalated", len(report.escalated))
    for kind, items in (
        ("interrupt.expired", report.expired),
        ("interrupt.reminded", report.reminded),
        ("interrupt.escalated", report.escalated),
    ):
        for item in items:
            sweep.add_event(kind, {"symfonic.thread_id": item[0], "symfonic.interrupt_id": item[1]})


class SweepOps(Settings):
    """The sweep, the wake-ups it owes, and the rebuild of the projection."""

    def sweep(
        self,
        *,
        ttl_seconds: float | None = None,
        dry_run: bool = False,
        batch_size: int = 500,
        on_expired: OnExpired | None = None,
        thread_ids: list[str] | tuple[str, ...] | set[str] | frozenset[str] | None = None,
        graph: str | None = None,
        policy: Policy | Mapping[str, Any] | None = None,
    ) -> Plan[SweepReport]:
        """Expire every stale pending interrupt (TTL passed or run moved on), and remind
        of and escalate the open ones the ``policy`` says.

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

        ``policy`` (a :class:`~symfonic_store.policy.Policy` or its JSON object, the
        service's policy file): an interrupt still open ``remind_after`` seconds after its
        mint gets ``interrupt.reminded`` (data ``after``), one open ``escalate_after``
        seconds gets ``interrupt.escalated`` (data ``after`` and ``to``, the
        ``escalate_to`` roles, who may then answer it too), at most once each per
        interrupt, after this sweep's expiries; neither ends it. They are listed in
        ``reminded`` and ``escalated`` (a dry run: what would be recorded).

        Each batch is its own transaction. A store error after a batch committed raises
        :class:`~symfonic_store.SweepIncompleteError`, whose ``report`` lists what was
        committed; when nothing was written the error itself is raised.

        Raises:
            InvalidInputError: a bad TTL, batch size, dry-run flag, callback, thread ids,
                graph name or policy.
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
        rules = policy_of(policy)
        chases = rules if rules is not None and rules.chases else None
        with span("symfonic.sweep", **{"symfonic.dry_run": dry_run}) as traced:
            report = yield from self._sweep(
                ttl, dry_run, size, on_expired, only, graph, chases
            )
            _traced(report, traced)
        return report

    def _sweep(
        self,
        ttl: float | None,
        dry_run: bool,
        size: int,
        on_expired: OnExpired | None,
        only: tuple[str, ...] | None,
        graph: str | None,
        chases: Policy | None,
    ) -> Plan[SweepReport]:
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
                markers = partial(
                    sweep_batch, ttl_seconds=ttl, batch_size=size, dry_run=dry_run,
                    thread_ids=scope, claim=claim,
                )
                yield from _expire_batches(
                    report, wake, claim, dry_run, markers, ("after", FIRST_MARKERS, "last_marker")
                )
                if ttl is not None:  # LangGraph's own interrupts: the TTL applies to them too (SPEC §8)
                    natives = partial(
                        sweep_native_batch, ttl_seconds=ttl, batch_size=size, dry_run=dry_run,
                        thread_ids=scope, claim=claim, graph=graph,
                    )
                    yield from _expire_batches(
                        report, wake, claim, dry_run, natives, ("after", None, "last_key")
                    )
                if chases is not None:
                    yield from _chase(report, chases, dry_run, size, scope)
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
                report.expired or report.redelivered or report.wake_failures
                or report.claims_settled or report.reminded or report.escalated
            )
            if not touched and not failed.outcome_unknown:
                raise  # nothing of this sweep was written or called, and that is known
            report.complete = False
            report.owed = None
            report.owed_to = {}
            raise failed from None
        return report

    def escalations(
        self,
        thread_ids: list[str] | tuple[str, ...] | set[str] | frozenset[str] = (),
        *,
        interrupts: list[tuple[str, str]] | tuple[tuple[str, str], ...] | None = None,
    ) -> Plan[list[dict[str, Any]]]:
        """The sweep's escalations on these threads (SPEC §14), oldest first: dicts with
        ``thread_id``, ``interrupt_id``, ``to`` (the roles) and ``at`` (when). An
        escalated interrupt may be answered by those roles too; the inbox lists it first.
        ``interrupts``: instead, those of these ``(thread_id, interrupt_id)`` only, each
        read among its interrupt's own events (what an inbox page costs: its items).

        Raises:
            InvalidInputError: a bad thread id or interrupt id.
        """
        if interrupts is not None:
            keys = [
                (validation.required_id(t, "thread_id"), validation.required_id(i, "interrupt_id"))
                for t, i in interrupts
            ]
            by_key: list[dict[str, Any]] = yield Op(
                partial(chase_service.escalated_on, thread_ids=(), keys=keys), write=False
            )
            return by_key
        only = validation.thread_ids(thread_ids) or ()
        found: list[dict[str, Any]] = []
        for scope in _scopes(only):
            assert scope is not None
            found.extend((yield Op(partial(chase_service.escalated_on, thread_ids=scope), write=False)))
        return found

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
