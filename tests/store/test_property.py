"""Property test: random interrupt lives against a plain reference model (invariant I6, I7).

Hypothesis draws sequences of mint / route decision / resume / expire / sweep on a few
threads while a frozen clock moves (the strategies, one per event type, are in
``strategies.py``; a type registered at test time is drawn and appended too). After every step the persisted projection, the
projection after ``rebuild_projection()`` and the pure fold of the thread's history must
agree with each other and with a reference model kept in a plain dict, and
``store.is_current`` must equal the seed predicate evaluated on that reference state.
Each example uses thread ids of its own, so examples share one migrated database.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory
from hypothesis import HealthCheck, given, settings
from langgraph.types import Command
from strategies import STORE_TTL, THREADS, append_event, missing, steps, throwaway_type

from symfonic_store import (
    ASSIGNED,
    ESCALATED,
    EXPIRED,
    INTERRUPT_ACK_SENTINEL,
    REMINDED,
    RESUMED,
    VOTED,
    InterruptAlreadyResolvedError,
    InterruptExpiredError,
    InterruptStore,
    UnknownInterruptError,
    build_interrupt_marker,
    interrupt_pending_is_current,
)
from symfonic_store.event_types import EventType, spec_of
from symfonic_store.projection import fold
from symfonic_store.protocol import stale_reason, ttl_passed
from symfonic_store.store.vote_ops import AlreadyVotedError

START = "2030-01-01 00:00:00"


@dataclass
class RefThread:
    """What the test believes about one thread, from the operations and the store's answers."""

    pending: dict[str, Any] | None = None
    run_id: str | None = None
    minted: list[str] = field(default_factory=list)
    ended: dict[str, tuple[str, Any, Any]] = field(default_factory=dict)
    """interrupt id -> ("resumed", actor, response) or ("expired", reason, None)"""
    since: float | None = None
    """What the pending interrupt's age counts from (its numeric minted_at, else its mint's time)."""
    chased: dict[str, list[str]] = field(default_factory=dict)
    """interrupt id -> the reminder and escalation types recorded for it, in order"""
    handed: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)
    """interrupt id -> its assignments and votes, in order: ("assigned", to, kind) or ("voted", actor, decision)"""

    def state(self) -> dict[str, Any]:
        return {"_interrupt_pending": self.pending, "run_id": self.run_id}

    def end(self, interrupt_id: str, ending: tuple[str, Any, Any]) -> None:
        assert interrupt_id not in self.ended
        self.ended[interrupt_id] = ending
        if self.pending is not None and self.pending["interrupt_id"] == interrupt_id:
            self.pending = None


class Example:
    """One drawn sequence of operations, applied to the store and to the reference model."""

    def __init__(self, store: InterruptStore, plain: InterruptStore, clock: FrozenDateTimeFactory) -> None:
        self.store = store  # the store's TTL is STORE_TTL
        self.plain = plain  # the same database, no TTL
        self.clock = clock
        prefix = uuid.uuid4().hex[:10]
        self.threads = [f"p-{prefix}-{k}" for k in range(THREADS)]
        self.ref = {t: RefThread() for t in self.threads}
        self.counter = 0

    # --- choosing ids ---------------------------------------------------------------

    def _new_id(self) -> str:
        self.counter += 1
        return f"i-{self.counter:03d}"

    def _thread_for_answer(self, k: int) -> str:
        """Thread ``k``, or another one when ``k`` has nothing minted yet (answers need one)."""
        with_mints = [t for t in self.threads if self.ref[t].minted]
        if self.ref[self.threads[k]].minted or not with_mints:
            return self.threads[k]
        return with_mints[k % len(with_mints)]

    def _target(self, t: str, which: str) -> str:
        ref = self.ref[t]
        if which == "pending" and ref.pending is not None:
            return str(ref.pending["interrupt_id"])
        if which in ("pending", "last") and ref.minted:
            return ref.minted[-1]
        return "i-never-minted"

    # --- operations ---------------------------------------------------------------

    def apply(self, tick: float, op: tuple[Any, ...]) -> None:
        if tick:
            self.clock.tick(timedelta(seconds=tick))
        getattr(self, f"op_{op[0]}")(*op[1:])

    def op_mint(self, k: int, which: str, run_id: str | None, minted_at: str) -> None:
        t = self.threads[k]
        ref = self.ref[t]
        others = [i for u in self.threads if u != t for i in self.ref[u].minted]
        if which == "again" and ref.minted:
            interrupt_id = ref.minted[-1]
        elif which == "other_thread" and others:
            interrupt_id = others[-1]
        else:
            interrupt_id = self._new_id()
        marker = build_interrupt_marker(
            name="approval_required", interrupt_id=interrupt_id, payload={"n": self.counter},
            run_id=run_id,
        )["_interrupt_pending"]
        if minted_at == "text":
            marker["minted_at"] = "2030-01-01T00:00:00Z"

        minted = self.store.mint(t, marker)

        assert minted is (interrupt_id not in ref.minted), "I4: a repeated mint appends nothing"
        if minted:
            if ref.pending is not None:
                ref.end(ref.pending["interrupt_id"], ("expired", "superseded", None))
            ref.pending = dict(marker)
            mint = self.store.history(t)[-1]
            number = mint.data.get("minted_at")
            numeric = isinstance(number, int | float) and not isinstance(number, bool)
            ref.since = float(number) if numeric else mint.occurred_at.timestamp()
            ref.minted.append(interrupt_id)
            if run_id is not None:
                ref.run_id = run_id

    def op_route(self, k: int, run_id: str | None) -> None:
        t = self.threads[k]
        self.store.record_route(t, "finish", run_id=run_id)
        if run_id is not None:
            self.ref[t].run_id = run_id

    def op_resume(self, k: int, which: str, actor: str, response: dict[str, Any] | None) -> None:
        t = self._thread_for_answer(k)
        ref = self.ref[t]
        interrupt_id = self._target(t, which)
        recorded = {} if response is None else dict(response)
        try:
            answer: Any = self.store.resume(t, interrupt_id, response, actor=actor)
        except (UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError) as exc:
            answer = exc

        if interrupt_id not in ref.minted:
            assert isinstance(answer, UnknownInterruptError), answer
            return
        ending = ref.ended.get(interrupt_id)
        if ending is not None and ending[0] == "resumed":
            if ending[1:] == (actor, recorded):
                assert isinstance(answer, Command), "an identical repeat returns the same command"
            else:
                assert isinstance(answer, InterruptAlreadyResolvedError), answer
            return
        if ending is not None:
            assert isinstance(answer, InterruptExpiredError), answer
            return
        reason = stale_reason(ref.state(), STORE_TTL)
        if reason is not None:
            assert isinstance(answer, InterruptExpiredError), answer
            assert answer.reason == reason
            ref.end(interrupt_id, ("expired", reason, None))
            return
        assert isinstance(answer, Command), answer
        assert answer.resume == (recorded or {INTERRUPT_ACK_SENTINEL: True})
        ref.end(interrupt_id, ("resumed", actor, recorded))

    def op_expire(self, k: int, which: str, reason: str) -> None:
        t = self._thread_for_answer(k)
        ref = self.ref[t]
        interrupt_id = self._target(t, which)
        try:
            self.store.expire(t, interrupt_id, reason=reason, actor="ops")
            answer: Exception | None = None
        except (UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError) as exc:
            answer = exc

        ending = ref.ended.get(interrupt_id)
        if interrupt_id not in ref.minted:
            assert isinstance(answer, UnknownInterruptError), answer
        elif ending is not None and ending[0] == "resumed":
            assert isinstance(answer, InterruptAlreadyResolvedError), answer
        elif ending is not None:
            assert isinstance(answer, InterruptExpiredError), answer
        else:
            assert answer is None, answer
            ref.end(interrupt_id, ("expired", reason, None))

    def op_append(self, type: str, k: int, which: str, run_id: str | None) -> None:
        """An event of a type registered at test time (never an ending nor a mint)."""
        t = self.threads[k]
        ref = self.ref[t]
        spec = spec_of(type)
        # register() admits no ending, mint or fold rule: the model needs only the run id.
        assert spec is not None and not (spec.ending or spec.opens or spec.fold)
        interrupt_id = None if which == "none" else self._target(t, which)
        append_event(self.store, t, type, data={"n": self.counter}, interrupt_id=interrupt_id,
                     run_id=run_id, actor="tester")
        if spec.run_id and run_id is not None:
            ref.run_id = run_id

    def _refused(self, t: str, interrupt_id: str, answer: Exception | None) -> bool:
        """An assignment or vote the model expects refused (nothing written): unknown, ended."""
        ref = self.ref[t]
        ending = ref.ended.get(interrupt_id)
        if interrupt_id not in ref.minted:
            assert isinstance(answer, UnknownInterruptError), answer
        elif ending is not None and ending[0] == "resumed":
            assert isinstance(answer, InterruptAlreadyResolvedError), answer
        elif ending is not None:
            assert isinstance(answer, InterruptExpiredError), answer
        else:
            return False
        return True

    def op_assign(self, k: int, which: str, to: str) -> None:
        """SPEC §15: recorded on a minted interrupt with no ending, else refused."""
        t = self._thread_for_answer(k)
        interrupt_id = self._target(t, which)
        kind, target = ("role", to[5:]) if to.startswith("role:") else ("principal", to)
        try:
            self.store.assign(t, interrupt_id, to=target, kind=kind, actor="lead")
            answer: Exception | None = None
        except (UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError) as exc:
            answer = exc
        if not self._refused(t, interrupt_id, answer):
            assert answer is None, answer
            self.ref[t].handed.setdefault(interrupt_id, []).append(("assigned", target, kind))

    def op_vote(self, k: int, which: str, actor: str, decision: str) -> None:
        """SPEC §15: one vote per principal on a minted interrupt with no ending."""
        t = self._thread_for_answer(k)
        interrupt_id = self._target(t, which)
        try:
            votes: Any = self.store.vote(t, interrupt_id, decision, {"d": decision}, actor=actor)
        except (UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError,
                AlreadyVotedError) as exc:
            votes = exc
        if self._refused(t, interrupt_id, votes):
            return
        handed = self.ref[t].handed.setdefault(interrupt_id, [])
        before = [(a, d) for kind, a, d in handed if kind == "voted"]
        if actor in [a for a, _ in before]:
            assert isinstance(votes, AlreadyVotedError), votes
            return
        assert [(v["actor"], v["decision"]) for v in votes] == [*before, (actor, decision)]
        handed.append(("voted", actor, decision))

    def op_sweep(self, ttl: float | None, dry_run: bool) -> None:
        report = self.store.sweep(ttl_seconds=ttl, dry_run=dry_run, batch_size=2)

        effective = STORE_TTL if ttl is None else ttl
        expected = set()
        for t in self.threads:
            ref = self.ref[t]
            reason = stale_reason(ref.state(), effective)
            if ref.pending is not None and reason is not None:
                expected.add((t, ref.pending["interrupt_id"], reason))
        ours = [entry for entry in report.expired if entry[0] in self.ref]
        assert len(ours) == len(set(ours))
        assert set(ours) == expected
        if not dry_run:
            for t, interrupt_id, reason in expected:
                self.ref[t].end(interrupt_id, ("expired", reason, None))

    def op_chase(self, remind: float | None, escalate: float | None, dry_run: bool) -> None:
        """A sweep with a policy: the expiries of op_sweep first, then a reminder and an
        escalation, once each, of what stays pending past the thresholds (SPEC §14)."""
        entry: dict[str, Any] = {"remind_after": remind}
        if escalate is not None:
            entry.update(escalate_after=escalate, escalate_to=["boss"])
        policy = {"approval_required": entry}
        report = self.store.sweep(policy=policy, dry_run=dry_run, batch_size=2)
        now = time.time()
        expected_reminded, expected_escalated = set(), set()
        for t in self.threads:
            ref = self.ref[t]
            if ref.pending is None or stale_reason(ref.state(), STORE_TTL) is not None:
                continue
            interrupt_id = str(ref.pending["interrupt_id"])
            done = ref.chased.get(interrupt_id, [])
            if remind is not None and REMINDED not in done and ttl_passed(ref.since, remind, now):
                expected_reminded.add((t, interrupt_id, int(remind)))
            if escalate is not None and ESCALATED not in done and ttl_passed(ref.since, escalate, now):
                expected_escalated.add((t, interrupt_id, int(escalate), ("boss",)))
        assert {r for r in report.reminded if r[0] in self.ref} == expected_reminded
        assert {e for e in report.escalated if e[0] in self.ref} == expected_escalated
        self.op_sweep_expected(report, STORE_TTL, dry_run)
        if not dry_run:
            for t, interrupt_id, _ in expected_reminded:
                self.ref[t].chased.setdefault(interrupt_id, []).append(REMINDED)
            for t, interrupt_id, _, _ in expected_escalated:
                self.ref[t].chased.setdefault(interrupt_id, []).append(ESCALATED)

    def op_sweep_expected(self, report: Any, effective: float, dry_run: bool) -> None:
        """The expiries a sweep must report and (unless a dry run) leave in the model."""
        expected = set()
        for t in self.threads:
            ref = self.ref[t]
            reason = stale_reason(ref.state(), effective)
            if ref.pending is not None and reason is not None:
                expected.add((t, ref.pending["interrupt_id"], reason))
        ours = [entry for entry in report.expired if entry[0] in self.ref]
        assert len(ours) == len(set(ours))
        assert set(ours) == expected
        if not dry_run:
            for t, interrupt_id, reason in expected:
                self.ref[t].end(interrupt_id, ("expired", reason, None))

    # --- the checks after every step ------------------------------------------------------

    def check(self) -> None:
        for t in self.threads:
            ref = self.ref[t]
            expected = ref.state()
            history = self.store.history(t)
            assert [e.version for e in history] == list(range(1, len(history) + 1))
            folded = fold(history).get(t)
            assert (folded.as_state() if folded else {"_interrupt_pending": None, "run_id": None}) == expected
            assert self.store.state(t) == expected
            # I7: the store's answer is the seed predicate on the reference state.
            assert self.store.is_current(t) == interrupt_pending_is_current(expected, STORE_TTL)
            assert self.plain.is_current(t) == interrupt_pending_is_current(expected, None)
            for ttl in (0.5, 10.0):
                assert self.store.is_current(t, ttl) == interrupt_pending_is_current(expected, ttl)
            # I3: one ending per interrupt, and exactly the ones the model expects.
            endings = [(e.interrupt_id, e.type) for e in history if e.type in (RESUMED, EXPIRED)]
            assert len({i for i, _ in endings}) == len(endings)
            assert {i: kind for i, kind in endings} == {
                i: (RESUMED if end[0] == "resumed" else EXPIRED) for i, end in ref.ended.items()
            }
            # SPEC §14: each reminder and escalation the model expects, once, in order.
            chased: dict[str, list[str]] = {}
            for e in history:
                if e.type in (REMINDED, ESCALATED):
                    chased.setdefault(str(e.interrupt_id), []).append(e.type)
            assert chased == ref.chased
            # SPEC §15: the assignments and votes the model expects, in order.
            handed: dict[str, list[tuple[str, Any, Any]]] = {}
            for e in history:
                if e.type == ASSIGNED:
                    handed.setdefault(str(e.interrupt_id), []).append(("assigned", e.data["to"], e.data["kind"]))
                elif e.type == VOTED:
                    handed.setdefault(str(e.interrupt_id), []).append(("voted", e.actor, e.data["decision"]))
            assert handed == {i: h for i, h in ref.handed.items() if h}
        self.store.rebuild_projection()
        for t in self.threads:
            assert self.store.state(t) == self.ref[t].state()

    def finish(self) -> None:
        for t in self.threads:
            report = self.store.verify(t)
            if self.store.history(t):
                assert report.ok, str(report)
            else:  # a thread with no events is named, not passed (SPEC §10)
                assert [b.kind for b in report.broken] == ["no_events"], str(report)


def run_examples(db_url: str, store: InterruptStore, max_examples: int) -> None:
    assert missing() == [], f"event types with no strategy in tests/strategies.py: {missing()}"
    ttl_store = InterruptStore(db_url, ttl_seconds=STORE_TTL)

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(steps=steps())
    def interrupt_lives(steps: list[tuple[float, tuple[Any, ...]]]) -> None:
        # Freeze inside the example so Hypothesis' own timing keeps the real clock.
        with freeze_time(START, ignore=["_pytest.timing"]) as clock:
            example = Example(ttl_store, store, clock)
            for tick, op in steps:
                example.apply(tick, op)
                example.check()
            example.finish()

    try:
        interrupt_lives()
    finally:
        ttl_store.close()


def test_projection_rebuild_fold_and_predicate_agree_with_a_reference_model(
    migrated_url: str, store: InterruptStore, backend: str
) -> None:
    """Random mint/route/resume/expire/sweep sequences under a moving clock keep I6 and I7."""
    run_examples(migrated_url, store, max_examples=25 if backend == "sqlite" else 15)


def test_every_registered_event_type_has_a_strategy() -> None:
    """The strategy table (tests/strategies.py) draws every event type the package registers."""
    assert missing() == []


def test_a_type_registered_at_test_time_is_drawn_and_folded_alike(
    migrated_url: str, store: InterruptStore
) -> None:
    """A non-ending type a test declares (its rule: it sets the run id) is drawn among the
    operations, and the projection, a rebuild and the fold keep agreeing with the model."""
    with throwaway_type(EventType("test.tallied", label="tallied", run_id=True), weight=6):
        run_examples(migrated_url, store, max_examples=4)
    assert any(e.type == "test.tallied" for e in store.events())
