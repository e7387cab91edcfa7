"""Every answer says what was decided (SPEC §12): recorded in the hashed data at admission,
derived for answers recorded before, asked of a decisions function first, filtered on
exactly, and shown beside the outcome; the requester and how the answerer was
authenticated are in every record.

The store tests run on SQLite and PostgreSQL; the LangGraph ones on real graphs, through
the gateway and straight through the recording checkpointer.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from attacker import insert_event
from cli_helpers import run_cli, run_json
from graph_rig import config_for, open_saver, ready
from langgraph.types import Command
from native_graphs import Wires, hitl_agent, node_graph
from rich.cells import cell_len

from symfonic_store import (
    AsyncInterruptStore,
    InterruptGateway,
    InterruptStore,
    InvalidInputError,
    StoredEvent,
)
from symfonic_store.db import schema
from symfonic_store.decisions import VOCABULARY, builtin
from symfonic_store.events import MINTED, RESUMED
from symfonic_store.services.audit import AUDIT_FIELDS

DRIVERS = ["invoke", "ainvoke"]
HITL = {
    "action_requests": [{"name": "wire", "args": {"to": "x"}}, {"name": "mail", "args": {}}],
    "review_configs": [],
}


mint = partial(factories.mint, name="refund", run_id="r1", actor="agent")


def resumed_data(store: InterruptStore, thread_id: str) -> dict[str, Any]:
    (event,) = [e for e in store.history(thread_id) if e.type == RESUMED]
    return dict(event.data)


def waiting(thread_id: str, interrupt_id: str, value: Any, task: str = "task-1") -> list[dict[str, Any]]:
    return [{"interrupt_id": interrupt_id, "value": value, "task_id": task, "checkpoint_id": "cp-1",
             "checkpoint_ns": "", "breakpoint": False}]


# --- the built-in rules ---------------------------------------------------------------


def test_the_built_in_rules_apply_in_order() -> None:
    """§8's shapes first, then a boolean `approved`, then a vocabulary word under decision/type/action in any case; else null."""
    assert builtin(HITL, {"decisions": [{"type": "edit"}, {"type": "respond"}]}) == ["edit", "respond"]
    assert builtin({"type": "tool_approval", "name": "wire"}, {"type": "reject"}) == ["reject"]
    inbox = {"action_request": {"action": "mail", "args": {}}, "config": {}}
    assert builtin(inbox, [{"type": "accept", "args": None}]) == ["accept"]
    assert builtin({"next": ["wire"]}, {"approved": True}, breakpoint=True) == ["approve"]
    assert builtin({"next": ["wire"]}, None, breakpoint=True) == ["reject"]
    assert builtin({"amount": 1}, {"approved": False, "type": "approve"}) == ["reject"]
    assert builtin({"amount": 1}, {"approved": True}) == ["approve"]
    assert builtin({"amount": 1}, {"decision": "Edit"}) == ["edit"]
    assert builtin({"amount": 1}, {"type": "RESPOND"}) == ["respond"]
    assert builtin({"amount": 1}, {"action": "iGnOrE"}) == ["ignore"]
    assert builtin({"amount": 1}, {"decision": "maybe", "approved": "yes"}) == [None]
    assert builtin({"amount": 1}, ["approve"]) == [None]
    assert builtin({"amount": 1}, None) == [None]
    assert set(VOCABULARY) == {"approve", "reject", "edit", "respond", "accept", "ignore", "response"}


# --- recorded at admission --------------------------------------------------------------


def test_a_marker_rejection_is_recorded_reject_in_the_hashed_data(store: InterruptStore) -> None:
    """The demo's {"approved": false}: data["decision"] is "reject" (covered by the hash), the audit says reject, recorded, and who asked."""
    mint(store, "t-no", "i-no")
    store.resume("t-no", "i-no", {"approved": False}, actor="bob")
    assert resumed_data(store, "t-no") == {"response": {"approved": False}, "decision": "reject"}
    (record,) = store.audit(thread_id="t-no")
    assert (record.outcome, record.decision, record.decision_source) == ("resumed", "reject", "recorded")
    assert (record.actor, record.requested_by, record.authenticated_by) == ("bob", "agent", None)
    assert store.verify().ok


def test_vocabulary_words_are_recorded_lower_case_and_anything_else_is_null(store: InterruptStore) -> None:
    """decision/type/action words in any case are recorded lower-case; a response without one records null and reports no source."""
    answers = {"t-1": {"decision": "Edit", "args": {"amount": 400}}, "t-2": {"type": "RESPOND"},
               "t-3": {"action": "ignore"}, "t-4": {"note": "looks fine"}}
    for thread_id, answer in answers.items():
        mint(store, thread_id, "i-" + thread_id)
        store.resume(thread_id, "i-" + thread_id, answer, actor="carol")
    assert [resumed_data(store, t)["decision"] for t in answers] == ["edit", "respond", "ignore", None]
    records = {r.thread_id: r for r in store.audit()}
    assert [(records[t].decision, records[t].decision_source) for t in answers] == [
        ("edit", "recorded"), ("respond", "recorded"), ("ignore", "recorded"), (None, None),
    ]
    pending = "t-5"
    mint(store, pending, "i-5")
    (open_record,) = store.audit(thread_id=pending)
    assert (open_record.decision, open_record.decision_source, open_record.requested_by) == (None, None, "agent")


def test_a_batched_hitl_answer_records_one_decision_per_action(store: InterruptStore) -> None:
    """A LangGraph batched HITL request claimed and confirmed: data["decisions"] one per action request."""
    store.record_waiting("t-b", waiting("t-b", "b" * 32, HITL), actor="agent", graph="payments")
    store.claim("t-b", "b" * 32, {"decisions": [{"type": "approve"}, {"type": "reject"}]}, actor="carol",
                authenticated_by="service:jwt")
    assert store.confirm("t-b", "b" * 32)
    data = resumed_data(store, "t-b")
    assert data["decisions"] == ["approve", "reject"] and data["authenticated_by"] == "service:jwt"
    records = store.audit(thread_id="t-b")
    assert [(r.action_index, r.decision, r.decision_source, r.authenticated_by, r.requested_by)
            for r in records] == [(0, "approve", "recorded", "service:jwt", "agent"),
                                  (1, "reject", "recorded", "service:jwt", "agent")]
    assert store.verify().ok


# --- a decisions function ------------------------------------------------------------------


def escalation(name: str | None, response: Any) -> str | None:
    """The rule of a shop that escalates: asked first, refusing nonsense with an exception."""
    if not isinstance(response, dict):
        return None
    if "boom" in response:
        raise RuntimeError("the rule failed")
    if "word" in response:
        return response["word"]  # type: ignore[no-any-return]
    return "escalate" if name == "refund" and response.get("escalate") else None


@pytest.mark.parametrize("driver", DRIVERS)
async def test_the_decisions_function_is_asked_first_and_what_it_gets_wrong_writes_nothing(
    migrated_url: str, driver: str
) -> None:
    """fn's word wins; None falls back to the built-in rules; a bad word or an exception is InvalidInputError and the interrupt stays pending."""
    with InterruptStore(migrated_url) as plain:
        plain.setup()
        mint(plain, "t-fn", "i-fn")
        mint(plain, "t-fall", "i-fall")
    store: Any = (AsyncInterruptStore if driver == "ainvoke" else InterruptStore)(migrated_url, decisions=escalation)
    try:
        before = list(await ready(store.history("t-fn")))
        for bad in ({"boom": 1}, {"word": "Approve"}, {"word": "x" * 33}, {"word": ""}, {"word": 7},
                    {"word": "no-dash"}):
            with pytest.raises(InvalidInputError) as refused:
                await ready(store.resume("t-fn", "i-fn", bad, actor="mallory"))
            assert refused.value.field == "decisions"
        assert list(await ready(store.history("t-fn"))) == before  # nothing written, not even a refusal
        await ready(store.resume("t-fn", "i-fn", {"escalate": True, "approved": True}, actor="alice"))
        await ready(store.resume("t-fall", "i-fall", {"approved": True}, actor="alice"))
        records = {r.thread_id: r for r in await ready(store.audit())}
        assert (records["t-fn"].decision, records["t-fn"].decision_source) == ("escalate", "recorded")
        assert records["t-fall"].decision == "approve"
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())
    with pytest.raises(InvalidInputError):
        InterruptStore(migrated_url, decisions="escalation")  # type: ignore[arg-type]


def test_the_decisions_function_refuses_a_claim_before_it_is_taken(migrated_url: str) -> None:
    """On the two-phase path the word is taken at the claim: a failing fn leaves no claim and no event; a good one is what confirm records."""
    with InterruptStore(migrated_url, decisions=escalation) as store:
        store.setup()
        store.record_waiting("t-c", waiting("t-c", "c" * 32, {"type": "tool_approval", "name": "refund"}),
                             graph="payments")
        before = store.history("t-c")
        with pytest.raises(InvalidInputError):
            store.claim("t-c", "c" * 32, {"boom": 1}, actor="mallory")
        assert store.history("t-c") == before
        assert "claimed_by" not in store.open_interrupts("t-c")[0]
        store.claim("t-c", "c" * 32, {"word": "second_look"}, actor="alice")
        store.confirm("t-c", "c" * 32)
        assert resumed_data(store, "t-c")["decision"] == "second_look"


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_real_hitl_agent_answered_through_the_gateway_records_the_functions_word(
    migrated_url: str, driver: str
) -> None:
    """HumanInTheLoopMiddleware through the gateway: fn's word for each action; a failing fn runs nothing and the answer can come again."""
    store: Any = (AsyncInterruptStore if driver == "ainvoke" else InterruptStore)(
        migrated_url, decisions=lambda name, response: "four_eyes" if name == "wire,wire" and "ok" in response else None
        if "boom" not in response else 1 / 0)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            wires = Wires()
            gate = InterruptGateway(hitl_agent(saver, wires, 999, 5), store)
            config = config_for("t-hitl")
            first = {"messages": [("user", "pay")]}
            await (gate.ainvoke(first, config) if driver == "ainvoke" else ready(gate.invoke(first, config)))
            (opened,) = await ready(store.open_interrupts("t-hitl"))
            bad = {"decisions": [{"type": "approve"}, {"type": "approve"}], "boom": True}
            with pytest.raises(InvalidInputError):
                if driver == "ainvoke":
                    await gate.aanswer("t-hitl", opened["interrupt_id"], bad, actor="mallory")
                else:
                    gate.answer("t-hitl", opened["interrupt_id"], bad, actor="mallory")
            assert wires.sent == []
            assert [e.type for e in await ready(store.history("t-hitl"))] == [MINTED]
            good = {"decisions": [{"type": "reject", "message": "no"}, {"type": "approve"}], "ok": True}
            if driver == "ainvoke":
                await gate.aanswer("t-hitl", opened["interrupt_id"], good, actor="alice",
                                   authenticated_by="service:tokens")
            else:
                gate.answer("t-hitl", opened["interrupt_id"], good, actor="alice",
                            authenticated_by="service:tokens")
            assert wires.sent == [5]
            records = await ready(store.audit(thread_id="t-hitl"))
            assert [(r.decision, r.decision_source, r.authenticated_by) for r in records] == [
                ("four_eyes", "recorded", "service:tokens")] * 2
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_direct_answer_the_function_fails_on_is_recorded_with_the_error(migrated_url: str, driver: str) -> None:
    """LangGraph already took it (recording checkpointer, via direct): decision null, data["decision_error"], and the audit derives approve."""
    store: Any = (AsyncInterruptStore if driver == "ainvoke" else InterruptStore)(migrated_url, decisions=escalation)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            graph = node_graph(store.recording_checkpointer(saver), Wires())
            cfg = config_for("t-direct", actor="requester")
            out = await (graph.ainvoke({}, cfg) if driver == "ainvoke" else ready(graph.invoke({}, cfg)))
            (paused,) = out["__interrupt__"]
            answer = Command(resume={paused.id: {"approved": True, "boom": 1}})
            cfg = config_for("t-direct", actor="carol")
            await (graph.ainvoke(answer, cfg) if driver == "ainvoke" else ready(graph.invoke(answer, cfg)))
            (resumed,) = [e for e in await ready(store.history("t-direct")) if e.type == RESUMED]
            assert resumed.data["via"] == "direct" and resumed.data["decision"] is None
            assert "raised RuntimeError" in resumed.data["decision_error"]
            (record,) = await ready(store.audit(thread_id="t-direct"))
            assert (record.decision, record.decision_source, record.requested_by) == ("approve", "derived", "requester")
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


# --- derived at read time ------------------------------------------------------------------


def _old_answer(store: InterruptStore, thread_id: str, interrupt_id: str, data: dict[str, Any]) -> None:
    """Append an answer the way earlier releases did: the data as they wrote it, hashed."""
    last = store.history(thread_id)[-1]
    insert_event(store, StoredEvent(
        position=last.position + 1000, thread_id=thread_id, version=last.version + 1, type=RESUMED,
        interrupt_id=interrupt_id, run_id=None, actor="old-bob", data=data,
        occurred_at=datetime(2026, 1, 2, tzinfo=UTC), hash="",
    ))


def test_answers_recorded_before_decisions_are_derived_and_old_breakpoint_words_read_as_new(
    store: InterruptStore,
) -> None:
    """No stored decision: derived with the built-in rules (source "derived"); "rejected" of a breakpoint reads "reject"; verify still agrees."""
    mint(store, "t-old", "i-old")
    _old_answer(store, "t-old", "i-old", {"response": {"approved": False}})
    mint(store, "t-odd", "i-odd")
    _old_answer(store, "t-odd", "i-odd", {"response": {"note": "fine"}, "decision": None})
    bp = "bp-" + "1" * 32
    store.record_waiting("t-bp", [{"interrupt_id": bp, "value": {"next": ["wire"]}, "task_id": None,
                                   "checkpoint_id": "1" * 32, "checkpoint_ns": "", "breakpoint": True}])
    _old_answer(store, "t-bp", bp, {"response": {"approved": False}, "via": "gateway", "decision": "rejected"})
    records = {r.thread_id: r for r in store.audit()}
    assert (records["t-old"].decision, records["t-old"].decision_source) == ("reject", "derived")
    assert (records["t-odd"].decision, records["t-odd"].decision_source) == (None, None)
    assert (records["t-bp"].decision, records["t-bp"].decision_source) == ("reject", "recorded")
    assert [r.thread_id for r in store.audit(decision="reject")] == ["t-old", "t-bp"]
    assert store.verify().ok


# --- the filter, the CLI, the CSV ------------------------------------------------------------


def _shop(store: InterruptStore) -> None:
    for thread_id, answer in (("t-a", {"approved": True}), ("t-r", {"approved": False}),
                              ("t-e", {"type": "edit"})):
        mint(store, thread_id, "i-" + thread_id)
        store.resume(thread_id, "i-" + thread_id, answer, actor="alice")
    mint(store, "t-p", "i-t-p")


async def test_the_decision_filter_is_an_exact_match_on_both_stores(store: InterruptStore, migrated_url: str) -> None:
    """audit(decision=D) keeps exactly the records that report D, sync and async; a prefix matches nothing."""
    _shop(store)
    assert [r.thread_id for r in store.audit(decision="reject")] == ["t-r"]
    assert [r.thread_id for r in store.audit(decision="edit", actor="alice")] == ["t-e"]
    assert store.audit(decision="rej") == [] and store.audit(decision="REJECT") == []
    async with AsyncInterruptStore(migrated_url) as astore:
        assert [r.thread_id for r in await astore.audit(decision="approve")] == ["t-a"]


def test_the_cli_filters_by_decision_and_shows_it_beside_the_outcome(store: InterruptStore, migrated_url: str) -> None:
    """`audit --decision reject`; the table has the decision right after the outcome and fits 120 columns; the CSV appends the new names."""
    _shop(store)
    records = run_json("audit", "--decision", "reject", "--format", "json", db=migrated_url)
    assert [(r["thread_id"], r["decision"], r["decision_source"], r["requested_by"]) for r in records] == [
        ("t-r", "reject", "recorded", "agent")]
    shown = run_cli("audit", db=migrated_url, env={"COLUMNS": "120"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= 120
    names = [line.split()[0] for line in lines if line.strip() and not line.startswith("audit:")]
    header = next((line for line in lines if line.lstrip().startswith("minted")), "")
    if "outcome" in header:  # one row per record: the column after outcome
        assert header.split()[header.split().index("outcome") + 1] == "decision"
    else:  # too narrow: one block per record, the decision line after the outcome line
        assert names[names.index("outcome") + 1] == "decision"
    assert "reject" in shown.stdout and "edit" in shown.stdout
    sheet = run_cli("audit", "--format", "csv", db=migrated_url)
    rows = list(csv.reader(io.StringIO(sheet.stdout)))
    assert rows[0] == list(AUDIT_FIELDS)
    assert rows[0][-5:] == ["requested_by", "decision_source", "authenticated_by", "tenant", "approvers"]
    assert rows[0][:14] == ["thread_id", "interrupt_id", "name", "payload", "minted_at", "outcome", "reason",
                            "actor", "response", "resolved_at", "attempts", "decision", "action", "action_index"]


def test_the_global_decisions_option_reaches_the_commands(store: InterruptStore, migrated_url: str, tmp_path: Path) -> None:
    """`--decisions MODULE:ATTR` before any command: resume records its word; its failure exits 2 with nothing written; a bad spec is named."""
    (tmp_path / "shop_rules.py").write_text(
        "def decide(name, response):\n"
        "    if response.get('boom'):\n"
        "        raise ValueError('no')\n"
        "    return 'escalate' if response.get('escalate') else None\n"
    )
    mint(store, "t-cli", "i-cli")
    failed = run_cli("--decisions", "shop_rules:decide", "resume", "t-cli", "i-cli", "--actor", "alice",
                     "--response", '{"boom": true}', db=migrated_url, cwd=tmp_path)
    assert failed.returncode == 2 and "decisions" in failed.stderr
    assert [e.type for e in store.history("t-cli")] == [MINTED]
    done = run_cli("--decisions", "shop_rules:decide", "resume", "t-cli", "i-cli", "--actor", "alice",
                   "--response", '{"escalate": true}', db=migrated_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert resumed_data(store, "t-cli")["decision"] == "escalate"
    records = run_json("--decisions", "shop_rules:decide", "audit", "--decision", "escalate", "--format",
                       "json", db=migrated_url, cwd=tmp_path)
    assert [r["thread_id"] for r in records] == ["t-cli"]
    missing = run_cli("--decisions", "shop_rules:nothing", "pending", db=migrated_url, cwd=tmp_path)
    assert missing.returncode == 2 and "--decisions" in missing.stderr


def test_a_claim_row_holds_the_decision_and_the_authentication_until_it_settles(store: InterruptStore) -> None:
    """While a claim is in flight its row holds how the actor was authenticated and the decision; confirm moves both into the event."""
    store.record_waiting("t-h", waiting("t-h", "h" * 32, {"type": "tool_approval", "name": "wire"}))
    store.claim("t-h", "h" * 32, {"type": "approve"}, actor="carol", authenticated_by="service:trusted-header")
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(schema.claims.c.authenticated_by, schema.claims.c.decided)).one()
    assert tuple(row) == ("service:trusted-header", {"decision": "approve"})
    store.confirm("t-h", "h" * 32)
    data = resumed_data(store, "t-h")
    assert (data["decision"], data["authenticated_by"]) == ("approve", "service:trusted-header")
    (record,) = store.audit(thread_id="t-h")
    assert json.loads(json.dumps(record.as_dict()))["authenticated_by"] == "service:trusted-header"


def test_authenticated_by_takes_only_the_words_of_spec_12(store: InterruptStore) -> None:
    """How the actor was authenticated is never free text: another word is refused with nothing written; a §12 word is recorded."""
    mint(store, "t-auth", "i-auth")
    with pytest.raises(InvalidInputError, match="authenticated_by"):
        store.resume("t-auth", "i-auth", {"approved": True}, actor="alice", authenticated_by="root")
    assert [e.type for e in store.history("t-auth")] == [MINTED]
    store.resume("t-auth", "i-auth", {"approved": True}, actor="alice", authenticated_by="agent-server")
    (record,) = store.audit(thread_id="t-auth")
    assert record.authenticated_by == "agent-server"
