"""The audit: one record per interrupt -- who asked, who answered what, and when."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from sqlalchemy.engine import Connection

from .. import cursors, native
from ..db.statements import audit_rows
from ..db.statements.audit import log_audit_rows, mint_key, utc
from ..db.statements.tenants import mint_tenants
from ..db.statements.votes import quorum_approvers_at
from ..decisions import builtin, reported
from ..errors import InvalidInputError
from ..events import RESUMED, refused_assignment

AUDIT_FIELDS = (
    "thread_id",
    "interrupt_id",
    "name",
    "payload",
    "minted_at",
    "outcome",
    "reason",
    "actor",
    "response",
    "resolved_at",
    "attempts",
    "decision",
    "action",
    "action_index",
    "requested_by",
    "decision_source",
    "authenticated_by",
    "tenant",
    "approvers",
)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One interrupt's life in one line. Times are timezone-aware UTC."""

    thread_id: str
    interrupt_id: str
    name: str
    payload: Any
    minted_at: datetime
    outcome: str
    """``pending``, ``resumed`` or ``expired``."""
    reason: str | None
    actor: str | None
    """Who resumed it (or who cancelled it); None for a sweep or router expiry."""
    response: dict[str, Any] | None
    resolved_at: datetime | None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """The refused answers (``interrupt.resume_rejected``), in the order they happened:
    ``{"actor", "why", "error", "at"}``, ``error`` None unless the refusal names one,
    ``at`` a timezone-aware UTC datetime. A refused assignment is not an answer and is
    left out (:func:`~symfonic_store.events.refused_assignment`)."""
    decision: str | None = None
    """What the answer decided (SPEC §12): ``approve``/``reject``/``edit``/``respond``
    (HITL middleware, breakpoints, ``{"approved": bool}``), ``accept``/``edit``/
    ``response``/``ignore`` (Agent Inbox), a word of the store's decisions function,
    else None; on an expiry, the decision it recorded (``ignore`` for Agent Inbox's
    thread-level ignore, SPEC §13), else None. A breakpoint's ``approved``/``rejected`` of
    earlier releases reads as ``approve``/``reject``."""
    action: Any = None
    """For a batched HITL request: the action request this record is about."""
    action_index: int | None = None
    """For a batched HITL request: the action request's index (records share the id)."""
    requested_by: str | None = None
    """The mint's actor: who (or what) asked."""
    decision_source: str | None = None
    """``recorded`` (in the answer's hashed data), ``derived`` (the answer recorded none:
    the built-in rules applied at read time), or None (no decision)."""
    authenticated_by: str | None = None
    """How the answering actor (or a deciding expiry's, SPEC §13) was established:
    ``service:tokens``, ``service:jwt``, ``service:trusted-header``, ``agent-server``; None
    when a caller of the Python API or the CLI asserted it."""
    tenant: str | None = None
    """The tenant the interrupt was minted for (SPEC §15); None: minted without one."""
    approvers: tuple[str, ...] = ()
    """The principals whose votes completed a quorum (SPEC §15), in the order they
    voted; empty for any other answer."""

    @property
    def cursor(self) -> str:
        """This record's place in the audit's pages (SPEC §17), opaque: pass it as
        ``audit(after=...)`` to read the records after it."""
        index = -1 if self.action_index is None else self.action_index
        return cursors.encode(cursors.AUDIT, [self.thread_id, self.interrupt_id, index])

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: datetimes as ISO 8601 UTC."""
        return {
            "thread_id": self.thread_id,
            "interrupt_id": self.interrupt_id,
            "name": self.name,
            "payload": self.payload,
            "minted_at": self.minted_at.isoformat(),
            "outcome": self.outcome,
            "reason": self.reason,
            "actor": self.actor,
            "response": self.response,
            "resolved_at": None if self.resolved_at is None else self.resolved_at.isoformat(),
            "attempts": [{**a, "at": a["at"].isoformat()} for a in self.attempts],
            "decision": self.decision,
            "action": self.action,
            "action_index": self.action_index,
            "requested_by": self.requested_by,
            "decision_source": self.decision_source,
            "authenticated_by": self.authenticated_by,
            "tenant": self.tenant,
            "approvers": list(self.approvers),
        }

    def as_csv_row(self) -> list[str]:
        """Spreadsheet-ready cells: dicts JSON-encoded, None as empty, a cell a spreadsheet
        would take for a formula quoted (:func:`csv_cell`)."""
        cells = []
        for value in self.as_dict().values():
            if value is None:
                cells.append("")
            elif isinstance(value, dict | list):
                cells.append(csv_cell(json.dumps(value, ensure_ascii=False, sort_keys=True)))
            else:
                cells.append(csv_cell(str(value)))
        return cells


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""A cell beginning with one of these is a formula to a spreadsheet (OWASP's CSV injection)."""


def csv_cell(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows as text: one that begins with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return gets a ``'`` in front (an approver's
    ``=HYPERLINK(...)`` in a thread id or a reason then stays a string)."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def audit_csv(records: Iterable[AuditRecord]) -> str:
    """The records as CSV: the header row (:data:`AUDIT_FIELDS`), then one row each
    (:meth:`AuditRecord.as_csv_row`); what ``/api/audit?format=csv`` and
    ``audit --format csv`` write."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(AUDIT_FIELDS)
    writer.writerows(r.as_csv_row() for r in records)
    return text.getvalue()


# --- lazy fields --------------------------------------------------------------------
#
# audit() reads tens of thousands of records of which a caller often reads a few fields:
# decoding every payload, answer, decision and time up front was most of its time. A
# record it builds holds those fields as read from the database (:class:`_Stored`) and
# decodes one on its first read, in place, through the descriptors below; the class, its
# fields, its equality, hash, repr, pickling and renderings are the dataclass's, which
# read every field through them. A record built by a caller holds plain values, as always.
# Two threads reading one field of a fresh record first at once may each decode it: both
# get equal values, and the record keeps one of them.


class _Stored:
    """The fields of a record not decoded yet: the audit's row they come from, which
    each :class:`_Lazy` decodes its own column of (see :func:`audit_rows`)."""

    __slots__ = ("row",)

    def __init__(self, row: Sequence[Any]) -> None:
        self.row = row


class _Lazy:
    """The descriptor of a lazy field: reads the field's slot; a :class:`_Stored` there is
    decoded by ``decode(record, row)``, which puts the value in the slot."""

    __slots__ = ("slot", "decode")

    def __init__(self, slot: Any, decode: Callable[[AuditRecord, Sequence[Any]], None]) -> None:
        self.slot = slot
        self.decode = decode

    def __get__(self, record: AuditRecord | None, owner: type | None = None) -> Any:
        if record is None:
            return self
        value = self.slot.__get__(record, owner)
        if type(value) is _Stored:
            self.decode(record, value.row)
            value = self.slot.__get__(record, owner)
        return value

    def __set__(self, record: AuditRecord, value: Any) -> None:
        self.slot.__set__(record, value)

    def __delete__(self, record: AuditRecord) -> None:
        self.slot.__delete__(record)


_SLOTS = {f.name: AuditRecord.__dict__[f.name] for f in fields(AuditRecord)}
"""Each field's slot (the class's own member descriptors, before any is made lazy)."""

_Unfrozen = make_dataclass(
    "_Unfrozen", list(AUDIT_FIELDS), slots=True, eq=False, repr=False, match_args=False
)
"""An AuditRecord being built: the same slots in the same layout, plainly assignable.
The frozen dataclass's ``__init__`` stores each field with ``object.__setattr__``, a
call per field (a third of building 10,000 records); audit() fills one of these and
makes it the AuditRecord it is (``__class__``: the same slots, so nothing is copied;
Python refuses the assignment, loudly, if the layouts ever differ)."""

_loads = json.loads
# json.loads' own scanner, without its wrapping (typeshed does not declare it).
_scan: Callable[[str, int], tuple[Any, int]]
_scan = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009
# The columns of audit_rows' first result that the lazy fields decode.
_PAYLOAD, _RESPONSE, _DECISIONS, _RESOLVED_AT = 3, 9, 10, 11


def _json(raw: str | None) -> Any:
    """``json.loads(raw)`` (None for NULL): the scanner alone when it reads all of
    ``raw``; anything else (whitespace around it, trailing text) goes to ``json.loads``,
    which reads or refuses it as ever."""
    if raw is None:
        return None
    try:
        value, end = _scan(raw, 0)
    except StopIteration:
        return _loads(raw)
    return value if end == len(raw) else _loads(raw)


def _decode_payload(record: AuditRecord, row: Sequence[Any]) -> None:
    _SLOTS["payload"].__set__(record, _json(row[_PAYLOAD]))


def _decode_response(record: AuditRecord, row: Sequence[Any]) -> None:
    _SLOTS["response"].__set__(record, _json(row[_RESPONSE]))


def _decode_resolved_at(record: AuditRecord, row: Sequence[Any]) -> None:
    _SLOTS["resolved_at"].__set__(record, utc(row[_RESOLVED_AT]))


def _decode_decision(record: AuditRecord, row: Sequence[Any]) -> None:
    """Both ``decision`` and ``decision_source`` of an answer's (or a deciding expiry's)
    one record: they come from one reading of its recorded decisions (else, for an answer,
    of its payload and response)."""
    stored = _json(row[_DECISIONS])
    if record.outcome != "resumed":
        word, source = _closed_decision(stored)
    else:
        word, source = _decided(
            stored if isinstance(stored, list) else None, 0,
            lambda: (record.payload, record.response), record.interrupt_id, [],
        )
    _SLOTS["decision"].__set__(record, word)
    _SLOTS["decision_source"].__set__(record, source)


for _name, _decode in (
    ("payload", _decode_payload),
    ("response", _decode_response),
    ("resolved_at", _decode_resolved_at),
    ("decision", _decode_decision),
    ("decision_source", _decode_decision),
):
    setattr(AuditRecord, _name, _Lazy(_SLOTS[_name], _decode))


def _decided(
    stored: list[Any] | None,
    index: int,
    answer: Callable[[], tuple[Any, Any]],
    interrupt_id: str,
    derived: list[list[str | None]],
) -> tuple[str | None, str | None]:
    """``(decision, decision_source)`` of an answer's ``index``-th decision; ``answer()``
    gives its ``(payload, response)``, asked only when the answer recorded no decision."""
    word = stored[index] if stored is not None and index < len(stored) else None
    if isinstance(word, str):
        return reported(word), "recorded"
    if not derived:  # once per answer, and only for one that recorded no decision
        payload, response = answer()
        derived.append(builtin(payload, response, breakpoint=native.is_breakpoint(interrupt_id)))
    found = derived[0][index] if index < len(derived[0]) else None
    return (found, "derived") if found is not None else (None, None)


def _closed_decision(stored: Any) -> tuple[str | None, str | None]:
    """``(decision, decision_source)`` of an expiry: the decision it recorded, for the whole
    interrupt (Agent Inbox's thread-level ignore, SPEC §13), else none; never derived."""
    word = reported(stored[0]) if isinstance(stored, list) and stored else None
    return (word, "recorded") if word is not None else (None, None)


def _attempts(attempt_rows: Sequence[Sequence[Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The refused answers of ``attempt_rows``, by interrupt, in the order read."""
    attempts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t_id, i_id, a_actor, a_why, a_error, a_at, a_response in attempt_rows:
        if refused_assignment({"why": a_why, "response": None if a_response is None else _json(a_response)}):
            continue  # an assignment refused, not an answer (SPEC §15)
        attempts.setdefault((t_id, i_id), []).append(
            {"actor": a_actor, "why": a_why, "error": a_error, "at": utc(a_at)}
        )
    return attempts


def _records(
    rows: Sequence[Sequence[Any]],
    attempts: dict[tuple[str, str], list[dict[str, Any]]],
    quorums: dict[tuple[str, str], tuple[str, ...]],
    *,
    since: datetime | None,
    until: datetime | None,
    decision: str | None,
    records: list[AuditRecord],
    skip: tuple[str, str, int] | None = None,
    limit: int | None = None,
) -> None:
    """Append to ``records`` the records of ``rows`` (mints with their endings, in the
    order read) that the filters keep, up to ``limit`` records in all; ``skip``: the
    records of that interrupt up to that action index were read already."""
    append = records.append
    for row in rows:
        if limit is not None and len(records) >= limit:
            return
        (
            t_id, i_id, name, payload, minted_text, native_mint,
            end_type, end_actor, end_reason, end_response, end_decisions, end_text,
            requested_by, authenticated_by, tenant, _position, _version,
        ) = row
        minted_at: Any = utc(minted_text)  # NULL only where a column was tampered with
        if since is not None and minted_at < since:
            continue
        if until is not None and minted_at > until:
            continue
        resumed = end_type == RESUMED
        if end_type is None:
            outcome, reason = "pending", None
        elif resumed:
            outcome, reason = "resumed", None
        else:
            outcome, reason = "expired", end_reason
        tried = attempts.get((t_id, i_id)) if attempts else None
        if native_mint:
            # A batched request is one record per action request: decode it here.
            decoded, response = _json(payload), _json(end_response) if resumed else None
            requests = native.action_requests(decoded)
            if requests:
                recorded = _json(end_decisions)
                end_at = utc(end_text)
                derived: list[list[str | None]] = []
                for index, action in enumerate(requests):
                    if skip is not None and (t_id, i_id) == skip[:2] and index <= skip[2]:
                        continue
                    if limit is not None and len(records) >= limit:
                        return
                    word, source = (
                        _decided(recorded if isinstance(recorded, list) else None, index,
                                 partial(tuple, (decoded, response)), i_id, derived)
                        if resumed else _closed_decision(recorded)
                    )
                    if decision is not None and word != decision:
                        continue
                    append(AuditRecord(
                        t_id, i_id, name, decoded, minted_at, outcome, reason, end_actor,
                        response, end_at, [] if tried is None else tried, word, action, index,
                        requested_by, source, authenticated_by, tenant, quorums.get((t_id, i_id), ()),
                    ))
                continue
        if skip is not None and (t_id, i_id) == skip[:2]:
            continue  # the interrupt's one record was read already
        lazy = _Stored(row)  # the payload; an ending's time, an answer's response and decision
        answer = lazy if resumed else None
        decided = answer if resumed or end_decisions is None else lazy  # an expiry's recorded one
        record = _Unfrozen(
            t_id, i_id, name, lazy, minted_at, outcome, reason, end_actor, answer,
            None if end_text is None else lazy, [] if tried is None else tried, decided,
            None, None, requested_by, decided, authenticated_by, tenant, quorums.get((t_id, i_id), ()),
        )
        record.__class__ = AuditRecord
        if decision is not None and record.decision != decision:
            continue
        append(record)


def audit(
    conn: Connection,
    *,
    thread_id: str | None,
    actor: str | None,
    since: datetime | None,
    until: datetime | None,
    decision: str | None = None,
    scope: frozenset[str | None] | None = None,
    limit: int | None = None,
    after: str | None = None,
) -> list[AuditRecord]:
    """One record per interrupt from the audit columns (SPEC §3 ``audit``), in the audit's
    order: ``minted_at``, mints of the same time in log order; ``since``/``until`` bound
    ``minted_at``; ``decision`` keeps the records whose reported decision is exactly that.

    A record's ``payload``, ``response``, ``resolved_at``, ``decision`` and
    ``decision_source`` are decoded when first read (see :class:`_Lazy`), except where
    the audit needs them itself: a batched HITL request's records, and every decision
    under a ``decision`` filter. ``scope``: only the interrupts minted for those tenants
    (``None`` among them: minted without one; SPEC §15), and the actor of a superseded
    marker's expiry -- the requester of the interrupt that superseded it -- only where
    the scope may see that interrupt (else None, and an ``actor`` filter does not match
    it: a hidden name reads as an unknown one).

    ``limit`` / ``after`` read one page (:func:`audit_page`); without either, every page.

    Raises:
        InvalidInputError: (a ValueError) ``after`` is not a record's cursor.
    """
    return audit_page(
        conn, thread_id=thread_id, actor=actor, since=since, until=until,
        decision=decision, scope=scope, limit=limit, after=after,
    )


_CHUNK = 1000
"""Rows read per statement by a read without a limit (with one: the limit; under a
``decision`` filter, a row of mixed decisions, :data:`~symfonic_store.db.statements.audit_rows.MIXED`,
may hold no record that matches, and the next statement reads on)."""


def audit_page(
    conn: Connection,
    *,
    thread_id: str | None,
    actor: str | None,
    since: datetime | None,
    until: datetime | None,
    decision: str | None,
    scope: frozenset[str | None] | None,
    limit: int | None,
    after: str | None,
) -> list[AuditRecord]:
    """Up to ``limit`` records (all, when None) after the record whose cursor is
    ``after`` (from the first, when None), in the audit's order. Keyset paging (SPEC §17)
    on the audit's rows (:mod:`symfonic_store.db.statements.audit_rows`): each statement
    walks an index of the filter that drives it from the cursor's place, every other
    filter checked in SQL, so a page costs what it returns. A record there at the first
    page is on exactly one page however others append meanwhile (a key never changes).

    Raises:
        InvalidInputError: (a ValueError) ``after`` is not a record's cursor (or names an
            interrupt no longer in the log: archived).
    """
    start: tuple[Any, int] | None = None
    skip: tuple[str, str, int] | None = None
    inclusive = False
    if after is not None:
        t_id, i_id, index = cursors.decode(after, cursors.AUDIT, cursors.AUDIT_SHAPE)
        found = mint_key(conn, t_id, i_id)
        if found is not None and scope is not None and mint_tenants(conn, [(t_id, i_id)]).get((t_id, i_id)) not in scope:
            found = None  # another tenant's: told exactly as an unknown one (SPEC §15)
        start = None if found is None else audit_rows.row_key(conn, found[0])
        if start is None:
            raise InvalidInputError("after", "its interrupt is not in the log (archived, or never minted)")
        if thread_id is not None and t_id != thread_id:
            raise InvalidInputError("after", f"a cursor of another thread than {thread_id!r}")
        if index >= 0:  # a batched request's record: from its row on, its later records
            inclusive, skip = True, (t_id, i_id, index)
    since, until, empty = _in_range(since, until)
    if empty:
        return []
    chunk = _CHUNK if limit is None else limit
    records: list[AuditRecord] = []
    while limit is None or len(records) < limit:
        rows = audit_rows.page_rows(
            conn, thread_id=thread_id, actor=actor, decision=decision, scope=scope,
            since=since, until=until, start=start, inclusive=inclusive, limit=chunk,
        )
        if not rows:
            break
        positions = [row[15] for row in rows]
        attempts = _attempts(audit_rows.page_attempts(conn, positions))
        quorums = quorum_approvers_at(conn, positions)
        _records(
            rows, attempts, quorums, since=None, until=None, decision=decision,
            records=records, skip=skip, limit=limit,
        )
        if len(rows) < chunk:
            break
        start, inclusive, skip = (utc(rows[-1][4]), rows[-1][15]), False, None
    return records


def _in_range(
    since: datetime | None, until: datetime | None
) -> tuple[datetime | None, datetime | None, bool]:
    """``since``/``until`` as bounds a UTC column can hold: one beyond what UTC can say
    (``datetime.min`` at +14:00 is before year 1 there) bounds nothing, or everything --
    then nothing is kept (``empty``)."""
    empty = False
    if since is not None:
        try:
            since.astimezone(UTC)
        except OverflowError:  # before year 1 in UTC: bounds nothing; after 9999: keeps nothing
            empty, since = since.year > 1, None
    if until is not None:
        try:
            until.astimezone(UTC)
        except OverflowError:
            empty, until = empty or until.year == 1, None
    return since, until, empty


def _row_of(rows: list[AuditRecord], actions: int | None, mint: Sequence[Any]) -> dict[str, Any]:
    """The audit row of one interrupt (``0025_audit_rows``) from its records."""
    words = {r.decision for r in rows}
    return {
        "position": mint[15], "thread_id": mint[0], "interrupt_id": mint[1],
        "minted_at": rows[0].minted_at, "tenant": mint[14], "actions": actions,
        "outcome": rows[0].outcome, "actor": mint[7],
        "decision": words.pop() if len(words) == 1 else audit_rows.MIXED,
        "superseded_by": mint[17],
    }


def rebuild_rows(conn: Connection) -> int:
    """Replace the audit's rows (``symfonic_audit_rows``) by what the log says, each
    decision the word the audit reports (derived ones too); returns the rows written."""
    audit_rows.delete_all(conn)
    written, start = 0, 0
    while True:
        mints = log_audit_rows(conn, start=start, limit=_CHUNK)
        batch = []
        for mint in mints:
            records: list[AuditRecord] = []
            _records([mint[:17]], {}, {}, since=None, until=None, decision=None, records=records)
            requests = native.action_requests(_json(mint[3])) if mint[5] else None
            batch.append(_row_of(records, len(requests) if requests else None, mint))
        audit_rows.insert(conn, batch)
        written += len(batch)
        if len(mints) < _CHUNK:
            return written
        start = mints[-1][15] + 1
