"""The rules for LangGraph's own interrupts (SPEC §8): what a thread waits on, and
answers admitted in two phases.

Like :mod:`~symfonic_store.store.lifecycle`, each function runs inside a write
transaction on a synchronous ``Connection`` and appends through a
:class:`~symfonic_store.store.append.ThreadWriter`; inputs are already validated.

- :func:`record_waiting` mints every interrupt a thread waits on that the store has
  not seen, and closes (``superseded``, ``detected_by: gateway``) every open one
  LangGraph no longer waits on — unless an answer to it is in flight.
- :func:`claim` is an answer's first phase: the rules of :mod:`.rules` it shares with
  ``store.resume`` (unknown, resolved, expired, stale by TTL, the approvers policy),
  then a claim row whose
  primary key lets one answer hold the interrupt; a concurrent answer is refused
  (``in_progress``, naming the claimant). The claim commits before the graph runs.
- :func:`confirm` turns the claim into ``interrupt.resumed`` once LangGraph consumed the
  answer; :func:`release` into ``interrupt.resume_rejected`` (``not_taken``), and the
  interrupt reopens. A claim whose process died and whose outcome nobody knows refuses
  every answer until an operator settles it (:mod:`.settlement`).
- :func:`record_task_writes` and :func:`record_checkpoint_moved` are what the recording
  checkpointer sees of graphs invoked without the gateway.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection

from .. import native, validation
from ..db.statements.log import interrupt_events, was_minted
from ..db.statements.native import (
    claim_row,
    claim_rows,
    delete_claim,
    insert_claim,
    open_row,
    open_rows,
    waits_at,
)
from ..db.statements.threads import load_thread
from ..decisions import decide, decide_unrefusable, is_reject
from ..errors import (
    InterruptInProgressError,
    InterruptOutcomeUnknownError,
    InvalidInputError,
    ResumeNotAllowedError,
    UnknownInterruptError,
)
from ..events import EXPIRED, MINTED, RESUME_REJECTED, RESUMED
from ..projection_gaps import missing_row
from . import rules as rule
from .append import Refusal, ThreadWriter, flush
from .lifecycle import Answer
from .rules import Rules
from .settlement import OUTCOME_UNKNOWN, append_taken, is_marker_run, unknown_record


def json_safe(value: Any) -> Any:
    """A JSON value for what a graph handed over (anything not JSON becomes text)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError, RecursionError):
        return {"value": str(value)[:10_000]}


def _when(moment: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


# --- what a thread waits on ----------------------------------------------------------


def _mint_data(
    item: dict[str, Any], graph: str | None, identity: dict[str, Any] | None = None
) -> dict[str, Any]:
    value = item["value"]
    breakpoint = bool(item.get("breakpoint"))
    return {
        **(identity or {}),
        "name": None if breakpoint else native.interrupt_name(value),
        "payload": json_safe(value),
        "source": native.NATIVE_SOURCE,
        "minted_at": time.time(),
        "tool_call_id": value.get("tool_call_id") if isinstance(value, dict) else None,
        "run_id": None,
        "graph": graph,
        "checkpoint_id": item.get("checkpoint_id"),
        "checkpoint_ns": item.get("checkpoint_ns") or "",
        "task_id": item.get("task_id"),
        "breakpoint": breakpoint,
    }


def _is_markers(w: ThreadWriter, value: Any) -> bool:
    """Is ``value`` the seed node's interrupt for a marker this thread minted (N1)?"""
    if not native.is_marker_value(value):
        return False
    marker_id = value["interrupt_id"]
    if w.state.pending_interrupt_id == marker_id:
        return True
    return w.existed and was_minted(w.conn, w.thread_id, marker_id)


def mint_waiting(
    w: ThreadWriter,
    items: list[dict[str, Any]],
    opened: dict[str, dict[str, Any]],
    *,
    actor: str | None,
    graph: str | None,
    identity: dict[str, Any] | None = None,
    tenant: str | None = None,
) -> list[str]:
    """Mint each of ``items`` the store has not seen (I4); returns the ids minted.

    ``identity``: how the actor was established (``authenticated_by``, ``claimed_actor``;
    :func:`symfonic_store.langgraph.actor.actor_of`), recorded in each mint's data."""
    minted = []
    for item in items:
        interrupt_id = item["interrupt_id"]
        if interrupt_id in opened or interrupt_id in minted:
            continue
        if not item.get("breakpoint") and _is_markers(w, item["value"]):
            continue  # the marker's own interrupt: the node and the router record it
        if w.existed and was_minted(w.conn, w.thread_id, interrupt_id):
            continue
        w.append(
            MINTED, interrupt_id=interrupt_id, actor=actor, data=_mint_data(item, graph, identity),
            tenant=tenant,
        )
        minted.append(interrupt_id)
    return minted


def record_waiting(
    conn: Connection,
    thread_id: str,
    waiting: list[dict[str, Any]],
    *,
    actor: str | None,
    graph: str | None,
    tenant: str | None = None,
) -> list[str]:
    """Record what the thread waits on (mints, for ``tenant``) and what it stopped waiting
    on (superseded).

    A breakpoint is minted only when ``declared`` (absent: declared) and while no answer's
    claim on the thread is live: the same state is a run in flight between two nodes,
    which is no interrupt (SPEC §8). A claim a sweep recorded as ``outcome_unknown`` is no
    longer live (its process is gone), nor is a marker run's (:func:`is_marker_run`): the
    graph it runs is the one recording where it paused. One already open stays open while
    waited on."""
    w = ThreadWriter(conn, thread_id)
    if not w.existed and not waiting:
        return []
    opened = {r["interrupt_id"]: r for r in open_rows(conn, thread_id)} if w.existed else {}
    claimed = claim_rows(conn, thread_id) if w.existed else {}
    live = any(
        not is_marker_run(held) and unknown_record(conn, thread_id, interrupt_id, held) is None
        for interrupt_id, held in claimed.items()
    )
    mintable = [item for item in waiting if not (item.get("breakpoint") and (_undeclared(item) or live))]
    minted = mint_waiting(w, mintable, opened, actor=actor, graph=graph, tenant=tenant)
    still = {item["interrupt_id"] for item in waiting}
    if opened:
        for interrupt_id in opened:
            if interrupt_id not in still and interrupt_id not in claimed:
                w.append(
                    EXPIRED,
                    interrupt_id=interrupt_id,
                    data={"reason": "superseded", "detected_by": "gateway"},
                )
    flush(conn, [w])
    return minted


def _undeclared(item: Mapping[str, Any]) -> bool:
    """A breakpoint-shaped pause no ``interrupt_before``/``interrupt_after`` declared."""
    return bool(item.get("breakpoint")) and item.get("declared", True) is False


def waiting_settled(
    conn: Connection, thread_id: str, waiting: list[dict[str, Any]]
) -> tuple[bool, list[str]]:
    """Read-only: ``(True, [])`` when :func:`record_waiting` would write nothing -- every
    waiting interrupt is open already, recorded before, or the thread's marker, and
    every open one is still waited on. Once true for an interrupt this stays true (a
    mint is never undone), so the answer holds without the write lock."""
    opened = {r["interrupt_id"] for r in open_rows(conn, thread_id)}
    ids = {item["interrupt_id"] for item in waiting}
    if not opened <= ids:
        return False, []
    thread = load_thread(conn, thread_id, for_update=False)
    marker_id = None if thread is None else thread.pending_interrupt_id
    for item in waiting:
        interrupt_id = item["interrupt_id"]
        if interrupt_id in opened or _undeclared(item):
            continue  # open already, or never minted
        value = item["value"]
        if native.is_marker_value(value) and value["interrupt_id"] == marker_id:
            continue
        if thread is not None and was_minted(conn, thread_id, interrupt_id):
            continue
        return False, []
    return True, []


# --- answers: claim, confirm, release --------------------------------------------------


def claim(
    conn: Connection,
    rules: Rules,
    thread_id: str,
    interrupt_id: str,
    response: Any,
    actor: str,
    authenticated_by: str | None = None,
    approvers: tuple[str, ...] = (),
) -> dict[str, Any] | Refusal:
    """An answer's first phase: refuse it (recorded), or claim the interrupt for it.

    The rules asked, in this order, are those of :mod:`.rules`. The answer's decision is
    taken now, while it can still be refused (SPEC §12: a decisions function that fails
    raises :class:`InvalidInputError`, nothing written), and held with the claim until
    the answer is recorded."""
    w = ThreadWriter(conn, thread_id)
    answer = Answer(w, interrupt_id, response, actor, data={"via": "gateway"})
    where = answer.where
    if not w.existed:
        # No projection row, yet the log has the thread: the row went missing.
        gap = missing_row(conn, thread_id)
        if gap is not None:
            return Refusal(gap)
        # A mistyped thread id: refused, and nothing written there (I10).
        return Refusal(answer.error(
            UnknownInterruptError, f"{where} is unknown: the thread has no events; check the thread id"
        ))
    # The interrupt's own row and events, never the rest of the thread's.
    row = open_row(conn, thread_id, interrupt_id)
    if row is None:
        minted, ending = rule.mint_and_ending(interrupt_events(conn, thread_id, interrupt_id))
        if minted is not None and ending is None and rule.wrong_path(minted, native=True):
            raise InvalidInputError(
                "interrupt_id", f"{where} is a seed marker: answer it with store.resume(...)"
            )
        over = rule.ended(ending)
        if over is not None and ending is not None:
            return answer.refuse_ended(over, ending, answered="answered")
        # Neither minted nor ended here (an ending implies its mint).
        return answer.refuse(rule.UNKNOWN, answer.error(
            UnknownInterruptError,
            f"{where} is unknown: LangGraph is not waiting on it and nothing was minted "
            "with that id; `symfonic-store pending --thread T` (or store.open_interrupts(thread_id)) "
            "lists what is waiting",
        ))
    held = claim_row(conn, thread_id, interrupt_id)
    busy = rule.held(
        held,
        outcome_unknown=held is not None
        and unknown_record(conn, thread_id, interrupt_id, held) is not None,
    )
    if busy is not None and held is not None:
        claimant, claimed_at = held["actor"], held["claimed_at"]
        if busy.why == OUTCOME_UNKNOWN:
            return answer.refuse(busy.why, answer.error(
                InterruptOutcomeUnknownError,
                f"{where} was claimed by {claimant!r} at {_when(claimed_at)}, whose "
                "process stopped before the checkpoint showed the answer taken: the graph may "
                "have acted. No answer is admitted until an operator settles it: "
                f"`symfonic-store settle {thread_id} {interrupt_id} --as taken|not-taken "
                "--actor WHO` (store.settle); this answer was not applied and has been recorded",
                claimant=claimant, claimed_at=claimed_at,
            ), claimant=claimant)
        return answer.refuse(busy.why, answer.error(
            InterruptInProgressError,
            f"{where} is being answered by {claimant!r} (claimed at {_when(claimed_at)}); "
            "this answer was not applied and has been recorded as rejected",
            claimant=claimant, claimed_at=claimed_at,
        ), claimant=claimant)
    # A native mint names no run (its ``run_id`` is None): only the TTL can make it stale.
    stale = rule.stale(
        {"minted_at": row["minted_at"]}, None, rules.ttl_seconds, breakpoint=bool(row["breakpoint"])
    )
    if stale is not None:
        return answer.refuse_stale(stale)
    view = {"name": row["name"], "interrupt_id": interrupt_id, "payload": row["payload"]}
    refused = rule.not_allowed(rules.approvers, thread_id, view, actor)
    if refused is not None:
        return answer.refuse(refused.why, answer.error(
            ResumeNotAllowedError,
            f"{actor!r} may not answer {where}: the approvers policy refuses it; "
            "the attempt has been recorded",
        ))
    decided = (
        # A breakpoint's decision is what the gateway does with it (run on, or not).
        None
        if row["breakpoint"]
        else decide(rules.decisions, row["name"], row["payload"], response)
    )
    if approvers and isinstance(decided, dict):
        decided = {**decided, "approvers": list(approvers)}  # a quorum's (SPEC §15), held with it
    insert_claim(
        conn,
        {
            "thread_id": thread_id,
            "interrupt_id": interrupt_id,
            "actor": actor,
            "response": response,
            "claimed_at": time.time(),
            "authenticated_by": authenticated_by,
            "decided": decided,
        },
    )
    return row


def confirm(
    conn: Connection,
    thread_id: str,
    interrupt_id: str,
    *,
    decision: str | None = None,
    via: str = "gateway",
) -> bool:
    """The claim's second phase: LangGraph consumed the answer. False if nothing to do."""
    held = claim_row(conn, thread_id, interrupt_id)
    if held is None:
        return False  # settled already (the recording checkpointer saw it first)
    w = ThreadWriter(conn, thread_id)
    row = open_row(conn, thread_id, interrupt_id)
    delete_claim(conn, thread_id, interrupt_id)
    if row is None:
        return False  # ended meanwhile (expired by an operator): the ending stands
    append_taken(w, interrupt_id, row, held, via=via, decision=decision)
    flush(conn, [w])
    return True


def confirm_settled(conn: Connection, thread_id: str, interrupt_id: str) -> tuple[bool, bool]:
    """Read-only: ``(True, False)`` when no claim is held -- settled already (by the
    checkpointer, in the transaction of the step that consumed the answer)."""
    if claim_row(conn, thread_id, interrupt_id) is None:
        return True, False
    return False, False


def release(
    conn: Connection, thread_id: str, interrupt_id: str, *, error: str, via: str = "gateway"
) -> bool:
    """The graph did not take the claimed answer: record it, and reopen the interrupt."""
    held = claim_row(conn, thread_id, interrupt_id)
    if held is None:
        return False
    w = ThreadWriter(conn, thread_id)
    delete_claim(conn, thread_id, interrupt_id)
    w.append(
        RESUME_REJECTED,
        interrupt_id=interrupt_id,
        actor=held["actor"],
        data={"response": held["response"], "why": "not_taken", "error": error, "via": via},
    )
    flush(conn, [w])
    return True


# --- what the recording checkpointer sees --------------------------------------------


def record_task_writes(
    conn: Connection, record: dict[str, Any], rules: Rules | None = None
) -> None:
    """A task's interrupt and answer writes: mints, consumed and refused answers.

    An answer given straight to the graph (``via: direct``) was taken already: a decisions
    function that fails on it is recorded (``decision_error``), not obeyed."""
    thread_id = record["thread_id"]
    identity = record.get("identity") or {}
    w = ThreadWriter(conn, thread_id)
    opened = {r["interrupt_id"]: r for r in open_rows(conn, thread_id)} if w.existed else {}
    if record["answered"]:
        target = next(
            (r for r in opened.values() if r["task_id"] == record["task_id"] and not r["breakpoint"]),
            None,
        )
        if target is not None:
            interrupt_id = target["interrupt_id"]
            held = claim_row(conn, thread_id, interrupt_id)
            if held is not None:
                if record["error"] is None:  # the gateway's answer, consumed
                    delete_claim(conn, thread_id, interrupt_id)
                    # Delivered through an Agent Server (SPEC §13): the run's user beside
                    # the claim's actor.
                    by_server = identity.get("authenticated_by") == "agent-server"
                    extra = {"server_user": record["actor"]} if by_server else None
                    append_taken(w, interrupt_id, target, held, extra=extra)
                    del opened[interrupt_id]
                # else: the gateway releases its own claim
            else:
                answer = json_safe(record["answer"])
                if record["error"] is None:
                    w.append(
                        RESUMED,
                        interrupt_id=interrupt_id,
                        actor=record["actor"],
                        data={
                            "response": answer,
                            "via": "direct",
                            **identity,
                            **decide_unrefusable(
                                None if rules is None else rules.decisions,
                                target["name"],
                                target["payload"],
                                answer,
                            ),
                        },
                    )
                    del opened[interrupt_id]
                else:
                    w.append(
                        RESUME_REJECTED,
                        interrupt_id=interrupt_id,
                        actor=record["actor"],
                        data={
                            "response": answer,
                            "why": "not_taken",
                            "error": record["error"],
                            "via": "direct",
                            **identity,
                        },
                    )
    items = [
        {
            "interrupt_id": iv["interrupt_id"],
            "value": iv["value"],
            "task_id": record["task_id"],
            "checkpoint_id": record["checkpoint_id"],
            "checkpoint_ns": record["checkpoint_ns"],
            "breakpoint": False,
        }
        for iv in record["interrupts"]
    ]
    mint_waiting(
        w, items, opened, actor=record["actor"], graph=record.get("graph"),
        identity={**identity, **(record.get("served") or {})}, tenant=record.get("tenant"),
    )
    flush(conn, [w])


def record_checkpoint_moved(
    conn: Connection,
    thread_id: str,
    checkpoint_id: str,
    checkpoint_ns: str,
    *,
    source: str | None,
    actor: str | None,
    decision: str | None = None,
    decided_by: str | None = None,
    authenticated_by: str | None = None,
    identity: Mapping[str, str] | None = None,
) -> None:
    """A new checkpoint after ``checkpoint_id``: what LangGraph waited on there is over.

    ``decision``: what the update that wrote it decided of the interrupts it closes
    (``ignore`` for Agent Inbox's thread-level ignore, SPEC §13), recorded on each with
    ``decided_by`` as its actor (and ``authenticated_by``), ``detected_by: checkpointer``.

    After new input or ``update_state`` an open interrupt raised at that checkpoint is
    superseded (after a completed step it was answered: the task's writes say how); an
    open breakpoint there
    that the graph ran past without the gateway (``invoke(None)``: a ``loop`` step) is
    recorded as a bypass (``via: "direct"``), and one refused through the gateway is
    recorded as run past anyway. A claim in flight is left to its gateway.
    """
    w = ThreadWriter(conn, thread_id)
    if not w.existed:
        return
    claimed = claim_rows(conn, thread_id)
    for row in open_rows(conn, thread_id):
        if row["checkpoint_id"] != checkpoint_id or (row["checkpoint_ns"] or "") != checkpoint_ns:
            continue
        if row["interrupt_id"] in claimed:
            continue
        if source == "loop" and not row["breakpoint"]:
            # The step at that checkpoint completed: its interrupts were answered, and
            # the task's own writes (recorded by record_task_writes, in whatever order
            # LangGraph saves them) say how.
            continue
        if row["breakpoint"] and source == "loop":
            w.append(
                RESUMED,
                interrupt_id=row["interrupt_id"],
                actor=actor,
                data={"response": None, "via": "direct", "decision": "approve", "bypass": True, **(identity or {})},
            )
        else:
            closed: dict[str, Any] = {"reason": "superseded", "detected_by": "gateway"}
            if decision is not None:
                # The state update's own checkpoint said so, not a gateway (SPEC §13).
                closed["detected_by"] = "checkpointer"
                closed["decision"] = decision
                if authenticated_by is not None:
                    closed["authenticated_by"] = authenticated_by
            by = decided_by if decision is not None else None
            w.append(EXPIRED, interrupt_id=row["interrupt_id"], actor=by, data=closed)
    breakpoint_id = native.BREAKPOINT_PREFIX + checkpoint_id
    if source == "loop" and breakpoint_id not in claimed:
        history = interrupt_events(conn, thread_id, breakpoint_id)
        ending = next((e for e in history if e.type == RESUMED), None)
        if ending is not None and is_reject(ending.data.get("decision")):
            w.append(
                RESUME_REJECTED,
                interrupt_id=breakpoint_id,
                actor=actor,
                data={
                    "response": None,
                    "why": rule.ALREADY_RESOLVED,
                    "via": "direct",
                    "error": "the graph ran past a breakpoint that was refused",
                    **(identity or {}),
                },
            )
    flush(conn, [w])


def valid_identity(identity: Any) -> dict[str, str] | None:
    """How a recorded actor was established (:meth:`.actor.Actor.data`'s keys), validated:
    ``authenticated_by`` one of the audit's words, ``claimed_actor`` an actor id."""
    if not identity:
        return None
    if not isinstance(identity, Mapping) or set(identity) - {"authenticated_by", "claimed_actor"}:
        raise InvalidInputError("identity", "must be a dict of authenticated_by and claimed_actor")
    out: dict[str, str] = {}
    by = validation.authenticated_by(identity.get("authenticated_by"))
    if by is not None:
        out["authenticated_by"] = by
    claimed = validation.text_id(identity.get("claimed_actor"), "claimed_actor", optional=True)
    if claimed is not None:
        out["claimed_actor"] = claimed
    return out or None


def moved_settled(conn: Connection, thread_id: str, checkpoint_id: str) -> tuple[bool, None]:
    """Read-only: ``(True, None)`` when nothing was waited on at that checkpoint."""
    waited = waits_at(conn, thread_id, checkpoint_id, native.BREAKPOINT_PREFIX + checkpoint_id)
    return not waited, None


def interrupt_record(conn: Connection, thread_id: str, interrupt_id: str) -> dict[str, Any] | None:
    """The mint of an interrupt (its data, the requester, when), or None."""
    history = interrupt_events(conn, thread_id, interrupt_id)
    minted, _ = rule.mint_and_ending(history)
    if minted is None:
        return None
    return {**minted.data, "actor": minted.actor, "interrupt_id": interrupt_id, "thread_id": thread_id}
