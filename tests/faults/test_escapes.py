"""No driver, SQLAlchemy or saver exception escapes a public call (SPEC §12, "Failures are
told truly").

The deterministic reproductions run on the real PostgreSQL server: the store's own
connection is terminated (``pg_terminate_backend`` of its backend's pid, read off the
driver connection) at a chosen point -- inside the node of a gateway answer, at that step's
COMMIT, and inside a sweep batch just as SQLAlchemy joins the fast path's pipelined
transaction (the engine's ``begin`` hook). The audit of every public method family injects
the driver's own exception where a raw one can arise (the store's runner, the saver inside
``store.checkpointer()``) on both backends.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from consistency import assert_consistent
from graph_rig import config_for, new_store, open_saver, ready
from native_graphs import Wires, node_graph
from sqlalchemy import event

from symfonic_store import (
    AsyncInterruptStore,
    DatabaseError,
    InterruptAlreadyResolvedError,
    InterruptGateway,
    InterruptInProgressError,
    InterruptStore,
    SweepIncompleteError,
    SymfonicStoreError,
)
from symfonic_store.db.executor import in_driver_transaction
from symfonic_store.langgraph import saver_sql, saver_writer
from symfonic_store.store import execute as execute_module
from symfonic_store.store.plan import Op

NOTHING_WRITTEN = "nothing of it was written"


def terminate(url: str, pid: int) -> None:
    """End one backend of the server, as an administrator would, and return once it is gone."""
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            # With a timeout (PostgreSQL 14+) the server returns once the backend is gone.
            ended = conn.execute(sa.text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid})
            assert ended.scalar()
    finally:
        admin.dispose()


def store_pids(store: InterruptStore) -> set[int]:
    """The backend pids of every connection the store opens from now on."""
    pids: set[int] = set()
    event.listen(store.engine, "connect", lambda dbapi, _record: pids.add(dbapi.info.backend_pid))
    store.close()  # drop what is pooled: the next connections are recorded
    return pids


def assert_only_store_errors(error: BaseException) -> None:
    assert isinstance(error, SymfonicStoreError)
    assert not isinstance(error, sa.exc.SQLAlchemyError | psycopg.Error | sqlite3.Error)


# --- gateway.answer: the connection terminated between the claim and the step's commit --


@pytest.mark.postgres
@pytest.mark.parametrize("where", ["in the node", "at the step's commit"])
def test_a_connection_terminated_while_the_gateway_answers_is_told_unknown(
    postgres_schema_url: str, where: str
) -> None:
    """pg_terminate_backend during gateway.answer: a DatabaseError saying the claim committed and the outcome is unknown; the claim is kept."""
    url = postgres_schema_url
    store = InterruptStore(url)
    store.setup()
    wires = Wires()
    armed = {"node": False, "commit": False}

    def graph_node_then_kill(checkpointer: Any, wires: Wires) -> Any:
        graph = node_graph(checkpointer, wires)
        return graph

    gate = InterruptGateway(graph_node_then_kill(store.checkpointer(), wires), store)
    out = gate.invoke({}, config_for("t"))
    (paused,) = out["__interrupt__"]
    pids = store_pids(store)

    original_send = wires.send

    def send(amount: int) -> str:
        sent = original_send(amount)  # the side effect happened
        if where == "in the node":
            for pid in sorted(pids):
                terminate(url, pid)
        else:
            armed["commit"] = True
        return sent

    def kill_at_commit(conn: Any) -> None:
        if armed["commit"]:
            armed["commit"] = False
            terminate(url, conn.connection.dbapi_connection.info.backend_pid)

    wires.send = send  # type: ignore[method-assign]
    event.listen(store.engine, "commit", kill_at_commit)
    try:
        with pytest.raises(DatabaseError) as info:
            gate.answer("t", paused.id, {"approved": True}, actor="alice")
        event.remove(store.engine, "commit", kill_at_commit)
        error = info.value
        assert_only_store_errors(error)
        assert error.outcome_unknown is True
        message = str(error)
        assert "the answer's claim is committed" in message
        assert "the graph may already have acted on it" in message
        assert NOTHING_WRITTEN not in message
        if where == "at the step's commit":
            assert "whether the graph's step was saved is unknown" in message
        else:
            assert "the graph's step was not saved" in message
        assert wires.sent == [999]
        # The claim is kept (or, when the step did commit, the answer is recorded as
        # taken): a second answer cannot run the node again.
        with pytest.raises((InterruptInProgressError, InterruptAlreadyResolvedError)):
            gate.answer("t", paused.id, {"approved": True}, actor="bob")
        assert wires.sent == [999]
    finally:
        store.close()


@pytest.mark.postgres
def test_the_engines_begin_hook_meeting_a_dead_connection_is_the_stores_error(
    postgres_schema_url: str,
) -> None:
    """SQLAlchemy joining a pipelined write whose backend was terminated: the store's runner raises DatabaseError (not psycopg's) and the connection is invalidated."""
    url = postgres_schema_url
    store = InterruptStore(url)
    store.setup()

    def work(conn: sa.Connection) -> None:
        # The write's BEGIN is queued in psycopg's pipeline; SQLAlchemy's statement makes
        # the engine's begin hook leave the pipeline, on a dead connection.
        terminate(url, conn.connection.dbapi_connection.info.backend_pid)
        conn.execute(sa.text("SELECT 1"))

    try:
        with store.engine.connect() as conn:
            with pytest.raises(DatabaseError) as info:
                execute_module.execute(conn, Op(work, write=True))
            assert conn.invalidated  # the pool will not hand the dead connection out again
        assert_only_store_errors(info.value)
        assert isinstance(info.value.__cause__, sa.exc.DBAPIError)
        assert info.value.outcome_unknown is False
        assert NOTHING_WRITTEN in str(info.value)  # it failed before COMMIT: that is known
        assert store.list_pending() == []  # the store carries on with a new connection
    finally:
        store.close()


# --- sweep: the connection terminated inside a batch -----------------------------------


def stale_marker(n: int) -> dict[str, Any]:
    return {
        "name": "approval",
        "interrupt_id": f"i-{n}",
        "payload": {"n": n},
        "tool_call_id": None,
        "run_id": None,
        "minted_at": time.time() - 10_000,
    }


THREADS = 9
BATCH = 2


@pytest.mark.postgres
@pytest.mark.parametrize("where", ["as SQLAlchemy joins a write", "at the batch's commit"])
def test_a_connection_terminated_mid_sweep_keeps_the_committed_report(
    postgres_schema_url: str, where: str
) -> None:
    """pg_terminate_backend during a sweep: SweepIncompleteError listing the two committed batches, with the right outcome."""
    url = postgres_schema_url
    store = InterruptStore(url)
    store.setup()
    for n in range(THREADS):
        store.mint(f"t-{n}", stale_marker(n))
    store_pids(store)
    woken: list[tuple[str, str, str]] = []
    seen = {"after": 0, "fired": False}

    def on_expired(thread_id: str, interrupt_id: str, reason: str) -> None:
        woken.append((thread_id, interrupt_id, reason))

    def kill_on_join(conn: Any) -> None:
        # Once two batches are committed and woken, the next write (settling the fourth
        # wake-up) queues its BEGIN in psycopg's pipeline, and SQLAlchemy joins it for
        # its first statement: the backend is ended first, so the engine's begin hook,
        # leaving the pipeline, meets the dead connection -- outside SQLAlchemy's error
        # handling, which does not wrap what a hook raises.
        if where != "as SQLAlchemy joins a write" or seen["fired"] or len(woken) < 4:
            return
        if in_driver_transaction(conn):
            seen["fired"] = True
            terminate(url, conn.connection.dbapi_connection.info.backend_pid)

    def kill_at_commit(conn: Any) -> None:
        # Armed once two batches are committed and woken: the first write after the
        # fourth wake-up settles it, the second is the third batch.
        if where != "at the batch's commit" or seen["fired"] or len(woken) < 4:
            return
        if not conn.get_execution_options().get("symfonic_write"):
            return
        seen["after"] += 1
        if seen["after"] == 2:
            seen["fired"] = True
            terminate(url, conn.connection.dbapi_connection.info.backend_pid)

    event.listen(store.engine, "begin", kill_on_join, insert=True)
    event.listen(store.engine, "commit", kill_at_commit)
    try:
        with pytest.raises(SweepIncompleteError) as info:
            store.sweep(ttl_seconds=60, batch_size=BATCH, on_expired=on_expired)
        event.remove(store.engine, "commit", kill_at_commit)
        event.remove(store.engine, "begin", kill_on_join)
        error = info.value
        assert seen["fired"]
        assert_only_store_errors(error)
        assert_only_store_errors(error.error)
        assert isinstance(error.error, DatabaseError)
        committed = [(f"t-{n}", f"i-{n}", "ttl") for n in range(4)]
        assert error.report.expired == committed == woken
        assert error.report.complete is False
        assert f"committed {len(committed)} expiry(ies)" in str(error)
        unknown = where == "at the batch's commit"
        assert error.outcome_unknown is unknown
        if unknown:
            assert NOTHING_WRITTEN not in str(error)
            assert "may or may not have been saved" in str(error)
        else:
            assert "did not commit, so nothing of it was written" in str(error)
        # The next sweep finishes the work; nothing is half-done.
        store.sweep(ttl_seconds=60, batch_size=BATCH, on_expired=lambda *a: woken.append(a))
        assert store.list_pending() == []
        assert_consistent(store)
    finally:
        store.close()


# --- every public method family: a driver's own exception becomes the store's error ----


def driver_error(db_url: str) -> Exception:
    """The driver's own exception for a lost connection, as its cursor raises it."""
    if db_url.startswith("sqlite"):
        return sqlite3.OperationalError("disk I/O error")
    return psycopg.OperationalError("consuming input failed: server closed the connection")


@pytest.fixture
def raw_fault(migrated_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bool]]:
    """Arm ``fault["runner"]`` to make the store's runner meet a raw driver error (as an
    engine hook raises it), ``fault["saver"]`` to make LangGraph's saver inside
    ``store.checkpointer()`` raise one on its own cursor."""
    fault = {"runner": False, "saver": False}
    error = driver_error(migrated_url)
    choose = execute_module.choose_executor_again
    call, tuples = saver_sql.SaverSql.call, saver_sql.SaverSql.tuples

    def choose_again(conn: Any) -> Any:
        if fault["runner"]:
            raise error
        return choose(conn)

    def saver_call(self: Any, conn: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if fault["saver"]:
            raise error
        return call(self, conn, method, *args, **kwargs)

    def saver_tuples(self: Any, conn: Any, config: Any, **kwargs: Any) -> Any:
        if fault["saver"]:
            raise error
        return tuples(self, conn, config, **kwargs)

    monkeypatch.setattr(execute_module, "choose_executor_again", choose_again)
    monkeypatch.setattr(saver_sql.SaverSql, "call", saver_call)
    monkeypatch.setattr(saver_sql.SaverSql, "tuples", saver_tuples)
    yield fault


def assert_told(call: Callable[[], Any], *, may_have_written: bool = False) -> DatabaseError:
    with pytest.raises(SymfonicStoreError) as info:
        call()
    error = info.value
    assert_only_store_errors(error)
    assert isinstance(error, DatabaseError), repr(error)
    failed = error.__cause__ if isinstance(error.__cause__, DatabaseError) else error
    # (The gateway's error is caused by the failing step's, which is the driver's.)
    assert isinstance(failed.__cause__, sa.exc.DBAPIError)  # the driver's, for --traceback
    assert "check that it is running and reachable" in str(failed)
    if may_have_written:
        assert NOTHING_WRITTEN not in str(error)
    return error


STORE_CALLS: dict[str, Callable[[InterruptStore], Any]] = {
    "mint": lambda s: s.mint("t-2", stale_marker(2)),
    "resume": lambda s: s.resume("t-1", "i-1", {"approved": True}, actor="alice"),
    "expire": lambda s: s.expire("t-1", "i-1"),
    "claim": lambda s: s.claim("t-1", "i-1", {"approved": True}, actor="alice"),
    "pending": lambda s: s.pending("t-1"),
    "list_pending": lambda s: s.list_pending(),
    "open_interrupts": lambda s: s.open_interrupts("t-1"),
    "history": lambda s: s.history("t-1"),
    "events": lambda s: s.events(),
    "iter_events": lambda s: list(s.iter_events()),
    "replay": lambda s: list(s.replay("t-1")),
    "audit": lambda s: s.audit(),
    "verify": lambda s: s.verify(),
    "sweep": lambda s: s.sweep(ttl_seconds=60),
    "owed_wakeups": lambda s: s.owed_wakeups(),
    "rebuild_projection": lambda s: s.rebuild_projection(),
}


@pytest.mark.parametrize("method", sorted(STORE_CALLS))
def test_no_driver_error_escapes_the_store(
    store: InterruptStore, raw_fault: dict[str, bool], method: str
) -> None:
    """A driver's own exception in the store's runner is the store's DatabaseError, for every store method."""
    store.mint("t-1", stale_marker(1))
    raw_fault["runner"] = True
    assert_told(lambda: STORE_CALLS[method](store))
    raw_fault["runner"] = False
    assert store.pending("t-1") is not None  # nothing was written
    assert_consistent(store)


async def test_no_driver_error_escapes_the_async_store(migrated_url: str, raw_fault: dict[str, bool]) -> None:
    """The asyncio store's runner translates a driver's own exception the same way."""
    astore = AsyncInterruptStore(migrated_url)
    try:
        await astore.setup()
        await astore.mint("t-1", stale_marker(1))
        raw_fault["runner"] = True
        for call in (
            lambda: astore.history("t-1"),
            lambda: astore.resume("t-1", "i-1", None, actor="alice"),
            lambda: astore.sweep(ttl_seconds=60),
        ):
            with pytest.raises(DatabaseError) as info:
                await call()
            assert_only_store_errors(info.value)
        raw_fault["runner"] = False
        assert await astore.pending("t-1") is not None
    finally:
        await astore.aclose()


def test_no_saver_error_escapes_the_checkpointer(store: InterruptStore, raw_fault: dict[str, bool]) -> None:
    """LangGraph's saver inside store.checkpointer() raising on its own cursor: every method tells the store's error."""
    saver = store.checkpointer()
    graph = node_graph(saver, Wires())
    graph.invoke({}, config_for("t"))
    head = saver.get_tuple(config_for("t"))
    assert head is not None
    raw_fault["saver"] = True
    assert_told(lambda: saver.get_tuple(config_for("t")))
    assert_told(lambda: list(saver.list(config_for("t"))))
    assert_told(lambda: saver.put(head.config, head.checkpoint, head.metadata, {}))
    assert_told(lambda: saver.put_writes(head.config, [("answers", [1])], "task-1"))
    assert_told(lambda: saver.delete_thread("t"))
    assert_told(lambda: graph.invoke({}, config_for("t-2")))
    raw_fault["saver"] = False
    assert saver.get_tuple(config_for("t")) == head


def test_a_saver_error_while_the_gateway_answers_is_told_unknown(
    store: InterruptStore, raw_fault: dict[str, bool]
) -> None:
    """The saver failing after the node acted: the answer is neither 'not taken' nor 'nothing written'; the claim is kept."""
    wires = Wires()
    gate = InterruptGateway(node_graph(store.checkpointer(), wires), store)
    (paused,) = gate.invoke({}, config_for("t"))["__interrupt__"]
    original_send = wires.send

    def send(amount: int) -> str:
        raw_fault["saver"] = True  # the step's writes meet the failure after the side effect
        return original_send(amount)

    wires.send = send  # type: ignore[method-assign]
    error = assert_told(
        lambda: gate.answer("t", paused.id, {"approved": True}, actor="alice"), may_have_written=True
    )
    assert error.outcome_unknown is True
    assert "the answer's claim is committed" in str(error)
    raw_fault["saver"] = False
    assert wires.sent == [999]
    with pytest.raises(InterruptInProgressError):
        gate.answer("t", paused.id, {"approved": True}, actor="bob")
    assert wires.sent == [999]
    # A failure before any claim is the plain error: nothing was written.
    raw_fault["saver"] = True
    plain = assert_told(lambda: gate.invoke({}, config_for("t-2")))
    assert plain.outcome_unknown is False


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
async def test_the_callers_saver_failing_while_the_gateway_answers_is_told_unknown(
    migrated_url: str, driver: str
) -> None:
    """LangGraph's own saver (on its own connection) losing it after the node acted: the store's DatabaseError, outcome unknown, the claim kept."""
    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            wires = Wires()
            gate = InterruptGateway(node_graph(saver, wires), store)
            config = config_for("t")
            out = await (gate.ainvoke({}, config) if driver == "ainvoke" else ready(gate.invoke({}, config)))
            (paused,) = out["__interrupt__"]
            lost = {"on": False}
            error = driver_error(migrated_url)

            def failing(method: Callable[..., Any]) -> Callable[..., Any]:
                def call(*args: Any, **kwargs: Any) -> Any:
                    if lost["on"]:
                        raise error
                    return method(*args, **kwargs)

                return call

            for name in ("put", "put_writes", "get_tuple", "aput", "aput_writes", "aget_tuple"):
                setattr(saver, name, failing(getattr(saver, name)))
            original_send = wires.send

            def send(amount: int) -> str:
                lost["on"] = True  # the saver's connection is gone once the node acted
                return original_send(amount)

            wires.send = send  # type: ignore[method-assign]

            async def answer(actor: str) -> Any:
                if driver == "ainvoke":
                    return await gate.aanswer("t", paused.id, {"approved": True}, actor=actor)
                return gate.answer("t", paused.id, {"approved": True}, actor=actor)

            with pytest.raises(SymfonicStoreError) as info:
                await answer("alice")
            failure = info.value
            assert_only_store_errors(failure)
            assert isinstance(failure, DatabaseError) and failure.outcome_unknown is True
            assert "the answer's claim is committed" in str(failure)
            assert NOTHING_WRITTEN not in str(failure)
            assert wires.sent == [999]
            lost["on"] = False
            with pytest.raises(InterruptInProgressError):
                await answer("bob")
            assert wires.sent == [999]
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


def test_a_checkpointer_group_lost_at_commit_is_unknown_and_not_retried(sqlite_url: str) -> None:
    """SQLite's grouped checkpointer writes lost at COMMIT: every writer is told 'unknown'; none is retried (the group had committed)."""
    store = InterruptStore(sqlite_url)
    store.setup()
    with store.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE scratch (n INTEGER)")
    writer = saver_writer.sqlite_writer(store.engine)
    fired = {"done": False}

    def lost_at_commit(conn: Any) -> None:
        if not fired["done"]:
            fired["done"] = True
            dbapi = conn.connection.dbapi_connection
            dbapi.commit()  # the database has the group, durably ...
            dbapi.close()  # ... and the acknowledgement is lost

    def insert(n: int) -> Op[None]:
        return Op(lambda c: c.execute(sa.text("INSERT INTO scratch VALUES (:n)"), {"n": n}), write=True)

    first = saver_writer._Job(insert(1))
    writer._queued.append(first)  # queued by another thread: the next writer commits both
    event.listen(store.engine, "commit", lost_at_commit)
    try:
        with pytest.raises(DatabaseError) as info:
            writer.run(store, insert(2))
        assert fired["done"]
        for error in (info.value, first.error):
            assert isinstance(error, DatabaseError)
            assert_only_store_errors(error)
            assert error.outcome_unknown is True
            assert NOTHING_WRITTEN not in str(error)
        event.remove(store.engine, "commit", lost_at_commit)
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT n FROM scratch ORDER BY n").scalars().all() == [1, 2]
    finally:
        writer.close()
        store.close()


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
async def test_the_gateways_stream_tells_a_saver_failure_as_the_stores_error(
    migrated_url: str, driver: str
) -> None:
    """gateway.stream / astream over LangGraph's own saver losing its connection: the store's DatabaseError, not the driver's."""
    store = new_store(migrated_url, driver)
    await ready(store.setup())
    try:
        async with open_saver(migrated_url, driver) as saver:
            error = driver_error(migrated_url)

            def lost(*args: Any, **kwargs: Any) -> Any:
                raise error

            for name in ("put", "aput"):
                setattr(saver, name, lost)
            gate = InterruptGateway(node_graph(saver, Wires()), store)
            with pytest.raises(SymfonicStoreError) as info:
                if driver == "ainvoke":
                    async for _chunk in gate.astream({}, config_for("t")):
                        pass
                else:
                    for _chunk in gate.stream({}, config_for("t")):
                        pass
            assert_only_store_errors(info.value)
            assert isinstance(info.value, DatabaseError)
            assert info.value.outcome_unknown is True  # a saver's write commits on its own
            assert isinstance(info.value.__cause__, sa.exc.DBAPIError)
    finally:
        await ready(store.aclose() if driver == "ainvoke" else store.close())


async def test_no_saver_error_escapes_the_async_checkpointer(
    migrated_url: str, raw_fault: dict[str, bool]
) -> None:
    """The asyncio store's checkpointer (its saver driven inside run_sync) tells the store's error too."""
    astore = AsyncInterruptStore(migrated_url)
    try:
        await astore.setup()
        saver = astore.checkpointer()
        graph = node_graph(saver, Wires())
        await graph.ainvoke({}, config_for("t"))
        head = await saver.aget_tuple(config_for("t"))
        assert head is not None
        raw_fault["saver"] = True
        for call in (
            lambda: saver.aget_tuple(config_for("t")),
            lambda: saver.aput_writes(head.config, [("answers", [1])], "task-1"),
            lambda: saver.adelete_thread("t"),
            lambda: graph.ainvoke({}, config_for("t-2")),
        ):
            with pytest.raises(DatabaseError) as info:
                await call()
            assert_only_store_errors(info.value)
            assert isinstance(info.value.__cause__, sa.exc.DBAPIError)
        raw_fault["saver"] = False
        assert await saver.aget_tuple(config_for("t")) == head
    finally:
        await astore.aclose()


def test_a_saver_failure_after_the_markers_resume_is_told_unknown(migrated_url: str) -> None:
    """The seed marker's interrupt answered through the gateway: the resume is committed, so a saver failure afterwards is 'unknown', never 'nothing was written'."""
    import asyncio

    from symfonic_store.demo import RefundLedger, build_agent_graph, refund_tools

    async def scenario() -> None:
        store = InterruptStore(migrated_url)
        store.setup()
        try:
            async with open_saver(migrated_url, "invoke") as saver:
                graph = build_agent_graph(store, checkpointer=saver, tools=refund_tools(RefundLedger()))
                gate = InterruptGateway(graph, store)
                gate.invoke({"messages": [("user", "Please refund $420 to order 1181.")]}, config_for("t"))
                (opened,) = store.open_interrupts("t")
                assert opened["source"] == "marker"
                lost = {"on": False}
                error = driver_error(migrated_url)
                for name in ("put", "put_writes", "get_tuple"):
                    method = getattr(saver, name)

                    def failing(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
                        if lost["on"]:
                            raise error
                        return _method(*args, **kwargs)

                    setattr(saver, name, failing)
                resume = store.resume

                def resume_then_lose(*args: Any, **kwargs: Any) -> Any:
                    command = resume(*args, **kwargs)
                    lost["on"] = True  # the saver's connection is gone once the answer is in
                    return command

                store.resume = resume_then_lose  # type: ignore[method-assign]
                with pytest.raises(DatabaseError) as info:
                    gate.answer("t", opened["interrupt_id"], {"approved": True}, actor="alice")
                assert_only_store_errors(info.value)
                assert info.value.outcome_unknown is True
                assert "the answer is recorded (resumed)" in str(info.value)
                assert NOTHING_WRITTEN not in str(info.value)
                lost["on"] = False
                assert [e.type for e in store.history("t")].count("interrupt.resumed") == 1
        finally:
            store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("failing", ["get_state", "confirm"])
def test_a_failure_after_the_graph_acted_is_unknown_never_nothing_written(
    store: InterruptStore, failing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node ran (and its step committed); then the caller's saver fails on the gateway's next read, or the store on the claim's confirm: the answer's outcome is unknown, never "nothing was written: retry"."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    sent: list[int] = []

    def node(state: dict[str, Any]) -> dict[str, Any]:
        interrupt({"name": "approve"})
        sent.append(1)
        return {"x": 1}

    builder = StateGraph(dict)
    builder.add_node("n", node)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    graph = builder.compile(checkpointer=InMemorySaver(), name="g")
    gate = InterruptGateway(graph, store)
    (paused,) = gate.invoke({}, {"configurable": {"thread_id": "t-after"}})["__interrupt__"]
    ran = {"yes": False}
    real_invoke, real_get_state = graph.invoke, graph.get_state

    def invoke(*args: Any, **kwargs: Any) -> Any:
        result = real_invoke(*args, **kwargs)
        ran["yes"] = True
        return result

    def get_state(*args: Any, **kwargs: Any) -> Any:
        if ran["yes"] and failing == "get_state":
            raise sqlite3.OperationalError("disk I/O error")  # the caller's saver, after the step
        return real_get_state(*args, **kwargs)

    object.__setattr__(graph, "invoke", invoke)
    object.__setattr__(graph, "get_state", get_state)
    if failing == "confirm":
        def confirm(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise DatabaseError("the transaction did not commit, so nothing of it was written: retry")

        monkeypatch.setattr(type(store), "confirm", confirm)
    with pytest.raises(DatabaseError) as caught:
        gate.answer("t-after", paused.id, {"approved": True}, actor="alice")
    assert sent == [1], "the node acted"
    assert caught.value.outcome_unknown is True, caught.value
    assert "nothing of it was written" not in str(caught.value)
    assert "outcome is unknown" in str(caught.value)


def test_a_sweep_that_fails_after_recording_an_unknown_outcome_keeps_its_report(
    store: InterruptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lapsed claim recorded `outcome_unknown`, then an expiry batch fails: the caller gets SweepIncompleteError with that claim in its report, never a bare "nothing was written"."""
    from datetime import UTC, datetime, timedelta

    from freezegun import freeze_time
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from symfonic_store.store import sweep_ops as ops

    def node(state: dict[str, Any]) -> dict[str, Any]:
        interrupt({"name": "approve"})
        return {"x": 1}

    builder = StateGraph(dict)
    builder.add_node("n", node)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    gate = InterruptGateway(builder.compile(checkpointer=InMemorySaver(), name="g"), store)
    (paused,) = gate.invoke({}, {"configurable": {"thread_id": "t-lapsed"}})["__interrupt__"]
    store.claim("t-lapsed", paused.id, {"approved": True}, actor="alice")  # alice's process dies

    def failing_batch(conn: Any, **kwargs: Any) -> Any:
        raise DatabaseError("the transaction did not commit, so nothing of it was written: retry")

    monkeypatch.setattr(ops, "sweep_batch", failing_batch)
    with freeze_time(datetime.now(UTC) + timedelta(hours=1)), pytest.raises(SweepIncompleteError) as caught:
        store.sweep()
    assert caught.value.report.claims_settled == [("t-lapsed", paused.id, "outcome_unknown")]
    assert "1 as outcome_unknown" in str(caught.value)
    assert [e.data.get("why") for e in store.history("t-lapsed")][-1] == "outcome_unknown"
