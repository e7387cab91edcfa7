"""The append path's encoding shortcuts give exactly what the general encoders give.

``seal`` assembles the hashed body from each head item's own JSON (no encoder pass over
the list); ``canonical_json`` keeps one C encoder per thread; the SQLite fast path binds
event and thread rows as positional values. Each is compared with the slow, obvious
form: ``event_hash``, ``json.dumps`` with the canonical settings, the rows as the Core
executor writes them.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.types import Command  # noqa: F401 -- imported before any frozen clock (pydantic)

from symfonic_store import InterruptStore, build_interrupt_marker
from symfonic_store.db.schema import events, threads
from symfonic_store.events import NewEvent, canonical_json, event_hash, seal

TEXT = st.text(min_size=0, max_size=12)  # any code point: quotes, controls, surrogates
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def _slow(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_canonical_json_is_the_canonical_encoding(value: Any) -> None:
    assert canonical_json(value) == _slow(value)


@settings(max_examples=200, deadline=None)
@given(
    prev=TEXT, thread_id=TEXT, version=st.integers(min_value=1, max_value=2**40), type_=TEXT,
    interrupt_id=st.none() | TEXT, run_id=st.none() | TEXT, actor=st.none() | TEXT,
    data=st.dictionaries(TEXT, JSON, max_size=4),
    at=st.datetimes(timezones=st.just(UTC)),
)
def test_seal_hashes_what_event_hash_hashes(
    prev: str, thread_id: str, version: int, type_: str, interrupt_id: str | None,
    run_id: str | None, actor: str | None, data: dict[str, Any], at: datetime,
) -> None:
    fields = dict(
        thread_id=thread_id, version=version, type=type_, interrupt_id=interrupt_id,
        run_id=run_id, actor=actor, data=data, occurred_at=at,
    )
    sealed = seal(NewEvent(**fields), prev)  # type: ignore[arg-type]
    assert sealed.hash == event_hash(prev, **fields)  # type: ignore[arg-type]
    assert sealed.data_json == _slow(data)


def test_a_failed_encoding_leaves_the_kept_encoder_usable() -> None:
    shared = {"a": 1}
    loop: list[Any] = [shared]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        canonical_json(loop)
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    with pytest.raises(TypeError):
        canonical_json([shared, object()])
    # The containers the failed passes entered are not taken for cycles now.
    assert canonical_json([shared, shared]) == '[{"a":1},{"a":1}]'
    assert canonical_json(loop[:1]) == '[{"a":1}]'


def test_threads_encoding_at_once_each_get_their_own_text() -> None:
    values = [{"n": i, "items": [{"k": str(j)} for j in range(50)]} for i in range(8)]
    expected = [_slow(v) for v in values]
    got: dict[int, list[str]] = {}

    def work(i: int) -> None:
        got[i] = [canonical_json(values[i]) for _ in range(300)]

    runners = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in runners:
        t.start()
    for t in runners:
        t.join()
    assert all(got[i] == [expected[i]] * 300 for i in range(8))


def _rows(store: InterruptStore) -> tuple[list[Any], list[Any]]:
    with store.engine.connect() as conn:
        ev = conn.execute(sa.select(events).order_by(events.c.position)).all()
        th = conn.execute(sa.select(threads).order_by(threads.c.thread_id)).all()
    return [tuple(r)[1:] for r in ev], [tuple(r) for r in th]  # positions aside


def test_fast_path_rows_are_the_core_rows(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same calls under one frozen clock: the fast path's positional rows equal those
    SQLAlchemy Core writes (``symfonic_fast_path=False``), every column of both tables."""
    from freezegun import freeze_time

    stores = {
        "fast": InterruptStore(f"sqlite:///{tmp_path / 'fast.db'}"),
        "core": InterruptStore(
            sa.create_engine(
                f"sqlite:///{tmp_path / 'core.db'}", execution_options={"symfonic_fast_path": False}
            )
        ),
    }
    for store in stores.values():
        store.setup()
        with freeze_time("2026-03-01T09:00:00+00:00"):
            for n in range(3):
                marker = build_interrupt_marker(
                    name="approve", interrupt_id=f"i-{n}", payload={"amount": n, "note": "é\"x"},
                    run_id="r1",
                )
                store.mint(f"t-{n % 2}", marker)  # the second mint on t-0 supersedes the first
            store.resume("t-0", "i-2", {"approved": True}, actor="alice", authenticated_by="service:jwt")
            store.resume("t-1", "i-1", {"approved": False}, actor="bob")
    from symfonic_store.db.executor import executor_for

    names = {}
    for name, store in stores.items():
        with store.engine.connect() as conn:
            names[name] = executor_for(conn).name
    assert names == {"fast": "sqlite-cursor", "core": "core"}  # the two paths compared
    fast, core = _rows(stores["fast"]), _rows(stores["core"])
    for store in stores.values():
        store.close()
    assert fast == core
    assert len(fast[0]) == 6 and any("service:jwt" in r for r in fast[0])  # audit columns compared
