"""Bad input (SPEC §7): every refusal is a ``SymfonicStoreError`` that names the field and
writes nothing; thread ids of any content are data, never SQL.

Each refusal is checked on SQLite and PostgreSQL by comparing every row of the event and
projection tables before and after the call.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import factories
import pytest

from symfonic_store import (
    AsyncInterruptStore,
    DatabaseError,
    InterruptStore,
    InvalidInputError,
    InvalidMarkerError,
    PayloadTooLargeError,
    SymfonicStoreError,
)

PASSWORD = "s3cr3t"
UNREACHABLE_URL = f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1:1/x"


marker = factories.marker


def snapshot(store: InterruptStore) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every row of both tables, read with plain SQL."""
    with store.engine.connect() as conn:
        events = conn.exec_driver_sql("SELECT * FROM symfonic_events ORDER BY position").all()
        threads = conn.exec_driver_sql("SELECT * FROM symfonic_threads ORDER BY thread_id").all()
    return [tuple(r) for r in events], [tuple(r) for r in threads]


@pytest.fixture
def seeded(store: InterruptStore) -> InterruptStore:
    """A store with a pending and a resumed interrupt, so a stray write would show."""
    store.mint("t-1", marker("i-1"))
    store.mint("t-2", marker("i-2"))
    store.resume("t-2", "i-2", {"approved": True}, actor="alice")
    return store


def assert_refused(
    store: InterruptStore,
    call: Callable[[], Any],
    field: str,
    error: type[SymfonicStoreError] = InvalidInputError,
) -> None:
    before = snapshot(store)
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, SymfonicStoreError)
    assert field in str(caught.value), str(caught.value)
    if isinstance(caught.value, InvalidInputError):
        assert caught.value.field == field
    assert snapshot(store) == before


# --- markers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    ["approval", 42, None, ["name", "interrupt_id"], {"_interrupt_pending": "yes"},
     {"_interrupt_pending": None}],
    ids=["str", "int", "none", "list", "inner-str", "inner-none"],
)
def test_a_marker_that_is_not_a_dict_is_refused(seeded: InterruptStore, bad: Any) -> None:
    """A marker (or ``_interrupt_pending`` value) that is not a dict raises InvalidMarkerError."""
    assert_refused(seeded, lambda: seeded.mint("t-3", bad), "marker", InvalidMarkerError)


@pytest.mark.parametrize("missing", ["name", "interrupt_id"])
def test_a_marker_missing_a_required_key_is_refused(seeded: InterruptStore, missing: str) -> None:
    """A marker without ``name`` or ``interrupt_id`` is refused, naming the key."""
    bad = dict(marker("i-3")["_interrupt_pending"])
    del bad[missing]
    assert_refused(seeded, lambda: seeded.mint("t-3", bad), f"marker.{missing}", InvalidMarkerError)
    assert_refused(
        seeded, lambda: seeded.mint("t-3", {"_interrupt_pending": bad}), f"marker.{missing}",
        InvalidMarkerError,
    )


@pytest.mark.parametrize(
    "payload",
    [{"tags": {"a", "b"}}, {"obj": object()}, {"x": float("nan")}, {"x": float("inf")}, {1, 2}],
    ids=["set", "object", "nan", "inf", "payload-is-a-set"],
)
def test_a_payload_that_is_not_json_is_refused(seeded: InterruptStore, payload: Any) -> None:
    """Sets, arbitrary objects, NaN and infinity cannot be stored as JSON: nothing is written."""
    bad = {"name": "n", "interrupt_id": "i-3", "payload": payload}
    assert_refused(seeded, lambda: seeded.mint("t-3", bad), "marker.payload")
    # Superseding would have expired t-1's interrupt; nothing of it happened.
    assert_refused(seeded, lambda: seeded.mint("t-1", bad), "marker.payload")
    assert seeded.pending("t-1")["interrupt_id"] == "i-1"  # type: ignore[index]


@pytest.mark.parametrize(
    "response", [{"x": {1}}, {"x": object()}, {"x": float("nan")}], ids=["set", "object", "nan"]
)
def test_a_response_that_is_not_json_is_refused(seeded: InterruptStore, response: Any) -> None:
    """A resume whose response cannot be stored as JSON is refused before anything is recorded."""
    assert_refused(seeded, lambda: seeded.resume("t-1", "i-1", response, actor="alice"), "response")
    assert seeded.pending("t-1") is not None


def test_a_payload_over_the_size_limit_is_refused(migrated_url: str, seeded: InterruptStore) -> None:
    """A payload or response larger than ``max_payload_bytes`` raises PayloadTooLargeError, writing nothing."""
    with InterruptStore(migrated_url, max_payload_bytes=100) as small:
        big = marker("i-3", blob="x" * 200)
        assert_refused(seeded, lambda: small.mint("t-3", big), "marker.payload", PayloadTooLargeError)
        assert_refused(
            seeded,
            lambda: small.resume("t-1", "i-1", {"note": "x" * 200}, actor="alice"),
            "response",
            PayloadTooLargeError,
        )
        assert small.mint("t-3", marker("i-3", blob="x" * 10))


# --- ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "thread_id", ["", "x" * 256, 42, None, b"bytes", "nul\x00byte"],
    ids=["empty", "256-chars", "int", "none", "bytes", "nul"],
)
def test_a_bad_thread_id_is_refused_everywhere(seeded: InterruptStore, thread_id: Any) -> None:
    """Empty, over-long, non-string and NUL-bearing thread ids are refused by every entry point."""
    calls: list[Callable[[], Any]] = [
        lambda: seeded.mint(thread_id, marker("i-3")),
        lambda: seeded.record_route(thread_id, "finish"),
        lambda: seeded.resume(thread_id, "i-1", actor="alice"),
        lambda: seeded.expire(thread_id, "i-1"),
        lambda: seeded.pending(thread_id),
        lambda: seeded.state(thread_id),
        lambda: seeded.is_current(thread_id),
        lambda: seeded.history(thread_id),
        lambda: seeded.replay(thread_id),
    ]
    for call in calls:
        assert_refused(seeded, call, "thread_id")


@pytest.mark.parametrize("bad", ["", "a" * 256, 7], ids=["empty", "256-chars", "int"])
def test_bad_interrupt_ids_and_actors_are_refused(seeded: InterruptStore, bad: Any) -> None:
    """Interrupt ids and actors follow the thread id's rules; a resume needs an actor."""
    assert_refused(seeded, lambda: seeded.resume("t-1", bad, actor="alice"), "interrupt_id")
    assert_refused(seeded, lambda: seeded.resume("t-1", "i-1", actor=bad), "actor")
    assert_refused(seeded, lambda: seeded.expire("t-1", bad), "interrupt_id")
    assert_refused(seeded, lambda: seeded.expire("t-1", "i-1", actor=bad), "actor")
    assert_refused(seeded, lambda: seeded.mint("t-3", marker(bad)), "marker.interrupt_id", InvalidMarkerError)
    assert_refused(seeded, lambda: seeded.audit(actor=bad), "actor")


def test_a_resume_without_an_actor_is_refused(seeded: InterruptStore) -> None:
    """``actor=None`` is not an approver: the resume is refused and nothing recorded."""
    assert_refused(seeded, lambda: seeded.resume("t-1", "i-1", actor=None), "actor")  # type: ignore[arg-type]


# --- numbers and times ------------------------------------------------------------------


BAD_TTLS = [-1, -0.5, "60", float("nan"), float("inf"), True, [60]]
BAD_TTL_IDS = ["negative", "negative-float", "string", "nan", "inf", "bool", "list"]


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=BAD_TTL_IDS)
def test_a_bad_ttl_is_refused_by_the_constructor(migrated_url: str, ttl: Any) -> None:
    """The store refuses a TTL that is not a finite number >= 0 when it is built."""
    with pytest.raises(InvalidInputError, match="ttl_seconds") as caught:
        InterruptStore(migrated_url, ttl_seconds=ttl)
    assert caught.value.field == "ttl_seconds"
    with pytest.raises(InvalidInputError, match="ttl_seconds"):
        AsyncInterruptStore(migrated_url, ttl_seconds=ttl)


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=BAD_TTL_IDS)
def test_a_bad_ttl_is_refused_by_is_current_and_sweep(seeded: InterruptStore, ttl: Any) -> None:
    """``is_current`` and ``sweep`` refuse the same TTLs, and the sweep expires nothing."""
    assert_refused(seeded, lambda: seeded.is_current("t-1", ttl_seconds=ttl), "ttl_seconds")
    assert_refused(seeded, lambda: seeded.sweep(ttl_seconds=ttl), "ttl_seconds")


@pytest.mark.parametrize("ttl", [-1, "soon", float("nan")], ids=["negative", "string", "nan"])
def test_a_bad_age_is_refused_by_list_pending(seeded: InterruptStore, ttl: Any) -> None:
    """``list_pending(older_than=...)`` takes seconds like a TTL."""
    assert_refused(seeded, lambda: seeded.list_pending(older_than=ttl), "older_than")


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("value", ["yesterday", "2026-13-45", "", 1700000000, "12/01/2026"])
def test_a_malformed_audit_bound_is_refused(seeded: InterruptStore, field: str, value: Any) -> None:
    """``audit(since=...)``/``until`` accept a datetime or ISO 8601 text; anything else names the bound."""
    assert_refused(seeded, lambda: seeded.audit(**{field: value}), field)


@pytest.mark.parametrize("until", ["yesterday", -1, 1.5, True], ids=["text", "negative", "float", "bool"])
def test_a_malformed_replay_bound_is_refused_at_call_time(seeded: InterruptStore, until: Any) -> None:
    """``replay(until=...)`` is checked when called, before anything is iterated."""
    assert_refused(seeded, lambda: seeded.replay("t-1", until=until), "until")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"after": -1}, "after"), ({"after": "0"}, "after"), ({"limit": 0}, "limit"),
     ({"limit": -3}, "limit"), ({"limit": 2.5}, "limit")],
)
def test_bad_paging_arguments_are_refused(seeded: InterruptStore, kwargs: dict[str, Any], field: str) -> None:
    """``events`` takes a position >= 0 and a limit >= 1."""
    assert_refused(seeded, lambda: seeded.events(**kwargs), field)


def test_bad_sweep_options_are_refused(seeded: InterruptStore) -> None:
    """The sweep's batch size and dry-run flag are checked before any batch runs."""
    assert_refused(seeded, lambda: seeded.sweep(batch_size=0), "batch_size")
    assert_refused(seeded, lambda: seeded.sweep(dry_run="yes"), "dry_run")  # type: ignore[arg-type]


# --- routes and reasons ---------------------------------------------------------------------


@pytest.mark.parametrize("route", ["sideways", "", None, "INTERRUPT"])
def test_an_unknown_route_is_refused(seeded: InterruptStore, route: Any) -> None:
    """Only the four routes of ``interrupt_condition`` can be recorded."""
    assert_refused(seeded, lambda: seeded.record_route("t-1", route), "route")


def test_a_bad_route_reason_or_run_id_is_refused(seeded: InterruptStore) -> None:
    """A route's reason is None, ``ttl`` or ``run_id``; its run_id is text."""
    assert_refused(seeded, lambda: seeded.record_route("t-1", "finish", reason="bored"), "reason")
    assert_refused(seeded, lambda: seeded.record_route("t-1", "finish", run_id=5), "run_id")  # type: ignore[arg-type]


def test_a_run_id_over_255_characters_is_refused_wherever_it_enters(seeded: InterruptStore) -> None:
    """A 1 MB run id (stored outside max_payload_bytes) is refused by record_route, in a marker and in a router's state."""
    from symfonic_store import make_interrupt_router

    huge = "r" * 1_000_000
    assert_refused(seeded, lambda: seeded.record_route("t-1", "finish", run_id=huge), "run_id")
    tooled = marker("i-3")
    tooled["_interrupt_pending"]["run_id"] = huge
    assert_refused(seeded, lambda: seeded.mint("t-3", tooled), "marker.run_id", InvalidMarkerError)
    state = {"messages": [], "_interrupt_pending": None, "run_id": huge}
    assert_refused(seeded, lambda: seeded.record_router_decision("t-1", state, "finish"), "state.run_id")
    router = make_interrupt_router(seeded)
    config = {"configurable": {"thread_id": "t-1"}}
    assert_refused(seeded, lambda: router(state, config), "state.run_id")
    assert_refused(seeded, lambda: router({**state, **marker("i-4")}, config), "state.run_id")
    # 255 characters, like the other ids, is still fine.
    seeded.record_route("t-1", "finish", run_id="r" * 255)
    assert seeded.history("t-1")[-1].run_id == "r" * 255


@pytest.mark.parametrize("reason", ["bored", "", None, "TTL"])
def test_a_bad_expiry_reason_is_refused(seeded: InterruptStore, reason: Any) -> None:
    """``expire(reason=...)`` takes one of ttl, run_id, superseded, cancelled."""
    assert_refused(seeded, lambda: seeded.expire("t-1", "i-1", reason=reason), "reason")
    assert seeded.pending("t-1") is not None


async def test_the_asyncio_store_refuses_bad_input_too(astore: AsyncInterruptStore) -> None:
    """The asyncio store shares the validation: same errors, nothing written."""
    with pytest.raises(InvalidMarkerError, match="marker.interrupt_id"):
        await astore.mint("t-1", {"name": "n"})
    with pytest.raises(InvalidInputError, match="thread_id"):
        await astore.mint("", marker("i-1"))
    with pytest.raises(InvalidInputError, match="route"):
        await astore.record_route("t-1", "sideways")
    with pytest.raises(InvalidInputError, match="since"):
        await astore.audit(since="yesterday")
    with pytest.raises(InvalidInputError, match="until"):
        astore.replay("t-1", until="yesterday")
    assert await astore.events() == []


# --- URLs and the database -----------------------------------------------------------------


def no_password_anywhere(exc: BaseException) -> None:
    text = "".join(traceback.format_exception(exc))
    assert PASSWORD not in text
    assert PASSWORD not in repr(exc)


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "",
        f"mysql://u:{PASSWORD}@127.0.0.1/x",
        f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1:notaport/x",
        f"oracle+cx_oracle://u:{PASSWORD}@h/x",
    ],
    ids=["text", "empty", "mysql", "bad-port", "oracle"],
)
def test_a_bad_url_is_refused_without_showing_the_password(url: str) -> None:
    """An unparseable or unsupported URL raises InvalidInputError naming the URL, never the password."""
    for cls in (InterruptStore, AsyncInterruptStore):
        with pytest.raises(InvalidInputError) as caught:
            cls(url)
        assert caught.value.field == "database URL"
        no_password_anywhere(caught.value)


def test_an_unreachable_database_is_a_database_error_without_the_password() -> None:
    """Connecting to nothing raises DatabaseError on first use; neither it nor the store shows the password."""
    store = InterruptStore(UNREACHABLE_URL)
    assert PASSWORD not in repr(store)
    for call in (store.setup, lambda: store.pending("t-1"), lambda: store.mint("t-1", marker("i-1"))):
        with pytest.raises(DatabaseError) as caught:
            call()
        assert "reachable" in str(caught.value)
        no_password_anywhere(caught.value)
    store.close()


async def test_an_unreachable_database_is_a_database_error_for_the_asyncio_store() -> None:
    """The asyncio store reports an unreachable database the same way."""
    store = AsyncInterruptStore(UNREACHABLE_URL)
    assert PASSWORD not in repr(store)
    with pytest.raises(DatabaseError) as caught:
        await store.setup()
    no_password_anywhere(caught.value)
    await store.aclose()


# --- thread ids are data ---------------------------------------------------------------------


ODD_IDS = [
    "'; DROP TABLE symfonic_events; --",
    'quote"double',
    "it's",
    "semi;colon",
    "Robert'); DELETE FROM symfonic_threads; --",
    "%",
    "_",
    "back\\slash",
    " padded ",
    "スレッド-🚀-ünïcødé",
    "x" * 255,
    "é" * 255,
    "🚀" * 255,
]


def test_odd_thread_ids_are_stored_and_read_back_verbatim(store: InterruptStore) -> None:
    """Quotes, SQL, LIKE wildcards, whitespace, unicode and 255-character ids round-trip exactly."""
    store.mint("plain", marker("i-0"))
    for n, thread_id in enumerate(ODD_IDS):
        interrupt_id = f"i-{thread_id[:200]}"
        actor = thread_id
        assert store.mint(thread_id, marker(interrupt_id, who=thread_id))
        assert store.pending(thread_id)["payload"] == {"who": thread_id}  # type: ignore[index]
        store.resume(thread_id, interrupt_id, {"note": thread_id}, actor=actor)
        history = store.history(thread_id)
        assert [e.thread_id for e in history] == [thread_id, thread_id]
        assert history[0].interrupt_id == interrupt_id
        assert history[1].actor == actor
        assert history[1].data == {"response": {"note": thread_id}, "decision": None}  # SPEC §12
        records = store.audit(thread_id=thread_id)
        assert [(r.thread_id, r.interrupt_id, r.actor) for r in records] == [
            (thread_id, interrupt_id, actor)
        ]
        assert store.audit(actor=actor)[0].thread_id == thread_id
        assert [e.thread_id for e, _ in store.replay(thread_id)] == [thread_id, thread_id]
        assert store.verify(thread_id=thread_id).events_checked == 2
        assert len(store.events()) == 1 + 2 * (n + 1)

    assert {p["thread_id"] for p in store.list_pending()} == {"plain"}
    store.mint(ODD_IDS[0], marker("i-again"))
    assert {p["thread_id"] for p in store.list_pending()} == {"plain", ODD_IDS[0]}
    with store.engine.connect() as conn:
        stored = {r[0] for r in conn.exec_driver_sql("SELECT DISTINCT thread_id FROM symfonic_events")}
    assert stored == {"plain", *ODD_IDS}
    assert store.verify().ok
    assert store.rebuild_projection() == len(store.events())


@pytest.mark.parametrize("make", [InterruptStore, AsyncInterruptStore], ids=["sync", "async"])
def test_a_url_sqlalchemy_refuses_is_an_invalid_input_without_the_password(make: Any) -> None:
    """A SQLite URL with a user and password is refused as InvalidInputError, password hidden."""
    with pytest.raises(InvalidInputError) as caught:
        make(f"sqlite://user:{PASSWORD}@/x.db")
    assert caught.value.field == "database URL"
    assert "sqlite:///" in str(caught.value)
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value)
