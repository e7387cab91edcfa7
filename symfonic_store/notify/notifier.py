"""``Notifier``: delivers the log's events to subscriptions, at least once, in log order
per subscription (SPEC §14).

Per subscription, one pass:

1. its cursor row is made if it has none (at the log's end, or at 0 ``from_start``;
   ``from_start`` rewinds an existing cursor to 0 too, once per notifier, and says so);
2. its lease is taken (a row update, so two processes never deliver to one
   subscription at once; a lease left by a killed process runs out after
   ``lease_seconds``);
3. events after the cursor are read as ``store.events(after=...)`` reads them (gap-safe,
   I11); the ones the subscription does not match move the cursor silently;
4. each matching event is sent, within its ``timeout_seconds`` from the connection to the
   last byte and before the lease runs out (the lease is renewed first when less than a
   send's timeout is left of it); only a delivered one (2xx, or Apprise's success) moves
   the cursor past it, in a transaction after the send: a process killed between the two
   sends it again next time, with the same ``webhook-id``;
5. a failure records its try and stops the subscription until the backoff has passed
   (later events wait behind it); past ``max_tries`` or ``max_age_seconds`` the event is
   dead-lettered and the cursor goes past it; a 410 disables the subscription where it
   stands.

Subscriptions are passed in parallel (at most :data:`PARALLEL` at once), each pass in a
worker thread: a slow receiver holds up its own subscription only.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import InvalidInputError
from ..event_types import all_types
from ..events import MINTED, StoredEvent
from ..redaction import redact
from ..store.plan import Op
from ..store.runner import is_async_store
from ..tracing import span
from . import ledger
from .channels import Delivery, Outcome, Sender
from .config import NotifyConfig, Subscription, load_config, parse_config
from .message import Interrupt, webhook_id

if TYPE_CHECKING:
    from ..store import InterruptStore

T = TypeVar("T")
log = logging.getLogger("symfonic_store.notify")
PAGE_SIZE = 100
PARALLEL = 8
"""Subscriptions passed at once, each in a worker thread of its own."""
_KNOWN_INTERRUPTS = 4096


@dataclass(slots=True)
class Tally:
    """What one subscription's pass did."""

    delivered: int = 0
    failed: int = 0
    dead_lettered: int = 0
    disabled: bool = False
    busy: bool = False
    """Another process held its lease: this pass left it alone."""


@dataclass(slots=True)
class Report:
    """What :meth:`Notifier.run_once` did, by subscription."""

    subscriptions: dict[str, Tally] = field(default_factory=dict)

    def total(self, what: str) -> int:
        return sum(int(getattr(t, what)) for t in self.subscriptions.values())


@dataclass(frozen=True, slots=True)
class RetryReport:
    resent: int
    failed: int


class Notifier:
    """Delivers the store's events to the subscriptions of a config.

    Args:
        store: the synchronous :class:`~symfonic_store.InterruptStore`.
        config: a :class:`NotifyConfig`, its JSON value (a dict), or a path to the file.
        inbox_url: the approval service's address; bodies and messages then link to
            ``<inbox_url>/interrupts/<thread>/<id>``.
        from_start: every subscription starts at the log's beginning instead of its end:
            one without a cursor is made there, one with a cursor is rewound there (once,
            at this notifier's first pass over it; its failing event and backoff cleared,
            a 410-disabled one stays disabled), with a warning on the
            ``symfonic_store.notify`` logger.
        lease_seconds: how long a subscription stays held by this process after each
            step; another process takes it over only after that. It must be above every
            subscription's timeout (``timeout_seconds``, Apprise's 30 s): a send never
            outlives the lease.
        parallel: subscriptions passed at once, each in a worker thread; with 1,
            :meth:`run_once` passes them one after another in the calling thread.

    Raises:
        InvalidInputError: a bad config (the field named) or an async store.
        ImportError: the ``notify`` extra is not installed.
    """

    def __init__(
        self,
        store: InterruptStore,
        config: NotifyConfig | dict[str, Any] | str | Path,
        *,
        inbox_url: str | None = None,
        from_start: bool = False,
        lease_seconds: float = 60.0,
        poll_seconds: float = 1.0,
        parallel: int = PARALLEL,
    ) -> None:
        if is_async_store(store):
            raise InvalidInputError("store", "the notifier runs on the synchronous InterruptStore")
        if isinstance(config, dict):
            config = parse_config(config)
        elif not isinstance(config, NotifyConfig):
            config = load_config(config)
        if lease_seconds <= 0 or poll_seconds <= 0:
            raise InvalidInputError("lease_seconds", "lease and poll seconds must be positive")
        if parallel < 1:
            raise InvalidInputError("parallel", "must be at least 1")
        self.parallel = parallel
        self.store = store
        self.config = config
        self.inbox_url = inbox_url
        self.from_start = from_start
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        host = socket.gethostname()[:30]
        self.owner = f"{host}:{os.getpid()}:{uuid.uuid4().hex[:12]}"[:64]
        slowest, index = max((timeout_of(s), i) for i, s in enumerate(config.subscriptions))
        if lease_seconds <= slowest:
            # A send outlasting the lease would let another process send the same event at once.
            field = config.subscriptions[index].destination.timeout_field(f"subscriptions[{index}]")
            raise InvalidInputError(
                "lease_seconds",
                f"must be above the slowest delivery's timeout ({slowest:g} s, {field}): a send "
                "could outlive the lease and another process send the same event meanwhile",
            )
        self._interrupts: OrderedDict[tuple[str, str], Interrupt | None] = OrderedDict()
        self._known = threading.Lock()
        self._leases: dict[str, float] = {}
        """Until when this process holds each subscription (as it last wrote)."""
        self._pool: ThreadPoolExecutor | None = None
        self._senders: dict[str, Sender] = {}
        try:
            for i, sub in enumerate(config.subscriptions):
                self._senders[sub.name] = sub.destination.sender(f"subscriptions[{i}]")
        except BaseException:
            self.close()
            raise
        self._rewound: set[str] = set()
        """The subscriptions ``from_start`` put at the log's start already (once each)."""

    # --- running ----------------------------------------------------------------------

    def _run(self, fn: Callable[..., T], **kwargs: Any) -> T:
        result: T = self.store.runner.run(Op(partial(fn, **kwargs), write=True, appends=False))
        return result

    def _read(self, fn: Callable[..., T], **kwargs: Any) -> T:
        result: T = self.store.runner.run(Op(partial(fn, **kwargs), write=False))
        return result

    def run_once(self, stop: threading.Event | None = None) -> Report:
        """One pass over every subscription: deliver what is due, then return.

        Raises:
            DatabaseError: the store could not be reached.
        """
        report = Report()
        if self.parallel == 1 or len(self.config.subscriptions) == 1:
            for sub in self.config.subscriptions:
                if stop is not None and stop.is_set():
                    break
                report.subscriptions[sub.name] = self._pass(sub, stop)
            return report
        passes = {sub.name: self._workers().submit(self._pass, sub, stop) for sub in self.config.subscriptions}
        wait(passes.values())
        for sub in self.config.subscriptions:
            report.subscriptions[sub.name] = passes[sub.name].result()
        return report

    def run(self, stop: threading.Event) -> None:
        """Pass after pass until ``stop`` is set; the delivery in flight then finishes
        and its outcome is recorded before this returns. A failing database is logged
        and tried again next pass."""
        from ..errors import ConcurrencyConflictError, DatabaseError

        # Each subscription is passed again a poll after its own last pass ended, not
        # after everyone's: a slow receiver does not hold the others up.
        running: dict[Future[Tally], Subscription] = {}
        due = {sub.name: 0.0 for sub in self.config.subscriptions}
        while True:
            if not stop.is_set():
                now = time.monotonic()
                busy = {sub.name for sub in running.values()}
                for sub in self.config.subscriptions:
                    if sub.name not in busy and due[sub.name] <= now:
                        running[self._workers().submit(self._pass, sub, stop)] = sub
            if not running:
                if stop.is_set():
                    return
                stop.wait(max(0.0, min(due.values()) - time.monotonic()))
                continue
            done, _ = wait(running, timeout=self.poll_seconds, return_when=FIRST_COMPLETED)
            for future in done:
                sub = running.pop(future)
                due[sub.name] = time.monotonic() + self.poll_seconds
                try:
                    future.result()
                except (DatabaseError, ConcurrencyConflictError) as exc:
                    log.warning("notify: the store failed (%s); trying again", exc)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=min(self.parallel, len(self.config.subscriptions)), thread_name_prefix="symfonic-notify"
            )
        return self._pool

    def close(self) -> None:
        """Release the worker threads and the senders (HTTP clients, Apprise's worker
        processes)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for sender in self._senders.values():
            sender.close()
        self._senders.clear()

    def __enter__(self) -> Notifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one subscription -----------------------------------------------------------

    def _pass(self, sub: Subscription, stop: threading.Event | None) -> Tally:
        tally = Tally()
        now = time.time()
        # Reads first: an idle subscription costs two reads a pass, no write transaction.
        cursor = self._read(ledger.read_cursors, names=[sub.name]).get(sub.name)
        if cursor is None:
            cursor = self._run(ledger.open_cursor, name=sub.name, from_start=self.from_start, now=now)
            self._rewound.add(sub.name)
        elif self.from_start and sub.name not in self._rewound:
            rewound = self._rewind(sub, now)
            if rewound is None:
                tally.busy = True
                return tally
            cursor = rewound
        if cursor.disabled_at is not None:
            tally.disabled = True
            return tally
        if cursor.next_try_at is not None and cursor.next_try_at > now:
            return tally  # backing off: its next event waits, and so do the later ones
        if not self.store.events(after=cursor.position, limit=1):
            return tally
        held = self._run(ledger.take_lease, name=sub.name, owner=self.owner, now=now, seconds=self.lease_seconds)
        if held is None:
            tally.busy = True
            return tally
        self._leases[sub.name] = now + self.lease_seconds
        try:
            self._deliver(sub, held, tally, stop)
        finally:
            self._run(ledger.give_lease, name=sub.name, owner=self.owner)
        return tally

    def _rewind(self, sub: Subscription, now: float) -> ledger.Cursor | None:
        """``from_start`` on a subscription that has a cursor: back to the log's start, once
        per notifier, said in the log (the CLI's stderr); None while another process holds it."""
        was = self._run(ledger.rewind_cursor, name=sub.name, owner=self.owner, now=now)
        if was is None:
            log.warning("notify: %s is held by another process: not rewound yet", sub.name)
            return None
        self._rewound.add(sub.name)
        log.warning(
            "notify: %s rewound to the log's start (it was at position %d): its events are "
            "delivered again", sub.name, was,
        )
        return self._read(ledger.read_cursors, names=[sub.name])[sub.name]

    def _deliver(self, sub: Subscription, cursor: ledger.Cursor, tally: Tally, stop: threading.Event | None) -> None:
        position = cursor.position
        failing, tries, first_failed = cursor.failing_position, cursor.tries, cursor.first_failed_at
        while True:
            page: list[StoredEvent] = self.store.events(after=position, limit=PAGE_SIZE)
            skipped: int | None = None
            for event in page:
                interrupt = self._interrupt(event)
                tenant = getattr(event, "tenant", None) if interrupt is None else interrupt.tenant
                if not sub.matches(event.type, None if interrupt is None else interrupt.name, tenant):
                    skipped = event.position
                    continue
                if stop is not None and stop.is_set():
                    self._skip(sub, skipped)
                    return
                if skipped is not None and not self._skip(sub, skipped):
                    return
                skipped = None
                within = self._lease_for_send(sub)
                if within is None:
                    return
                outcome = self._send(sub, event, interrupt, within)
                now = time.time()
                if outcome.kind == "delivered":
                    tally.delivered += 1
                    if not self._run(ledger.advance, name=sub.name, owner=self.owner,
                                     position=event.position, delivered=1, now=now,
                                     lease_until=now + self.lease_seconds):
                        return
                    self._leases[sub.name] = now + self.lease_seconds
                    failing, tries, first_failed = None, 0, None
                elif outcome.kind == "gone":
                    tally.failed += 1
                    tally.disabled = True
                    self._run(ledger.disable, name=sub.name, owner=self.owner, reason=outcome.detail, now=now)
                    log.warning("notify: %s disabled: %s", sub.name, outcome.detail)
                    return
                else:
                    tally.failed += 1
                    if failing != event.position:
                        tries, first_failed = 0, now
                    tries += 1
                    assert first_failed is not None
                    retry = sub.retry
                    if tries >= retry.max_tries or now - first_failed >= retry.max_age_seconds:
                        tally.dead_lettered += 1
                        log.warning("notify: %s gave up event %d after %d tries: %s",
                                    sub.name, event.position, tries, outcome.detail)
                        if not self._run(ledger.dead_letter, name=sub.name, owner=self.owner, event=event,
                                         tries=tries, error=outcome.detail, now=now):
                            return
                        failing, tries, first_failed = None, 0, None
                    else:
                        self._run(ledger.record_failure, name=sub.name, owner=self.owner,
                                  position=event.position, tries=tries, first_failed_at=first_failed,
                                  next_try_at=now + retry.delay(tries), error=outcome.detail)
                        return
                position = event.position
            if skipped is not None:
                if not self._skip(sub, skipped):
                    return
                position = skipped
            if len(page) < PAGE_SIZE:
                return

    def _skip(self, sub: Subscription, position: int | None) -> bool:
        """Move the cursor over events the subscription does not match."""
        if position is None:
            return True
        now = time.time()
        if not self._run(ledger.advance, name=sub.name, owner=self.owner, position=position,
                         delivered=0, now=now, lease_until=now + self.lease_seconds):
            return False
        self._leases[sub.name] = now + self.lease_seconds
        return True

    def _lease_for_send(self, sub: Subscription) -> float | None:
        """Seconds the next send may take: its timeout, the lease renewed first when less
        is left of it (None: the lease was lost, this process must not send)."""
        timeout = timeout_of(sub)
        now = time.time()
        if self._leases.get(sub.name, 0.0) - now <= timeout:
            if self._run(ledger.take_lease, name=sub.name, owner=self.owner, now=now,
                         seconds=self.lease_seconds) is None:
                return None
            self._leases[sub.name] = now + self.lease_seconds
        return min(timeout, self._leases[sub.name] - time.time())

    def _send(self, sub: Subscription, event: StoredEvent, interrupt: Interrupt | None, within: float) -> Outcome:
        sender = self._senders[sub.name]
        # A subscription kept to some tenants is told what a principal of them is shown
        # (SPEC §15): an expiry naming another tenant's mint loses that mint and its actor.
        event = redact(self.store, sub.scope, event)
        msg_id = webhook_id(sub.name, event.position)
        now = datetime.fromtimestamp(time.time(), UTC)
        with span("symfonic.notify.deliver", **{
            "symfonic.subscription": sub.name, "symfonic.thread_id": event.thread_id,
            "symfonic.interrupt_id": event.interrupt_id, "symfonic.event_type": event.type,
            "symfonic.position": event.position, "symfonic.webhook_id": msg_id,
        }) as opened:
            outcome = sender.deliver(Delivery(msg_id, event, interrupt, self.inbox_url, now), within=within)
            opened.set_attribute("symfonic.outcome", outcome.kind)
        return outcome

    def _interrupt(self, event: StoredEvent) -> Interrupt | None:
        """The interrupt an event concerns, from its mint (remembered for the next ones)."""
        if event.interrupt_id is None:
            return None
        key = (event.thread_id, event.interrupt_id)
        if event.type == MINTED:
            found: Interrupt | None = _from_mint(event.data, self._tenant(key))
        else:
            with self._known:  # the subscriptions' threads share it
                if key in self._interrupts:
                    self._interrupts.move_to_end(key)
                    return self._interrupts[key]
            record = self.store.interrupt_record(event.thread_id, event.interrupt_id)
            found = None if record is None else _from_mint(record, self._tenant(key))
        with self._known:
            self._interrupts[key] = found
            if len(self._interrupts) > _KNOWN_INTERRUPTS:
                self._interrupts.popitem(last=False)
        return found

    def _tenant(self, key: tuple[str, str]) -> str | None:
        """The tenant the interrupt was minted for (its mint's column, SPEC §15)."""
        return self.store.interrupt_tenants([key]).get(key)

    # --- status, retry, enable --------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """Each subscription: its target (scheme and host only), cursor, state, counts and
        waiting dead letters."""
        names = [s.name for s in self.config.subscriptions]
        cursors = self._read(ledger.read_cursors, names=names)
        letters = self._read(ledger.dead_letters)
        now = time.time()
        rows = []
        for sub in self.config.subscriptions:
            c = cursors.get(sub.name)
            waiting = [d for d in letters if d.subscription == sub.name]
            rows.append({
                "name": sub.name,
                "target": sub.target,
                "position": None if c is None else c.position,
                "state": _state(c, now),
                "delivered": 0 if c is None else c.delivered,
                "failed": 0 if c is None else c.failed,
                "dead_lettered": 0 if c is None else c.dead_lettered,
                "last_error": None if c is None else (c.disabled_reason or c.last_error),
                "dead_letters": [
                    {"position": d.position, "type": d.type, "thread_id": d.thread_id,
                     "interrupt_id": d.interrupt_id, "tries": d.tries, "error": d.error,
                     "dead_at": d.dead_at.isoformat()}
                    for d in waiting
                ],
            })
        return rows

    def unknown_patterns(self) -> list[tuple[str, str]]:
        """``(subscription, pattern)`` of ``events`` globs that match no event type the
        registry declares (a typo, or a type of a newer release)."""
        from fnmatch import fnmatchcase

        names = [t.name for t in all_types()]
        return [(s.name, p) for s in self.config.subscriptions for p in s.events
                if not any(fnmatchcase(n, p) for n in names)]

    def retry(self, name: str) -> RetryReport:
        """Send the subscription's dead letters again, in log order; the delivered ones
        are marked re-sent, the others stay (their tries counted).

        Raises:
            InvalidInputError: no such subscription in the config.
            InterruptInProgressError: another process holds the subscription now.
        """
        sub = self.config.get(name)
        now = time.time()
        self._run(ledger.open_cursor, name=name, from_start=self.from_start, now=now)
        if self._run(ledger.take_lease, name=name, owner=self.owner, now=now, seconds=self.lease_seconds) is None:
            from ..errors import ConcurrencyConflictError

            raise ConcurrencyConflictError(f"another notify process holds {name!r} now: try again later")
        self._leases[name] = now + self.lease_seconds
        resent = failed = 0
        try:
            for letter in self._read(ledger.dead_letters, name=name):
                # Its interrupt's own events when it has one, not the thread's whole history.
                events = self.store.history(letter.thread_id, interrupt_id=letter.interrupt_id)
                event = next((e for e in events if e.position == letter.position), None)
                if event is None:  # archived since: nothing left to send
                    continue
                within = self._lease_for_send(sub)
                if within is None:
                    break
                outcome = self._send(sub, event, self._interrupt(event), within)
                if outcome.kind == "delivered":
                    resent += 1
                    self._run(ledger.letter_resent, name=name, position=letter.position, now=time.time())
                else:
                    failed += 1
                    self._run(ledger.letter_failed, name=name, position=letter.position, error=outcome.detail)
        finally:
            self._run(ledger.give_lease, name=name, owner=self.owner)
        return RetryReport(resent=resent, failed=failed)

    def enable(self, name: str) -> bool:
        """Resume a subscription a 410 disabled, at the event it stopped on; False when it
        was not disabled.

        Raises:
            InvalidInputError: no such subscription in the config.
        """
        self.config.get(name)
        return self._run(ledger.enable, name=name)


def timeout_of(sub: Subscription) -> float:
    """Seconds one send to ``sub`` may take, from the connection to the last byte."""
    return sub.destination.timeout


def _from_mint(data: dict[str, Any], tenant: Any) -> Interrupt:
    name = data.get("name")
    minted = data.get("minted_at")
    when = None
    if isinstance(minted, int | float) and not isinstance(minted, bool):
        when = datetime.fromtimestamp(float(minted), UTC)
    return Interrupt(
        name=None if name is None else str(name),
        payload=data.get("payload"),
        minted_at=when,
        tenant=None if tenant is None else str(tenant),
    )


def _state(cursor: ledger.Cursor | None, now: float) -> str:
    if cursor is None:
        return "new"
    if cursor.disabled_at is not None:
        return "disabled"
    if cursor.next_try_at is not None and cursor.next_try_at > now:
        return f"retrying (try {cursor.tries + 1} in {cursor.next_try_at - now:.0f}s)"
    if cursor.lease_owner is not None and (cursor.lease_until or 0) > now:
        return "delivering"
    return "ok"
