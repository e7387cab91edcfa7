"""What a sweep reports: the expiries, the wake-ups delivered, owed and failed, the
reminders and escalations.

A value with no I/O, kept apart from the sweep (services/sweep.py) because two layers
read it: the sweep fills it in, and :class:`~symfonic_store.errors.SweepIncompleteError`
carries the part committed before a failure. The error tree depends on no service.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Expiry = tuple[str, str, str]
"""``(thread_id, interrupt_id, reason)``"""
Reminder = tuple[str, str, int | float]
"""``(thread_id, interrupt_id, after)``: ``after`` is the policy's ``remind_after``."""
Escalation = tuple[str, str, int | float, tuple[str, ...]]
"""``(thread_id, interrupt_id, after, to)``: the policy's ``escalate_after`` and roles."""


def graph_label(graph: str | None) -> str:
    """How reports name the graph a wake-up is owed to."""
    return "no named graph" if graph is None else f"graph {graph!r}"


@dataclass(slots=True)
class SweepReport:
    """What a sweep expired (or, with ``dry_run``, would expire)."""

    expired: list[Expiry] = field(default_factory=list)
    dry_run: bool = False
    ttl_seconds: float | None = None
    wake_failures: list[tuple[str, str, str]] = field(default_factory=list)
    """``(thread_id, interrupt_id, error)`` for each ``on_expired`` call that raised."""
    complete: bool = True
    """False when the sweep stopped partway (:class:`~symfonic_store.SweepIncompleteError`):
    the report then lists only what was committed before the failure."""
    redelivered: list[Expiry] = field(default_factory=list)
    """Owed wake-ups of earlier expiries that this sweep delivered (``on_expired``
    returned): deliveries, not new expiries."""
    claims_settled: list[tuple[str, str, str]] = field(default_factory=list)
    """``(thread_id, interrupt_id, outcome)`` for each gateway answer whose process
    stopped before it settled and whose lease ran out (SPEC §8, §12): ``resumed`` when the
    thread's checkpoint shows LangGraph took it (only a sweep whose ``on_expired`` is a
    gateway's ``waker()`` can look); else ``outcome_unknown`` (recorded as such, the
    interrupt refuses answers until ``store.settle``), by any sweep that writes."""
    owed: int | None = None
    """Wake-ups still owed after this sweep (in its ``thread_ids``, when limited); None
    when a sweep that stopped partway could not count them."""
    owed_to: dict[str | None, int] = field(default_factory=dict)
    """``owed`` by the graph they are owed to (None: the mint named no graph)."""
    not_held: list[Expiry] = field(default_factory=list)
    """Unnamed wake-ups the callback's graph does not hold (:data:`NOT_HELD`): left owed."""
    reminded: list[Reminder] = field(default_factory=list)
    """The ``interrupt.reminded`` events this sweep recorded (a dry run: would record),
    by the policy's ``remind_after`` (SPEC §14)."""
    escalated: list[Escalation] = field(default_factory=list)
    """The ``interrupt.escalated`` events this sweep recorded (a dry run: would record)."""

    def wake_failed(self, thread_id: str, interrupt_id: str, exc: Exception) -> None:
        """Record an ``on_expired`` callback that raised."""
        self.wake_failures.append((thread_id, interrupt_id, f"{type(exc).__name__}: {exc}"))

    @property
    def count(self) -> int:
        return len(self.expired)

    def as_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "dry_run": self.dry_run,
            "ttl_seconds": self.ttl_seconds,
            "expired": [
                {"thread_id": t, "interrupt_id": i, "reason": r} for t, i, r in self.expired
            ],
            "wake_failures": [
                {"thread_id": t, "interrupt_id": i, "error": e} for t, i, e in self.wake_failures
            ],
            "redelivered": [
                {"thread_id": t, "interrupt_id": i, "reason": r} for t, i, r in self.redelivered
            ],
            "owed": self.owed,
            "owed_to": [
                {"graph": g, "owed": n} for g, n in sorted(self.owed_to.items(), key=graph_order)
            ],
            "not_held": [
                {"thread_id": t, "interrupt_id": i, "reason": r} for t, i, r in self.not_held
            ],
            "claims_settled": [
                {"thread_id": t, "interrupt_id": i, "outcome": o} for t, i, o in self.claims_settled
            ],
            "reminded": [
                {"thread_id": t, "interrupt_id": i, "after": a} for t, i, a in self.reminded
            ],
            "escalated": [
                {"thread_id": t, "interrupt_id": i, "after": a, "to": list(to)}
                for t, i, a, to in self.escalated
            ],
        }

    def __str__(self) -> str:
        verb = "would expire" if self.dry_run else "expired"
        by_reason: dict[str, int] = {}
        for _, _, reason in self.expired:
            by_reason[reason] = by_reason.get(reason, 0) + 1
        detail = ", ".join(f"{n} {r}" for r, n in sorted(by_reason.items()))
        ttl = "none" if self.ttl_seconds is None else f"{self.ttl_seconds:g}s"
        text = f"sweep {verb} {self.count} interrupt(s)" + (f" ({detail})" if detail else "")
        if not self.complete:
            text = f"sweep stopped partway; before it stopped it {verb} {self.count} interrupt(s)"
            text += f" ({detail})" if detail else ""
        text += f"; ttl {ttl}"
        if self.reminded:
            text += f"; {'would record' if self.dry_run else 'recorded'} {len(self.reminded)} reminder(s)"
        if self.escalated:
            text += f"; {'would escalate' if self.dry_run else 'escalated'} {len(self.escalated)} interrupt(s)"
        if self.redelivered:
            text += f"; delivered {len(self.redelivered)} owed wake-up(s)"
        if self.wake_failures:
            text += f"; {len(self.wake_failures)} wake-up(s) failed"
        if self.owed:
            text += f"; {self.owed} wake-up(s) {'owed' if self.dry_run else 'still owed'}"
            if self.owed_to:
                text += " (" + ", ".join(
                    f"{n} to {graph_label(g)}" for g, n in sorted(self.owed_to.items(), key=graph_order)
                ) + ")"
        unknown = sum(1 for *_, outcome in self.claims_settled if outcome == "outcome_unknown")
        if len(self.claims_settled) > unknown:
            text += f"; settled {len(self.claims_settled) - unknown} abandoned answer(s)"
        if unknown:
            text += (
                f"; {unknown} abandoned answer(s) of unknown outcome: no answer is taken "
                "until `symfonic-store settle THREAD INTERRUPT_ID --as taken|not-taken` says "
                "what the graph did"
            )
        return text

    def owed_advice(self) -> str | None:
        """To which graphs the wake-ups still owed are owed, and what an operator can do
        about them (None when none is owed)."""
        if not self.owed:
            return None
        owed_to = ", ".join(
            f"{n} to {graph_label(g)}" for g, n in sorted(self.owed_to.items(), key=graph_order)
        )
        named = [g for g in self.owed_to if g is not None]
        if not named:
            drop = "--unnamed"
        elif len(named) == 1 and _PLAIN_NAME.fullmatch(named[0]):
            drop = f"--graph {named[0]}"
        else:
            drop = "--graph NAME"
        unnamed = (
            "; one owed to no named graph is delivered by the graph whose checkpointer holds "
            "its thread, and dropped with --unnamed"
            if None in self.owed_to and named
            else ""
        )
        return (
            f"{self.owed} wake-up(s) still owed ({owed_to}): deliver them with "
            "`symfonic-store sweep --graph MODULE:ATTR` of that graph, or give them up with "
            f"`symfonic-store wakeups --drop {drop} --actor WHO`{unnamed} (`symfonic-store "
            "wakeups` lists them)"
        )


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A graph name the advice can show as it is in a shell command (else ``NAME``)."""


def graph_order(item: tuple[str | None, int]) -> tuple[bool, str]:
    """Sort key of ``(graph, count)`` pairs: by name, the unnamed last."""
    return (item[0] is None, item[0] or "")
