"""Assignment at the store, wave 4 (SPEC §15 amended): the assignee trimmed and validated
in one place; a refused assignment recorded as ``assign_not_allowed`` with data ``{why,
assign, error}`` and left out of the audit's ``attempts`` and of the answer metrics, as
are refused assignments recorded in the earlier shape (a refused answer ``{"assign": to}``);
the quorum rule that a quorum interrupt goes only to a role. SQLite and PostgreSQL."""

from __future__ import annotations

import factories
import pytest

from symfonic_store import ASSIGNED, RESUME_REJECTED, InterruptStore, InvalidInputError
from symfonic_store.events import refused_assignment
from symfonic_store.server.metrics import LogTail
from symfonic_store.store.rules import quorum_assign_refusal
from symfonic_store.store.vote_ops import assignee


def test_the_assignee_is_trimmed_and_an_empty_one_refused(store: InterruptStore) -> None:
    """``" bob "`` is recorded as ``bob``; a blank ``to`` is refused with nothing written;
    the service's form of an assignee is read by the same rule."""
    i = factories.mint(store, "t-trim")["interrupt_id"]
    store.assign("t-trim", i, to=" bob\t", actor="ann")
    found = store.assignment("t-trim", i)
    assert found is not None and found["to"] == "bob"
    before = store.history("t-trim")
    for blank in ("", "   ", None):
        with pytest.raises(InvalidInputError):
            store.assign("t-trim", i, to=blank, actor="ann")  # type: ignore[arg-type]
    assert store.history("t-trim") == before
    assert [e.data for e in before if e.type == ASSIGNED] == [{"to": "bob", "kind": "principal"}]
    assert assignee(" bob ") == ("principal", "bob")
    assert assignee(" role: finance ") == ("role", "finance")
    for bad in ("role:", " role:  ", "  ", 7, None):
        with pytest.raises(InvalidInputError):
            assignee(bad)


def test_a_refused_assignment_is_recorded_apart_from_the_answers(store: InterruptStore) -> None:
    """``record_assign_refusal`` appends ``resume_rejected`` with ``why:
    "assign_not_allowed"`` and ``{assign, error}``, no response; the audit's attempts list
    only the refused answer, and the answer metrics count only it."""
    t = "t-refused"
    i = factories.mint(store, t)["interrupt_id"]
    store.record_refusal(t, i, {"approved": True}, actor="eve", error="no role")
    store.record_assign_refusal(t, i, " role:finance ", actor="ann", error="needs a reassign role")
    last = store.history(t)[-1]
    assert (last.type, last.actor) == (RESUME_REJECTED, "ann")
    assert last.data == {"why": "assign_not_allowed", "assign": "role:finance", "error": "needs a reassign role"}
    (record,) = store.audit(thread_id=t)
    assert [(a["actor"], a["why"]) for a in record.attempts] == [("eve", "not_allowed")]
    tail = LogTail(store)
    tail.catch_up()
    counts = tail.counts()
    assert counts.answers["not_allowed"] == 1 and "assign_not_allowed" not in counts.answers
    assert counts.by_type[RESUME_REJECTED] == 2  # still an event of its type in the log


def test_a_refused_assignment_of_the_earlier_shape_is_no_attempt_either(store: InterruptStore) -> None:
    """Releases before recorded a refused assignment as a refused answer whose response was
    ``{"assign": to}``: the audit and the metrics tell it by that shape and leave it out; an
    answer refused with any other response (even one holding ``assign``) stays an attempt."""
    t = "t-old"
    i = factories.mint(store, t)["interrupt_id"]
    # What the service wrote for a refused assignment before assign_not_allowed:
    store.record_refusal(t, i, {"assign": "bob"}, actor="ann", error="already assigned")
    store.record_refusal(t, i, {"assign": "bob", "approved": True}, actor="eve", error="no role")
    store.record_refusal(t, i, "bob", actor="cid", error="no role")
    (record,) = store.audit(thread_id=t)
    assert [a["actor"] for a in record.attempts] == ["eve", "cid"]
    (scoped,) = store.audit(thread_id=t, tenants=[None])  # the per-call query of a tenant scope
    assert [a["actor"] for a in scoped.attempts] == ["eve", "cid"]
    tail = LogTail(store)
    tail.catch_up()
    assert tail.counts().answers["not_allowed"] == 2


def test_refused_assignment_reads_both_shapes_and_nothing_else() -> None:
    assert refused_assignment({"why": "assign_not_allowed", "assign": "bob", "error": "x"})
    assert refused_assignment({"why": "not_allowed", "response": {"assign": "role:finance"}})
    assert not refused_assignment({"why": "not_allowed", "response": {"assign": 3}})
    assert not refused_assignment({"why": "already_resolved", "response": {"assign": "bob"}})
    assert not refused_assignment({"why": "not_allowed", "response": {"approved": True}})


def test_a_quorum_interrupt_may_be_assigned_only_to_a_role() -> None:
    assert quorum_assign_refusal("role", "finance", 2) is None
    assert quorum_assign_refusal("principal", "bob", None) is None
    why = quorum_assign_refusal("principal", "bob", 2)
    assert why is not None and "quorum of 2" in why and "'bob'" in why and "role:" in why
