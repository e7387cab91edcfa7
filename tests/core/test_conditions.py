"""interrupt_condition precedence: "interrupt" over "elicitation" over the tools condition.

Every combination of interrupt marker x ask_user marker x tool calls, with each stale
marker made stale both by TTL and by run_id. The expected route is computed from the
case's labels alone, never by calling the predicates under test.
"""

from __future__ import annotations

import itertools
import time
from datetime import timedelta
from typing import Any

import pytest
from freezegun import freeze_time
from langchain_core.messages import AIMessage, HumanMessage

from symfonic_store import interrupt_condition

FROZEN = "2024-03-01 09:00:00"
TTL = 60
RUN = "run-now"

# How each pause marker can be: (kind, is it current with the TTL, is it current without one).
MARKER_KINDS = {
    "current": (True, True),
    "stale-ttl": (False, True),
    "stale-run": (False, False),
    "absent": (False, False),
}


def make_marker(kind: str, now: float) -> dict[str, Any] | None:
    """A marker of ``kind`` as seen at ``now``: stale-ttl is 1 ms past the TTL, stale-run is young."""
    if kind == "absent":
        return None
    minted_at = now - TTL - 0.001 if kind == "stale-ttl" else now - TTL
    run_id = "run-before" if kind == "stale-run" else RUN
    return {
        "name": "approval_required",
        "interrupt_id": "i-0123456789ab",
        "payload": {},
        "tool_call_id": None,
        "run_id": run_id,
        "minted_at": minted_at,
    }


def make_state(interrupt_kind: str, ask_kind: str, tool_calls: bool) -> dict[str, Any]:
    now = time.time()
    last = (
        AIMessage("", tool_calls=[{"name": "refund", "args": {}, "id": "call_1"}])
        if tool_calls
        else AIMessage("all done")
    )
    state: dict[str, Any] = {"messages": [HumanMessage("refund please"), last], "run_id": RUN}
    for key, kind in (("_interrupt_pending", interrupt_kind), ("_ask_user_pending", ask_kind)):
        value = make_marker(kind, now)
        if value is not None:
            state[key] = value
    return state


def expected_route(interrupt_kind: str, ask_kind: str, tool_calls: bool, with_ttl: bool) -> str:
    column = 0 if with_ttl else 1
    if MARKER_KINDS[interrupt_kind][column]:
        return "interrupt"
    if MARKER_KINDS[ask_kind][column]:
        return "elicitation"
    return "continue" if tool_calls else "finish"


CASES = [
    pytest.param(i, a, t, id=f"interrupt={i}-ask={a}-tools={'yes' if t else 'no'}")
    for i, a, t in itertools.product(MARKER_KINDS, MARKER_KINDS, (True, False))
]


def test_case_table_covers_every_combination() -> None:
    """The table has all 4 x 4 x 2 cases, i.e. the 18 current/stale/absent cases with both kinds of stale."""
    assert len(CASES) == 32
    classes = {(i.split("-")[0], a.split("-")[0], t) for i, a, t in (c.values for c in CASES)}
    assert len(classes) == 18


@freeze_time(FROZEN)
@pytest.mark.parametrize(("interrupt_kind", "ask_kind", "tool_calls"), CASES)
def test_precedence_with_ttl(interrupt_kind: str, ask_kind: str, tool_calls: bool) -> None:
    """With a TTL, the route is the first current pause marker, else the tools condition."""
    state = make_state(interrupt_kind, ask_kind, tool_calls)
    assert interrupt_condition(state, TTL) == expected_route(
        interrupt_kind, ask_kind, tool_calls, with_ttl=True
    )


@freeze_time(FROZEN)
@pytest.mark.parametrize(("interrupt_kind", "ask_kind", "tool_calls"), CASES)
def test_precedence_without_ttl(interrupt_kind: str, ask_kind: str, tool_calls: bool) -> None:
    """Without a TTL only the run_id rule makes a marker stale; precedence is unchanged."""
    state = make_state(interrupt_kind, ask_kind, tool_calls)
    assert interrupt_condition(state) == expected_route(
        interrupt_kind, ask_kind, tool_calls, with_ttl=False
    )


def test_route_changes_as_the_clock_passes_the_ttl() -> None:
    """The same state routes to "interrupt" at the TTL and falls through 1 ms later."""
    with freeze_time(FROZEN) as frozen:
        state: dict[str, Any] = {
            "messages": [AIMessage("", tool_calls=[{"name": "refund", "args": {}, "id": "c"}])],
            "_interrupt_pending": {"name": "n", "interrupt_id": "i-1", "minted_at": time.time()},
            "_ask_user_pending": {"question": "?", "minted_at": time.time() + 30},
        }
        frozen.tick(timedelta(seconds=TTL))
        assert interrupt_condition(state, TTL) == "interrupt"
        frozen.tick(timedelta(milliseconds=1))
        assert interrupt_condition(state, TTL) == "elicitation"
        frozen.tick(timedelta(seconds=30))
        assert interrupt_condition(state, TTL) == "continue"
