"""The event-type registry: a type declared once is folded, streamed, counted and drawn.

A throwaway, non-ending type is declared here at test time (and unregistered after each
test). Appended through the store's own append path, it shows up in replay, in the
event stream, in the metrics and in the inbox's timeline, its declared rule (it sets the
projected ``run_id``) holds in the Python fold and in the SQL rebuild alike, and the
property test's strategy table draws it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, find, settings
from strategies import actions, append_event, missing, throwaway_type

from symfonic_store import InterruptStore, build_interrupt_marker
from symfonic_store import event_types as registry
from symfonic_store.audit_columns import AUDIT_COLUMNS, derive
from symfonic_store.event_types import EventType, spec_of
from symfonic_store.events import ENDINGS, EVENT_TYPES, EXPIRED, MINTED, RESUMED
from symfonic_store.server.inbox.pages import describe
from symfonic_store.server.metrics import ServiceMetrics

NOTED = "test.noted"


@pytest.fixture
def noted() -> Iterator[EventType]:
    """The throwaway type, registered in the package and in the strategy table."""
    spec = EventType(NOTED, label="noted", summary="noted {n} by hand", detail=("note",), run_id=True)
    with throwaway_type(spec) as declared:
        yield declared
    assert spec_of(NOTED) is None and NOTED not in missing()


def mint_and_note(store: InterruptStore, thread: str) -> None:
    marker = build_interrupt_marker(name="approval_required", interrupt_id="i-1", payload={"x": 1}, run_id="r1")
    store.mint(thread, marker["_interrupt_pending"])
    append_event(store, thread, NOTED, data={"n": 7, "note": "checked"}, interrupt_id="i-1",
                 run_id="r2", actor="tester")


def test_a_registered_type_is_replayed_with_its_rule(store: InterruptStore, noted: EventType) -> None:
    """Replay shows the event with the state its declared rule leaves (run_id taken); the
    projection, a rebuild and the stored audit columns agree."""
    mint_and_note(store, "t-1")
    steps = list(store.replay("t-1"))
    assert [e.type for e, _ in steps] == [MINTED, NOTED]
    event, after = steps[-1]
    assert (event.actor, event.data, event.run_id) == ("tester", {"n": 7, "note": "checked"}, "r2")
    assert after["run_id"] == "r2" and after["_interrupt_pending"]["interrupt_id"] == "i-1"
    assert store.state("t-1") == after
    store.rebuild_projection()  # the SQL fold reads the same declaration
    assert store.state("t-1") == after
    assert derive(NOTED, event.data, event.occurred_at) == dict.fromkeys(AUDIT_COLUMNS)
    assert store.verify("t-1").ok


def test_a_registered_type_is_in_the_event_stream(store: InterruptStore, noted: EventType) -> None:
    """events() and iter_events() return it in its place, and history() too."""
    mint_and_note(store, "t-1")
    assert [e.type for e in store.events()] == [MINTED, NOTED]
    assert [e.type for e in store.iter_events(after=store.events()[0].position)] == [NOTED]
    assert [e.type for e in store.history("t-1")] == [MINTED, NOTED]


def test_a_registered_type_is_counted_in_the_metrics(store: InterruptStore, noted: EventType) -> None:
    """/metrics lists every registered type, 0 before one is appended, then its count."""
    metrics = ServiceMetrics(store)
    assert 'symfonic_events_total{type="test.noted"} 0.0' in metrics.render().decode()
    mint_and_note(store, "t-1")
    append_event(store, "t-2", NOTED, data={"n": 8})
    text = metrics.render().decode()
    assert 'symfonic_events_total{type="test.noted"} 2.0' in text
    assert 'symfonic_events_total{type="interrupt.minted"} 1.0' in text
    assert 'symfonic_events_total{type="interrupt.resumed"} 0.0' in text


def test_a_registered_type_is_told_in_the_inbox_timeline(store: InterruptStore, noted: EventType) -> None:
    """The timeline says what its summary and label declare, with the declared detail."""
    mint_and_note(store, "t-1")
    line = describe(store.history("t-1")[-1].as_dict())
    assert (line["what"], line["tone"], line["detail"], line["who"]) == (
        "noted 7 by hand", "noted", "checked", "tester"
    )


def test_the_strategy_table_draws_a_registered_type(noted: EventType) -> None:
    """The property test's table has a strategy for it, and the actions it draws include it."""
    assert missing() == []
    op = find(
        actions(),
        lambda op: op[:2] == ("append", NOTED),
        settings=settings(database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]),
    )
    assert op[0] == "append"


def test_the_registry_declares_the_built_in_types_once() -> None:
    """The built-in types, in order, with their endings and their run-id rule."""
    assert tuple(t.name for t in registry.all_types()) == EVENT_TYPES == (
        "interrupt.minted", "route.decided", "interrupt.resumed", "interrupt.expired",
        "interrupt.resume_rejected", "interrupt.reminded", "interrupt.escalated",
        "interrupt.assigned", "interrupt.voted",
    )
    assert ENDINGS == (RESUMED, EXPIRED)
    assert registry.run_id_types() == (MINTED, "route.decided")


def test_registering_refuses_a_taken_name_an_ending_a_fold_and_removing_a_built_in_type() -> None:
    """Endings and mints are kept by database indexes, and a fold rule needs its SQL twin:
    such types are declared in the package, with their migration and SQL."""
    with pytest.raises(ValueError, match="already registered"):
        registry.register(EventType(MINTED, label="asked"))
    with pytest.raises(ValueError, match="migration"):
        registry.register(EventType("test.ended", label="ended", ending=True))
    with pytest.raises(ValueError, match="SQL fold"):
        registry.register(EventType("test.folded", label="folded", fold=lambda state, event: None))
    with pytest.raises(ValueError, match="built in"):
        registry.unregister(RESUMED)
    with registry.registered(EventType("test.once", label="once")):
        assert spec_of("test.once") is not None
    assert spec_of("test.once") is None
