"""Verify the hash chains: every event's hash covers its content and the previous link."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..events import GENESIS_HASH, StoredEvent, stored_hash_is_valid


@dataclass(frozen=True, slots=True)
class BrokenLink:
    """The first event of a thread whose chain does not hold."""

    thread_id: str
    version: int
    position: int
    problem: str

    def __str__(self) -> str:
        return (
            f"thread {self.thread_id!r}: chain broken at version {self.version} "
            f"(position {self.position}): {self.problem}"
        )


@dataclass(slots=True)
class VerifyReport:
    """``ok`` when every chain holds; ``broken`` names the first bad link per thread."""

    threads_checked: int = 0
    events_checked: int = 0
    broken: list[BrokenLink] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.broken

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = (
            f"verified {self.events_checked} event(s) on {self.threads_checked} thread(s): "
            + ("all hash chains hold" if self.ok else f"{len(self.broken)} broken chain(s)")
        )
        return "\n".join([head, *(str(b) for b in self.broken)])


def verify_events(events: Iterable[StoredEvent]) -> VerifyReport:
    """Check events given in (thread_id, version) order."""
    report = VerifyReport()
    thread: str | None = None
    expected_version = 1
    prev_hash = GENESIS_HASH
    broken = False
    for event in events:
        if event.thread_id != thread:
            thread, expected_version, prev_hash, broken = event.thread_id, 1, GENESIS_HASH, False
            report.threads_checked += 1
        report.events_checked += 1
        if broken:
            continue
        problem = None
        if event.version != expected_version:
            problem = f"expected version {expected_version}, found {event.version} (a gap or a duplicate)"
        elif not stored_hash_is_valid(event, prev_hash):
            problem = "the stored hash does not match the event's content and the previous hash"
        if problem is not None:
            report.broken.append(BrokenLink(event.thread_id, event.version, event.position, problem))
            broken = True
            continue
        expected_version += 1
        prev_hash = event.hash
    return report
