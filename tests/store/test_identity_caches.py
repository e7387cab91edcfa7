"""Caches keyed by the identity of an object: the fast path's compiled statements (by
``id()``), a scoped audit's statements (one pair per shape), and the backend of an engine.

An ``id()`` is only unique among the objects alive at once: a cache keyed by it must keep
its object alive, or a later object on the same address is served the first one's entry
(here: another statement's SQL, so rows of a scope the caller does not have).
"""

from __future__ import annotations

import gc
import itertools
import threading
import weakref
from typing import Any

import pytest
import sqlalchemy as sa
from factories import marker

from symfonic_store import InterruptAlreadyResolvedError, InterruptStore
from symfonic_store.db.backends import backend_of
from symfonic_store.db.executor import CursorExecutor, executor_for
from symfonic_store.db.executors.cursor import CACHE_LIMIT
from symfonic_store.db.statements.audit_rows import PageShape, page_query

TENANTS: tuple[str | None, ...] = ("acme", "globex", "initech", "umbrella", "hooli", "stark", None)


def _fast_executor(store: InterruptStore) -> CursorExecutor:
    with store.engine.connect() as conn:
        executor = executor_for(conn)
    assert isinstance(executor, CursorExecutor)
    return executor


def test_a_statement_built_per_call_never_runs_another_ones_sql(store: InterruptStore) -> None:
    """Statements made and dropped one after another (their addresses reused) each run
    their own SQL with their own values; the cache keeps what it caches alive, and stays
    within its limit, dropping the oldest."""
    executor = _fast_executor(store)
    with store.engine.connect() as conn:
        first: Any = sa.select(sa.literal(-1, sa.Integer()))
        assert [tuple(r) for r in executor.fetch(conn, first, {})] == [(-1,)]
        kept = weakref.ref(first)
        del first
        gc.collect()
        assert kept() is not None  # cached, so its id cannot become another statement's
        for i in range(CACHE_LIMIT + 50):
            stmt: Any = sa.select(sa.literal(i, sa.Integer()), sa.literal(f"s{i}", sa.String()))
            assert [tuple(r) for r in executor.fetch(conn, stmt, {})] == [(i, f"s{i}")]
            del stmt
            if i % 100 == 0:
                gc.collect()
        assert executor.cache_sizes()[0] <= CACHE_LIMIT
        gc.collect()
        assert kept() is None  # dropped from the cache (the oldest): memory comes back


def _seed(store: InterruptStore) -> None:
    """One interrupt per tenant (and one without), answered by alice, bob's answer refused."""
    for tenant in TENANTS:
        thread = f"t-{tenant}"
        store.mint(thread, marker(f"i-{tenant}"), tenant=tenant)
        store.resume(thread, f"i-{tenant}", {"ok": True}, actor="alice")
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume(thread, f"i-{tenant}", {"ok": True}, actor="bob")


def test_scoped_audits_racing_over_many_tenant_sets_each_get_their_own_rows(
    store: InterruptStore,
) -> None:
    """Threads read the audit for every tenant set of up to three tenants (None among
    them or not), with and without an actor filter, garbage collected between rounds:
    each read returns exactly its scope's records and refusals, and the caches stop
    growing once every shape has been seen."""
    _seed(store)
    scopes = [frozenset(c) for n in range(4) for c in itertools.combinations(TENANTS, n)]
    executor = _fast_executor(store)
    workers, rounds = 4, 5
    barrier = threading.Barrier(workers)
    wrong: list[Any] = []
    sizes: list[tuple[int, int]] = []

    def read(scope: frozenset[str | None], actor: str | None) -> None:
        records = store.audit(tenants=scope, actor=actor)
        got = {(r.thread_id, r.tenant, tuple(a["actor"] for a in r.attempts)) for r in records}
        want = {(f"t-{t}", t, ("bob",)) for t in scope}
        if got != want:
            wrong.append((scope, actor, got))

    def work(k: int) -> None:
        try:
            for _ in range(rounds):
                order = scopes[k * 16:] + scopes[:k * 16]  # each its own order
                for j, scope in enumerate(order):
                    read(scope, "alice" if (j + k) % 2 else None)
                if barrier.wait() == 0:
                    gc.collect()  # the statements no read holds now are freed
                    sizes.append(executor.cache_sizes())
                barrier.wait()
        except Exception as exc:  # a worker's failure fails the test, not only its thread
            wrong.append(repr(exc))
            barrier.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert len(sizes) == rounds
    assert all(size == sizes[0] for size in sizes)  # every shape cached in the first round
    assert max(sizes[0]) <= CACHE_LIMIT
    assert page_query.cache_info().currsize <= 128


def test_scopes_of_one_shape_share_their_statements() -> None:
    """The statements depend on the scope's shape only; the tenants are parameters."""
    def shape(untenanted: bool) -> PageShape:
        return PageShape(False, False, False, 2, untenanted, False, False, False)

    assert page_query(shape(True)) is page_query(shape(True))
    assert page_query(shape(True)) is not page_query(shape(False))


def test_a_dropped_engines_backend_goes_with_it() -> None:
    """The backend is kept for the engine's lifetime, not for the process's."""
    engine = sa.create_engine("sqlite://")
    backend = backend_of(engine)
    assert backend_of(engine.execution_options(isolation_level="AUTOCOMMIT")) is backend
    gone = weakref.ref(backend)
    del backend
    engine.dispose()
    del engine
    gc.collect()
    assert gone() is None
