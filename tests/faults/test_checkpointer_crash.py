"""A process killed between two steps leaves the audit and the checkpoints in agreement.

A child process (forked: a real process, really killed) runs the refund agent compiled with ``store.checkpointer()`` (a request
that pauses on an approval, the approval through ``store.resume``, the refund) and
SIGKILLs itself at a chosen point: right after the checkpointer's N-th write committed,
or inside it, after LangGraph's SQL ran and before the COMMIT. The parent then reads
both records of the conversation from the database and checks that they agree:

- every interrupt the saved graph is paused on has its ``interrupt.minted``;
- every ``interrupt.minted`` names a marker some saved checkpoint or write holds;
- the ``route.decided`` events are exactly the router evaluations LangGraph saved (the
  agent and tools tasks whose writes, or whose step's checkpoint, were saved).

Every kill point of the conversation is tried, on each database. The same check, run on
the recording wrapper beside a separate saver (the store's commits apart from
LangGraph's), finds the disagreement this design removes: a kill right after the
router's own commit leaves a mint that no saved checkpoint holds.

The runs use ``durability="sync"``, the mode in which LangGraph saves each step before
the next one starts (docs/reliability.md says what the default ``"async"`` allows).
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from symfonic_store import InterruptStore

THREAD = "t-crash"
REQUEST = "Please refund $420 to order 1181."
CHILD_TIMEOUT = 120.0
ROUTED = ("agent", "tools")
"""The nodes whose router records a decision in the demo agent."""


# --- the child ----------------------------------------------------------------------


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def child_main(url: str, mode: str, kill_at: int, inside: bool) -> int:
    """Run one conversation; SIGKILL this process at the ``kill_at``-th hooked commit.

    Returns the number of hooked commits when it lived to the end.
    """
    from langchain_core.messages import HumanMessage

    from symfonic_store.demo import build_agent_graph
    from symfonic_store.langgraph import saver_sql

    store = InterruptStore(url)
    seen = [0]

    def tick() -> None:
        seen[0] += 1
        if seen[0] == kill_at:
            _die()

    if mode == "own":
        saver: Any = store.checkpointer()
        if inside:
            real_call = saver_sql.SaverSql.call

            def call(self: Any, conn: Any, method: str, *args: Any, **kwargs: Any) -> Any:
                result = real_call(self, conn, method, *args, **kwargs)
                if method in ("put", "put_writes"):
                    tick()  # LangGraph's SQL ran; the transaction is still open
                return result

            saver_sql.SaverSql.call = call  # type: ignore[method-assign]
        else:
            for name in ("put", "put_writes"):
                real = getattr(saver, name)

                def after(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                    result = _real(*args, **kwargs)
                    tick()  # committed
                    return result

                setattr(saver, name, after)
    else:  # "beside": the recording wrapper over a saver of its own, the pre-checkpointer way
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = sa.make_url(url).database
        assert path
        saver = store.recording_checkpointer(SqliteSaver(sqlite3.connect(path, check_same_thread=False)))
        real_route = store.record_router_decision

        def route(*args: Any, **kwargs: Any) -> Any:
            result = real_route(*args, **kwargs)
            tick()  # the router's own commit, before LangGraph saved the step
            return result

        store.record_router_decision = route  # type: ignore[method-assign]

    graph = build_agent_graph(store, checkpointer=saver)
    config = {"configurable": {"thread_id": THREAD, "actor": "alice"}}
    paused = graph.invoke({"messages": [HumanMessage(REQUEST)]}, config, durability="sync")
    interrupt_id = paused["__interrupt__"][0].value["interrupt_id"]
    command = store.resume(THREAD, interrupt_id, {"approved": True}, actor="alice")
    graph.invoke(command, config, durability="sync")
    store.close()
    return seen[0]


# --- the parent ---------------------------------------------------------------------


def run_child(url: str, mode: str, kill_at: int, inside: bool = False) -> tuple[int, str]:
    """Run the child; its exit code and report (``done <hooked commits>`` if not killed).

    The child is forked from this process (LangGraph already imported: a kill point costs
    a conversation, not an interpreter start) and opens its own store and connections.
    """
    import multiprocessing
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report"
        child = multiprocessing.get_context("fork").Process(
            target=_child, args=(url, mode, kill_at, inside, str(report))
        )
        child.start()
        child.join(CHILD_TIMEOUT)
        if child.is_alive():
            child.kill()
            child.join()
            raise AssertionError(f"the child hung for {CHILD_TIMEOUT}s")
        code = child.exitcode
        text = report.read_text() if report.exists() else ""
    if code not in (0, -signal.SIGKILL):
        raise AssertionError(f"the child failed ({code}): {text}")
    return int(code or 0), text


def _child(url: str, mode: str, kill_at: int, inside: bool, report: str) -> None:
    try:
        done = child_main(url, mode, kill_at, inside)
    except BaseException as exc:  # reported, so the parent can say what went wrong
        Path(report).write_text(f"error {type(exc).__name__}: {exc}")
        raise
    Path(report).write_text(f"done {done}")


def _marker_id(value: Any) -> str | None:
    return value.get("interrupt_id") if isinstance(value, dict) else None


def disagreements(url: str) -> list[str]:
    """What the audit and the saved checkpoints of THREAD disagree on (empty: they agree)."""
    from symfonic_store.demo import build_agent_graph

    problems: list[str] = []
    with InterruptStore(url) as store:
        saver = store.checkpointer()
        graph = build_agent_graph(store, checkpointer=saver)
        config = {"configurable": {"thread_id": THREAD}}
        tuples = {t.config["configurable"]["checkpoint_id"]: t for t in saver.list(config)}
        history = list(graph.get_state_history(config))
        events = store.history(THREAD)

        minted = {e.interrupt_id for e in events if e.type == "interrupt.minted"}
        for iv in graph.get_state(config).interrupts if tuples else ():
            if _marker_id(iv.value) not in minted:
                problems.append(f"paused on {_marker_id(iv.value)} with no mint")

        held: set[str | None] = set()
        for t in tuples.values():
            held.add(_marker_id(t.checkpoint["channel_values"].get("_interrupt_pending")))
            held |= {_marker_id(v) for _, channel, v in t.pending_writes or () if channel == "_interrupt_pending"}
        for interrupt_id in sorted(minted - held):
            problems.append(f"minted {interrupt_id} but no saved checkpoint or write holds it")

        stepped = {s.parent_config["configurable"]["checkpoint_id"] for s in history if s.parent_config}
        saved_routers = 0
        for snapshot in history:
            checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
            written = {w[0] for w in tuples[checkpoint_id].pending_writes or ()}
            for task in snapshot.tasks:
                if task.name in ROUTED and (checkpoint_id in stepped or task.id in written):
                    saved_routers += 1
        decided = sum(e.type == "route.decided" for e in events)
        if decided != saved_routers:
            problems.append(f"{decided} route decisions recorded, {saved_routers} saved by LangGraph")
    return problems


def fresh(url: str) -> None:
    with InterruptStore(url) as store:
        store.setup()
        store.checkpointer().setup()


def test_every_kill_point_of_a_conversation_leaves_audit_and_checkpoints_in_agreement(db_url: str) -> None:
    """SIGKILL after (or inside) each of the checkpointer's commits: no pause without its mint, no mint without its checkpoint."""
    fresh(db_url)
    code, out = run_child(db_url, "own", kill_at=0)
    assert code == 0 and disagreements(db_url) == []
    total = int(out.split()[1])
    assert total >= 12  # the conversation's puts and writes: the points worth killing at
    for kill_at in range(1, total + 1):
        for inside in (False, True):
            if inside == bool(kill_at % 2) and kill_at != total:
                continue  # each point once, alternating; the last one both ways
            fresh_url = _fresh_copy(db_url, kill_at, inside)
            code, _ = run_child(fresh_url, "own", kill_at, inside)
            assert code == -signal.SIGKILL, f"kill point {kill_at} was never reached"
            assert disagreements(fresh_url) == [], f"killed {'inside' if inside else 'after'} commit {kill_at}"


_COPIES: dict[str, Any] = {}


def _fresh_copy(url: str, kill_at: int, inside: bool) -> str:
    """An empty database for one kill: a new SQLite file, or a new PostgreSQL schema."""
    if url.startswith("sqlite"):
        path = Path(str(sa.make_url(url).database))
        target = path.with_name(f"kill-{kill_at}-{int(inside)}.db")
        fresh_url = f"sqlite:///{target}"
    else:
        parsed = sa.make_url(url)
        base = str(parsed.query["options"]).split("search_path=")[1]  # the test's own schema
        schema = f"{base}_{kill_at}_{int(inside)}"
        engine = sa.create_engine(parsed.set(query={}))
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        engine.dispose()
        _COPIES.setdefault(url, []).append(schema)
        fresh_url = parsed.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    fresh(fresh_url)
    return fresh_url


@pytest.fixture(autouse=True)
def _drop_copies(db_url: str) -> Any:
    yield
    schemas = _COPIES.pop(db_url, [])
    if schemas:
        parsed = sa.make_url(db_url)
        engine = sa.create_engine(parsed.set(query={}))
        with engine.begin() as conn:
            for schema in schemas:
                conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        engine.dispose()


def test_the_check_finds_what_the_recording_wrapper_beside_a_saver_leaves(sqlite_url: str) -> None:
    """Killed right after the router's own commit, the store outside the saver's transaction holds a mint no checkpoint has."""
    fresh(sqlite_url)
    code, _ = run_child(sqlite_url, "beside", kill_at=2)  # the tools router: mint + route
    assert code == -signal.SIGKILL
    found = disagreements(sqlite_url)
    assert any(p.startswith("minted ") for p in found), found
    assert any("route decisions recorded" in p for p in found), found

