"""Hostile input: generated junk for every public entry point, on both backends.

Every store method, the constructor, the module-level protocol functions and the main
command-line flags get values built to break them: text with NUL bytes, lone
surrogates and SQL, strings far over every limit, deep and wide nesting, NaN and
infinities, bytes, sets, bare objects, huge and negative numbers, bools where numbers
belong, None. The promise (SPEC §7): a store method either works or raises a
``SymfonicStoreError`` -- never a raw driver, ``TypeError`` or ``RecursionError`` -- and
an error writes nothing (a refused resume writes exactly its record of refusal, I10).
The command line exits 0, 1 or 2 with one error line and never a traceback.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cli_helpers import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from symfonic_store import (
    RESUME_REJECTED,
    InterruptStateError,
    InterruptStore,
    PayloadTooLargeError,
    SymfonicStoreError,
    ask_user_pending_is_current,
    build_interrupt_marker,
    create_interrupt_node,
    interrupt_condition,
    interrupt_pending_is_current,
    make_interrupt_router,
    new_interrupt_id,
    tools_condition,
)

KNOWN_THREAD = "t-known"
KNOWN_INTERRUPT = "i-known0000001"
RESOLVED_INTERRUPT = "i-resolved0001"
HUGE_TEXT = "x" * (1_048_576 + 1)


class Deep(list[Any]):
    """A list nested ``depth`` levels deep, with a short repr for failure reports."""

    def __init__(self, depth: int) -> None:
        value: Any = 1
        for n in range(depth - 1):
            value = {"k": value} if n % 2 else [value]
        super().__init__([value])
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


class Model(BaseModel):
    amount: float = 1.0
    tags: set[str] = {"a"}


class BrokenModel:
    """Looks like a model; its dump fails."""

    def model_dump(self, **_: Any) -> dict[str, Any]:
        raise ValueError("cannot dump")


class Opaque:
    __slots__ = ()


EXTREME_TIMES = [
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14))),
    datetime(1, 1, 1),
    datetime.max,
    datetime(2026, 1, 1, tzinfo=UTC),
]

edge_numbers = st.sampled_from(
    [0, -1, 1, 2**31, 2**63 - 1, 2**63, -(2**63), 10**400, -(10**400), 1e308, -1e308, 5e-324]
)
special_text = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "a\x00b",
        "\ud800",
        "ok\udfff",
        "x" * 255,
        "x" * 256,
        "é" * 200,
        "'; DROP TABLE symfonic_events; --",
        "Robert'); DELETE FROM symfonic_threads;--",
        "%s %(x)s {0} $1 ?",
        "\u202e\ufeff\U0001f600",
        "1970-01-01",
        "nan",
        "-inf",
    ]
) | st.just(len(HUGE_TEXT)).map(lambda n: "x" * n)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    edge_numbers,
    st.floats(),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Cc", "Zs"]), max_size=8),
    special_text,
    st.binary(max_size=16),
    st.sets(st.integers(), max_size=3),
    st.frozensets(st.text(max_size=3), max_size=3),
    st.tuples(st.integers()),
    st.sampled_from(
        [object(), Opaque(), Decimal("1.5"), Decimal("NaN"), 1 + 2j, bytearray(b"\x00"), Model(),
         BrokenModel(), print, Ellipsis, *EXTREME_TIMES]
    ),
    st.sampled_from([50, 101, 2_000]).map(Deep),
    # A plain deep list too, so the store's own repr of it is exercised (a failure report
    # of this one is hard to read: hypothesis cannot print it either).
    st.just(2_000).map(lambda depth: list(Deep(depth))),
    st.sampled_from([{1: "int key"}, {(1, 2): "tuple key"}]),
)
hostile = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), special_text), inner, max_size=4),
    ),
    max_leaves=12,
)


def text_or(valid: list[Any]) -> st.SearchStrategy[Any]:
    """A valid value half the time, so later arguments get their turn at being bad."""
    return st.one_of(st.sampled_from(valid), hostile)


thread_ids = text_or([KNOWN_THREAD, "t-other", None])
interrupt_ids = text_or([KNOWN_INTERRUPT, RESOLVED_INTERRUPT, "i-unknown"])
actors = text_or(["alice", None])
markers = st.one_of(
    hostile,
    st.fixed_dictionaries(
        {
            "name": text_or(["approval_required"]),
            "interrupt_id": text_or([KNOWN_INTERRUPT, "i-fresh"]),
        },
        optional={
            "payload": hostile,
            "tool_call_id": text_or([None, "call_1"]),
            "run_id": text_or([None, "run-1"]),
            "minted_at": st.one_of(hostile, edge_numbers, st.floats()),
        },
    ),
    st.builds(lambda m: {"_interrupt_pending": m}, hostile),
)

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
)


@pytest.fixture
def seeded(store: InterruptStore) -> InterruptStore:
    """A store with one pending and one resumed interrupt on a known thread."""
    store.mint(KNOWN_THREAD, build_interrupt_marker(
        name="approval_required", interrupt_id=RESOLVED_INTERRUPT, payload={"n": 1}))
    store.resume(KNOWN_THREAD, RESOLVED_INTERRUPT, {"ok": True}, actor="alice")
    store.mint(KNOWN_THREAD, build_interrupt_marker(
        name="approval_required", interrupt_id=KNOWN_INTERRUPT, payload={"n": 2}))
    return store


def event_count(store: InterruptStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM symfonic_events")).scalar_one())


def call_safely(store: InterruptStore, call: Callable[[], Any], *, refusal_records: bool = False) -> Any:
    """Run ``call``: it works, or raises a store error having written nothing.

    ``refusal_records``: a refused resume (an ``InterruptStateError``) records its
    refusal, so it may add events ending with ``interrupt.resume_rejected`` -- except on
    a thread with no events, which a refusal must not create (I10).
    """
    before = event_count(store)
    try:
        result = call()
        if hasattr(result, "__next__"):
            result = list(result)
        return result
    except SymfonicStoreError as exc:
        assert str(exc), "an error must say what went wrong"
        after = event_count(store)
        if refusal_records and isinstance(exc, InterruptStateError) and after == before:
            assert store.history(exc.thread_id) == [], "a refusal on a thread was not recorded"
        elif refusal_records and isinstance(exc, InterruptStateError):
            assert after - before in (1, 2)
            assert store.events(after=0)[-1].type == RESUME_REJECTED
        else:
            assert after == before, f"{type(exc).__name__} but {after - before} event(s) written"
        return exc


# --- store methods --------------------------------------------------------------------


@FUZZ
@given(thread_id=thread_ids, marker=markers, actor=actors)
def test_mint_survives_hostile_input(seeded: InterruptStore, thread_id: Any, marker: Any, actor: Any) -> None:
    """mint() with hostile ids, markers and actors works or raises a store error, writing nothing."""
    call_safely(seeded, lambda: seeded.mint(thread_id, marker, actor=actor))


@FUZZ
@given(
    thread_id=thread_ids,
    route=text_or(["interrupt", "finish"]),
    run_id=text_or([None, "run-2"]),
    reason=text_or([None, "ttl", "run_id"]),
)
def test_record_route_survives_hostile_input(
    seeded: InterruptStore, thread_id: Any, route: Any, run_id: Any, reason: Any
) -> None:
    """record_route() with hostile values works or raises a store error, writing nothing."""
    call_safely(seeded, lambda: seeded.record_route(thread_id, route, run_id=run_id, reason=reason))


@FUZZ
@given(thread_id=thread_ids, interrupt_id=interrupt_ids, response=hostile, actor=actors)
def test_resume_survives_hostile_input(
    seeded: InterruptStore, thread_id: Any, interrupt_id: Any, response: Any, actor: Any
) -> None:
    """resume() with hostile values works, refuses with its record, or raises writing nothing."""
    call_safely(
        seeded,
        lambda: seeded.resume(thread_id, interrupt_id, response, actor=actor),
        refusal_records=True,
    )


@FUZZ
@given(
    thread_id=thread_ids,
    interrupt_id=interrupt_ids,
    reason=text_or(["cancelled", "ttl"]),
    actor=actors,
)
def test_expire_survives_hostile_input(
    seeded: InterruptStore, thread_id: Any, interrupt_id: Any, reason: Any, actor: Any
) -> None:
    """expire() with hostile values works or raises a store error, writing nothing."""
    call_safely(seeded, lambda: seeded.expire(thread_id, interrupt_id, reason=reason, actor=actor))


@FUZZ
@given(thread_id=thread_ids, ttl=text_or([None, 0, 3600.0]))
def test_thread_reads_survive_hostile_input(seeded: InterruptStore, thread_id: Any, ttl: Any) -> None:
    """pending(), state(), is_current() and history() with hostile values never raise anything else."""
    for call in (
        lambda: seeded.pending(thread_id),
        lambda: seeded.state(thread_id),
        lambda: seeded.is_current(thread_id, ttl),
        lambda: seeded.history(thread_id),
    ):
        call_safely(seeded, call)


@FUZZ
@given(
    older_than=text_or([None, 0, 60.0]),
    limit=text_or([None, 1, 100]),
    after=text_or([0, 1, 3]),
)
def test_log_reads_survive_hostile_input(seeded: InterruptStore, older_than: Any, limit: Any, after: Any) -> None:
    """list_pending() and events() with hostile bounds never raise anything but a store error."""
    call_safely(seeded, lambda: seeded.list_pending(older_than=older_than, limit=limit))
    call_safely(seeded, lambda: seeded.events(after=after, limit=limit))


@FUZZ
@given(thread_id=thread_ids, until=st.one_of(text_or([None, 2]), st.sampled_from(EXTREME_TIMES)))
def test_replay_survives_hostile_input(seeded: InterruptStore, thread_id: Any, until: Any) -> None:
    """replay() with hostile threads and bounds yields or raises a store error (at call or iteration)."""
    call_safely(seeded, lambda: seeded.replay(thread_id, until=until))


@FUZZ
@given(
    ttl=text_or([None, 0, 1e9]),
    dry_run=text_or([True, False]),
    batch_size=text_or([1, 500]),
    on_expired=text_or([None, lambda *a: None]),
)
def test_sweep_survives_hostile_input(
    seeded: InterruptStore, ttl: Any, dry_run: Any, batch_size: Any, on_expired: Any
) -> None:
    """sweep() with hostile options works or raises a store error, writing nothing."""
    call_safely(
        seeded,
        lambda: seeded.sweep(
            ttl_seconds=ttl, dry_run=dry_run, batch_size=batch_size, on_expired=on_expired
        ),
    )


@FUZZ
@given(
    thread_id=thread_ids,
    actor=actors,
    since=st.one_of(text_or([None, "2026-01-01", "2026-01-01T00:00:00Z"]), st.sampled_from(EXTREME_TIMES)),
    until=st.one_of(text_or([None, "2099-01-01"]), st.sampled_from(EXTREME_TIMES)),
)
def test_audit_and_verify_survive_hostile_input(
    seeded: InterruptStore, thread_id: Any, actor: Any, since: Any, until: Any
) -> None:
    """audit() and verify() with hostile filters return or raise a store error."""
    call_safely(seeded, lambda: seeded.audit(thread_id=thread_id, actor=actor, since=since, until=until))
    report = call_safely(seeded, lambda: seeded.verify(thread_id))
    if not isinstance(report, SymfonicStoreError):
        # A thread with no events is named as such (SPEC §10); every other one verifies.
        assert report.ok or [b.kind for b in report.broken] == ["no_events"], str(report)
        assert report.ok == (thread_id is None or bool(seeded.history(thread_id)))


@FUZZ
@given(
    name=st.one_of(hostile, st.text(alphabet="abc-/.", max_size=12)),
    options=st.fixed_dictionaries(
        {},
        optional={
            "ttl_seconds": text_or([None, 60]),
            "approvers": text_or([None, "payload"]),
            "max_payload_bytes": text_or([None, 1024]),
            "sqlite_synchronous": text_or(["FULL", "normal"]),
            "busy_timeout": text_or([0, 5.0]),
        },
    ),
)
def test_the_constructor_and_first_use_survive_hostile_input(
    tmp_path: Path, name: Any, options: dict[str, Any]
) -> None:
    """InterruptStore(url, **options) and setup() work or raise a store error, for any url and options."""
    folder = tmp_path / "dbs"
    url: Any = name
    if isinstance(name, str) and "/" not in name and "\\" not in name:
        # A file name inside the test's folder: odd names must not touch anything else.
        url = f"sqlite:///{folder}/{name[:100]}.db"
    try:
        store = InterruptStore(url, **options)
    except SymfonicStoreError:
        return
    try:
        store.setup()
        store.list_pending()
    except SymfonicStoreError:
        pass
    finally:
        store.close()


# --- the payload size limit ---------------------------------------------------------


def sized_payload(size: int, char: str = "x") -> dict[str, str]:
    """A payload whose JSON is exactly ``size`` bytes (as the store measures it)."""
    empty = len(json.dumps({"k": ""}, ensure_ascii=False).encode())
    width = len(char.encode())
    assert (size - empty) % width == 0
    return {"k": char * ((size - empty) // width)}


@pytest.mark.parametrize("char", ["x", "é", "\U0001f600"])
def test_the_payload_limit_admits_its_size_and_refuses_one_byte_more(migrated_url: str, char: str) -> None:
    """A payload of exactly max_payload_bytes is stored; one byte more is refused, writing nothing."""
    width = len(char.encode())
    limit = 1_000 * width + len(json.dumps({"k": ""}).encode())
    with InterruptStore(migrated_url, max_payload_bytes=limit) as store:
        store.setup()
        at_limit = sized_payload(limit, char)
        assert len(json.dumps(at_limit, ensure_ascii=False).encode()) == limit
        assert store.mint("t", {"name": "n", "interrupt_id": "i-1", "payload": at_limit})
        assert store.pending("t")["payload"] == at_limit  # type: ignore[index]
        before = event_count(store)
        over = {"k": at_limit["k"] + "x"}
        with pytest.raises(PayloadTooLargeError) as refused:
            store.mint("t2", {"name": "n", "interrupt_id": "i-2", "payload": over})
        assert "max_payload_bytes" in str(refused.value)
        assert str(limit) in str(refused.value)
        assert refused.value.field == "marker.payload"
        with pytest.raises(PayloadTooLargeError, match="max_payload_bytes"):
            store.resume("t", "i-1", over, actor="alice")
        assert event_count(store) == before
        assert store.pending("t2") is None
        assert store.resume("t", "i-1", at_limit, actor="alice").resume == at_limit


def test_the_default_payload_limit_is_one_mebibyte(store: InterruptStore) -> None:
    """Without an option the store refuses a payload over 1 MiB and names the option to raise."""
    with pytest.raises(PayloadTooLargeError, match="max_payload_bytes"):
        store.mint("t", {"name": "n", "interrupt_id": "i-1", "payload": {"k": HUGE_TEXT}})
    assert store.events() == []


# --- module-level protocol functions ------------------------------------------------

states = st.one_of(
    hostile,
    st.fixed_dictionaries(
        {},
        optional={
            "_interrupt_pending": st.one_of(hostile, markers),
            "_ask_user_pending": st.one_of(hostile, markers),
            "run_id": text_or([None, "run-1"]),
            "messages": hostile,
        },
    ),
)
ttls = st.one_of(st.none(), edge_numbers, st.floats(), hostile)


def answer_or_store_error(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except SymfonicStoreError as exc:
        return exc


@FUZZ
@given(state=states, ttl=ttls)
def test_predicates_and_conditions_survive_hostile_states(state: Any, ttl: Any) -> None:
    """The predicates and conditions answer, or raise a store error, for any state and TTL."""
    for predicate in (interrupt_pending_is_current, ask_user_pending_is_current):
        result = answer_or_store_error(lambda p=predicate: p(state, ttl))  # type: ignore[misc]
        assert isinstance(result, bool | SymfonicStoreError)
    assert answer_or_store_error(lambda: tools_condition(state)) in (
        "continue", "finish"
    ) or isinstance(answer_or_store_error(lambda: tools_condition(state)), SymfonicStoreError)
    route = answer_or_store_error(lambda: interrupt_condition(state, ttl))
    assert route in ("interrupt", "elicitation", "continue", "finish") or isinstance(
        route, SymfonicStoreError
    )


@FUZZ
@given(name=hostile, interrupt_id=hostile, payload=hostile, tool_call_id=hostile, run_id=hostile)
def test_build_interrupt_marker_takes_anything(
    name: Any, interrupt_id: Any, payload: Any, tool_call_id: Any, run_id: Any
) -> None:
    """The seed's marker builder never raises and always returns the seed's shape."""
    marker = build_interrupt_marker(
        name=name, interrupt_id=interrupt_id, payload=payload, tool_call_id=tool_call_id, run_id=run_id
    )
    inner = marker["_interrupt_pending"]
    assert list(inner) == ["name", "interrupt_id", "payload", "tool_call_id", "run_id", "minted_at"]
    assert inner["name"] is name and inner["payload"] is payload
    assert isinstance(inner["minted_at"], float) and math.isfinite(inner["minted_at"])
    assert len(new_interrupt_id()) == 14


@FUZZ
@given(store=hostile, ttl=ttls)
def test_node_and_router_factories_refuse_hostile_arguments(store: Any, ttl: Any) -> None:
    """create_interrupt_node and make_interrupt_router accept a store or raise a store error."""
    node = answer_or_store_error(lambda: create_interrupt_node(store=store))
    assert store is None or isinstance(node, SymfonicStoreError)
    router = answer_or_store_error(lambda: make_interrupt_router(store, ttl_seconds=ttl))
    assert isinstance(router, SymfonicStoreError)


@FUZZ
@given(ttl=ttls)
def test_the_router_factory_checks_its_ttl(seeded: InterruptStore, ttl: Any) -> None:
    """make_interrupt_router on a real store takes a valid TTL and refuses any other with a store error."""
    router = answer_or_store_error(lambda: make_interrupt_router(seeded, ttl_seconds=ttl))
    valid = ttl is None or (
        isinstance(ttl, int | float)
        and not isinstance(ttl, bool)
        and ttl >= 0
        and abs(ttl) < 1e308 * 10
        and not (isinstance(ttl, int) and abs(ttl) > 2**1023)
    )
    if isinstance(router, SymfonicStoreError):
        assert not valid and "ttl_seconds" in str(router)
    else:
        assert valid


# --- the command line ---------------------------------------------------------------

cli_text = st.one_of(
    st.text(max_size=30),
    special_text.filter(lambda s: len(s) < 1000),
    st.floats().map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["0", "-0", "1e400", "nan", "inf", "-1", "2**63", "1_000", "0x10", "", "--help",
                     "2026-13-45", "2026-01-01T25:00", "99999999999999999999", "{}", "[1]", '{"a": NaN}']),
)


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """The real command line in this process: exit code, stdout, stderr."""
    result = run_cli(*argv)
    return result.returncode, result.stdout, result.stderr


def assert_clean_exit(argv: list[str], code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert "unexpected" not in err, (argv, err)
    assert not any(words in err for words in ("Value error", "Input should", "Invalid value")), (argv, err)
    if code:
        assert "error" in err.lower() or "usage" in err.lower(), (argv, err)


@pytest.fixture
def cli_db(seeded: InterruptStore, migrated_url: str) -> str:
    """The seeded store's URL, for the command line."""
    return migrated_url


CLI_FUZZ = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@CLI_FUZZ
@given(
    ttl=cli_text,
    older_than=cli_text,
    thread=st.one_of(cli_text, st.just(KNOWN_THREAD)),
    fmt=st.one_of(st.sampled_from(["table", "json"]), cli_text),
)
def test_cli_pending_and_sweep_flags_exit_cleanly(
    cli_db: str, ttl: str, older_than: str, thread: str, fmt: str
) -> None:
    """pending and sweep with generated --ttl, --older-than, --batch-size and --format exit 0, 1 or 2."""
    for argv in (
        ["--db", cli_db, "--ttl", ttl, "pending", "--thread", thread, "--older-than", older_than,
         "--format", fmt],
        ["--db", cli_db, "sweep", "--dry-run", "--ttl", ttl, "--batch-size", older_than, "--format", fmt],
        ["--db", cli_db, "sweep", "--ttl", ttl, "--batch-size", "7", "--format", fmt],
    ):
        assert_clean_exit(argv, *run_main(argv))


@CLI_FUZZ
@given(
    thread=st.one_of(cli_text, st.just(KNOWN_THREAD)),
    interrupt_id=st.one_of(cli_text, st.sampled_from([KNOWN_INTERRUPT, RESOLVED_INTERRUPT])),
    actor=cli_text,
    response=st.one_of(
        cli_text,
        st.sampled_from(['{"approved": true}', '"yes"', "null", "[1,2]", "[" * 5000 + "]" * 5000]),
    ),
)
def test_cli_resume_flags_exit_cleanly(
    cli_db: str, thread: str, interrupt_id: str, actor: str, response: str
) -> None:
    """resume with generated thread ids, interrupt ids, --actor and --response exits 0, 1 or 2."""
    argv = ["--db", cli_db, "resume", thread, interrupt_id, "--actor", actor, "--response", response]
    assert_clean_exit(argv, *run_main(argv))


@CLI_FUZZ
@given(
    thread=st.one_of(cli_text, st.just(KNOWN_THREAD)),
    since=cli_text,
    until=st.one_of(cli_text, st.sampled_from(["2026-01-01", "3", "2026-01-01T00:00:00+14:00"])),
    fmt=st.one_of(st.sampled_from(["table", "json", "csv"]), cli_text),
)
def test_cli_audit_replay_verify_flags_exit_cleanly(
    cli_db: str, thread: str, since: str, until: str, fmt: str
) -> None:
    """audit, replay and verify with generated --since, --until, --format and thread ids exit 0, 1 or 2."""
    for argv in (
        ["--db", cli_db, "audit", "--thread", thread, "--since", since, "--until", until, "--format", fmt],
        ["--db", cli_db, "replay", thread, "--until", until, "--format", fmt],
        ["--db", cli_db, "verify", "--thread", thread],
    ):
        assert_clean_exit(argv, *run_main(argv))


@pytest.fixture
def sqlite_cli_db(sqlite_url: str) -> str:
    """A seeded SQLite store for the flags the fuzzing above does not reach."""
    with InterruptStore(sqlite_url) as store:
        store.setup()
        store.mint(KNOWN_THREAD, build_interrupt_marker(
            name="approval_required", interrupt_id=KNOWN_INTERRUPT, payload={"n": 2}))
    return sqlite_url


@pytest.mark.parametrize(
    "args",
    [
        ["--ttl", "1e400", "sweep", "--batch-size", "99999999999999999999"],
        ["audit", "--since", "2026-13-45", "--format", "xml"],
        ["replay", KNOWN_THREAD, "--until", "99999999999999999999"],
        ["resume", "\u202e'; DROP TABLE symfonic_events; --", "i-x", "--actor", "é" * 300,
         "--response", '{"a": NaN'],
    ],
)
def test_the_command_exits_cleanly_on_hostile_flags(sqlite_cli_db: str, args: list[str]) -> None:
    """symfonic-store exits 1 or 2 with one error line and no traceback (a real process: tests/cli/test_cli_process.py)."""
    result = run_cli("--db", sqlite_cli_db, *args)
    assert result.returncode in (1, 2), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("symfonic-store: error:")]
    assert len(errors) == 1, result.stderr
    with InterruptStore(sqlite_cli_db) as store:
        assert len(store.events()) == 1, "a refused command wrote something"
