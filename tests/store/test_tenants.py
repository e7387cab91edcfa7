"""Tenants (SPEC §15): set at the mint, kept in a column outside the hashed data, and the
Python API's filters (``list_pending(tenant=)``, ``audit(tenant=)``); migration
``0019_tenants`` up and down on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from factories import marker
from graph_rig import config_for
from migration_rig import event_columns, migrate
from native_graphs import Wires, node_graph, two_step_graph
from sqlalchemy.engine import Engine

from symfonic_store import InterruptAlreadyResolvedError, InterruptGateway, InterruptStore
from symfonic_store.services.audit import AUDIT_FIELDS


def test_a_mint_keeps_its_tenant_beside_the_hashed_data(store: InterruptStore) -> None:
    """The tenant is the mint's column: not in its data, the chain verifies, the audit shows it."""
    store.mint("t-a", marker("i-a", amount=1), tenant="acme")
    store.mint("t-b", marker("i-b", amount=2), tenant="globex")
    store.mint("t-n", marker("i-n", amount=3))
    (mint,) = [e for e in store.history("t-a") if e.type == "interrupt.minted"]
    assert "tenant" not in mint.data
    with store.engine.connect() as conn:
        rows = dict(conn.execute(sa.text(
            "SELECT thread_id, tenant FROM symfonic_events WHERE type = 'interrupt.minted'"
        )).all())
    assert rows == {"t-a": "acme", "t-b": "globex", "t-n": None}
    assert store.verify().ok
    assert {r.thread_id: r.tenant for r in store.audit()} == {"t-a": "acme", "t-b": "globex", "t-n": None}
    assert all(r.approvers == () for r in store.audit())


def test_list_pending_and_audit_filter_by_tenant(store: InterruptStore) -> None:
    """tenant= keeps one tenant's; tenants= a set, None among them for the untenanted."""
    store.mint("t-a", marker("i-a"), tenant="acme")
    store.mint("t-b", marker("i-b"), tenant="globex")
    store.mint("t-n", marker("i-n"))
    assert [p["thread_id"] for p in store.list_pending(tenant="acme")] == ["t-a"]
    assert [p["thread_id"] for p in store.list_pending(tenants=[None])] == ["t-n"]
    assert {p["thread_id"] for p in store.list_pending(tenants=["globex", None])} == {"t-b", "t-n"}
    assert store.list_pending(tenants=[]) == []
    assert len(store.list_pending()) == 3
    assert [r.thread_id for r in store.audit(tenant="globex")] == ["t-b"]
    assert [r.thread_id for r in store.audit(tenants=[None])] == ["t-n"]
    assert [r.thread_id for r in store.audit(tenant="acme", tenants=["globex"])] == []


def test_refused_answers_stay_with_their_tenants_records(store: InterruptStore) -> None:
    """audit(tenant=) keeps the refusals of that tenant's interrupts only."""
    store.mint("t-a", marker("i-a"), tenant="acme")
    store.mint("t-b", marker("i-b"), tenant="globex")
    for t, i in (("t-a", "i-a"), ("t-b", "i-b")):
        store.resume(t, i, {"ok": True}, actor="alice")
        with pytest.raises(InterruptAlreadyResolvedError):
            store.resume(t, i, {"ok": True}, actor="bob")
    (record,) = store.audit(tenant="acme")
    assert record.thread_id == "t-a" and [a["actor"] for a in record.attempts] == ["bob"]


def test_the_csv_header_ends_with_tenant_and_approvers() -> None:
    assert AUDIT_FIELDS[-2:] == ("tenant", "approvers")


def test_a_gateway_mints_for_the_configs_tenant_else_its_default(migrated_url: str) -> None:
    """configurable["tenant"] wins; else the gateway's tenant=."""
    with InterruptStore(migrated_url) as store:
        from langgraph.checkpoint.memory import InMemorySaver

        graph = node_graph(InMemorySaver(), Wires())
        gateway = InterruptGateway(graph, store, tenant="acme")
        gateway.invoke({}, config_for("t-default"))
        gateway.invoke({}, config_for("t-config", tenant="globex"))
        tenants = {r.thread_id: r.tenant for r in store.audit()}
        assert tenants == {"t-default": "acme", "t-config": "globex"}
        assert [p["thread_id"] for p in store.list_pending(tenant="globex")] == ["t-config"]


# --- migration 0019_tenants -------------------------------------------------------


def test_0019_upgrades_existing_interrupts_without_a_tenant(engine: Engine, db_url: str) -> None:
    """Interrupts minted before 0019 have no tenant; the store still appends on both paths."""
    migrate(engine, "up", "0018_audit_refusals")
    with engine.connect() as conn, conn.begin():
        conn.execute(sa.text(
            "INSERT INTO symfonic_threads (thread_id, version, last_hash) VALUES ('t-old', 0, :h)"
        ), {"h": "0" * 64})
    assert "tenant" not in event_columns(engine)
    migrate(engine, "up", "head")
    assert "tenant" in event_columns(engine)
    with InterruptStore(db_url) as store:
        store.mint("t-new", marker("i-new"), tenant="acme")
        store.mint("t-none", marker("i-none"))
        assert {r.thread_id: r.tenant for r in store.audit()} == {"t-new": "acme", "t-none": None}


def test_0019_downgrade_refuses_while_tenants_are_recorded(engine: Engine, db_url: str) -> None:
    """Dropping recorded tenants would show them to everyone: refused, nothing changed;
    without any, the column goes and the store of 0018 appends as before."""
    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        store.mint("t-n", marker("i-n"))
        store.mint("t-a", marker("i-a"), tenant="acme")
    with pytest.raises(RuntimeError, match="1 interrupt\\(s\\) were minted with a tenant"):
        migrate(engine, "down", "0018_audit_refusals")
    assert "tenant" in event_columns(engine)


def test_0019_downgrades_without_recorded_tenants(engine: Engine, db_url: str) -> None:
    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        store.mint("t-n", marker("i-n"))
    migrate(engine, "down", "0018_audit_refusals")
    assert "tenant" not in event_columns(engine)
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            body = conn.execute(sa.text(
                "SELECT prosrc FROM pg_proc WHERE proname = 'symfonic_append'"
                " AND pronamespace = current_schema()::regnamespace"
            )).scalar_one()
        assert "tenant" not in body
    migrate(engine, "up", "head")
    with InterruptStore(db_url) as store:
        store.mint("t-a", marker("i-a"), tenant="acme")
        assert {r.thread_id: r.tenant for r in store.audit()} == {"t-n": None, "t-a": "acme"}
        assert store.verify().ok


# --- the notifier's tenants filter (SPEC §14, §15) -----------------------------------


def test_a_subscription_limited_to_tenants_gets_only_their_interrupts(
    store: InterruptStore, tmp_path: Path
) -> None:
    """Mints and answers of acme's interrupt go to the acme subscription, globex's and the
    untenanted one's do not; "*" gets every tenant's."""
    from notify_rig import hook_config, http_receiver

    from symfonic_store.notify import Notifier

    for thread_id, tenant in (("t-acme", "acme"), ("t-globex", "globex"), ("t-none", None)):
        store.mint(thread_id, marker(f"i-{thread_id}"), tenant=tenant)
        store.resume(thread_id, f"i-{thread_id}", {"ok": True}, actor="bob")
    with http_receiver() as receiver:
        config = hook_config(tmp_path, receiver.url)
        base = config["subscriptions"][0]
        config["subscriptions"] = [
            {**base, "name": "acme", "tenants": ["acme"]},
            {**base, "name": "all", "tenants": ["*"]},
        ]
        with Notifier(store, config, from_start=True) as n:
            report = n.run_once()
        sent = [(r.headers["webhook-id"], r.json()["data"]["thread_id"]) for r in receiver.requests]
    assert report.subscriptions["acme"].delivered == 2
    assert report.subscriptions["all"].delivered == 6
    by_thread = [t for _, t in sent]
    assert by_thread.count("t-acme") == 4 and by_thread.count("t-globex") == 2


def test_cli_pending_and_audit_filter_by_tenant(store: InterruptStore, migrated_url: str) -> None:
    """`pending --tenant` and `audit --tenant`; without it the CLI sees every tenant."""
    from cli_helpers import run_json

    store.mint("t-a", marker("i-a"), tenant="acme")
    store.mint("t-n", marker("i-n"))
    assert [p["thread_id"] for p in run_json("pending", "--tenant", "acme", "--format", "json", db=migrated_url)] == ["t-a"]
    assert {p["thread_id"] for p in run_json("pending", "--format", "json", db=migrated_url)} == {"t-a", "t-n"}
    records = run_json("audit", "--tenant", "acme", "--format", "json", db=migrated_url)
    assert [(r["thread_id"], r["tenant"], r["approvers"]) for r in records] == [("t-a", "acme", [])]


# --- where a mint's tenant comes from (SPEC §15) -------------------------------------


def _seed_graph(store: InterruptStore, *, node_tenant: str | None, router_tenant: str | None) -> object:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    from symfonic_store import create_interrupt_node, make_interrupt_router
    from symfonic_store.langgraph import InterruptState

    def raise_marker(state: dict[str, object]) -> dict[str, object]:
        return marker(payload={"amount": 5})

    builder = StateGraph(InterruptState)
    builder.add_node("raise", raise_marker)
    builder.add_node("interrupt", create_interrupt_node(store, tenant=node_tenant))
    builder.add_edge(START, "raise")
    builder.add_conditional_edges(
        "raise", make_interrupt_router(store, tenant=router_tenant),
        {"interrupt": "interrupt", "continue": END},
    )
    builder.add_edge("interrupt", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize(("configured", "default", "expected"), [
    (None, "acme", "acme"),          # the node's and router's tenant=
    ("globex", "acme", "globex"),    # configurable["tenant"] wins
    (None, None, None),
])
def test_the_seed_node_and_router_mint_for_the_configs_tenant_else_their_default(
    store: InterruptStore, configured: str | None, default: str | None, expected: str | None
) -> None:
    graph = _seed_graph(store, node_tenant=default, router_tenant=default)
    extra = {} if configured is None else {"tenant": configured}
    graph.invoke({}, config_for("t-seed", **extra))  # type: ignore[attr-defined]
    (record,) = store.audit()
    assert record.tenant == expected and record.outcome == "pending"


def test_the_agent_servers_user_tenant_is_the_last_default() -> None:
    """tenant_of: config, then the integration's default, then the authenticated user's."""
    from symfonic_store.langgraph.actor import tenant_of

    served = {"langgraph_auth_user_id": "ann", "langgraph_auth_user": {"identity": "ann", "tenant": "acme"}}
    assert tenant_of({"configurable": served}) == "acme"
    assert tenant_of({"configurable": served}, "globex") == "globex"
    assert tenant_of({"configurable": {**served, "tenant": "initech"}}, "globex") == "initech"
    studio = {"langgraph_auth_user_id": "langgraph-studio-user",
              "langgraph_auth_user": {"tenant": "acme"}}
    assert tenant_of({"configurable": studio}) is None  # never authenticated: no tenant from it

    class User:
        identity = "gus"
        tenant = "globex"

        def __getitem__(self, key: str) -> object:
            raise KeyError(key)

    assert tenant_of({"configurable": {"langgraph_auth_user_id": "gus", "langgraph_auth_user": User()}}) == "globex"


def test_the_stores_checkpointer_mints_for_the_configs_tenant(store: InterruptStore) -> None:
    """A native interrupt recorded inside the graph's step (store.checkpointer()) keeps
    configurable["tenant"]; with a gateway over it, the gateway's default otherwise."""
    graph = node_graph(store.checkpointer(), Wires())
    graph.invoke({}, config_for("t-step", tenant="acme"))
    InterruptGateway(graph, store, tenant="globex").invoke({}, config_for("t-gate"))
    assert {r.thread_id: r.tenant for r in store.audit()} == {"t-step": "acme", "t-gate": "globex"}



@pytest.mark.parametrize("saver", ["memory", "store"])
def test_an_interrupt_minted_after_an_answer_keeps_the_answered_ones_tenant(
    store: InterruptStore, saver: str
) -> None:
    """The gateway's answer runs the graph on to its next interrupt: that one belongs to
    the answered one's tenant, not to the gateway's default; an answer's config naming a
    tenant still wins."""
    from langgraph.checkpoint.memory import InMemorySaver

    graph = two_step_graph(store.checkpointer() if saver == "store" else InMemorySaver())
    gate = InterruptGateway(graph, store, tenant="dflt")
    cases = (("t-acme", "acme", None), ("t-plain", None, None), ("t-moved", "acme", "initech"))
    for thread, minted_for, answered_for in cases:
        gate.invoke({}, config_for(thread, **({} if minted_for is None else {"tenant": minted_for})))
        (first,) = [p for p in store.list_pending() if p["thread_id"] == thread]
        answer_config = None if answered_for is None else config_for(thread, tenant=answered_for)
        gate.answer(thread, first["interrupt_id"], "yes", actor="ann", config=answer_config)
    assert {(r.thread_id, r.name): r.tenant for r in store.audit()} == {
        ("t-acme", "first"): "acme", ("t-acme", "second"): "acme",
        ("t-plain", "first"): "dflt", ("t-plain", "second"): "dflt",
        ("t-moved", "first"): "acme", ("t-moved", "second"): "initech",
    }


def test_an_answers_waiting_list_shows_only_the_principals_tenants_interrupts(store: InterruptStore) -> None:
    """After a gateway answer the 200 body lists what the thread waits on next: another
    tenant's seed marker on the same thread is not among it (SPEC §15)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from symfonic_store.server.approvals import Approvals, interrupt_digest
    from symfonic_store.server.principal import Principal

    graph = two_step_graph(InMemorySaver())
    gate = InterruptGateway(graph, store)
    gate.invoke({}, config_for("t-shared", tenant="acme"))
    (first,) = store.open_interrupts("t-shared")
    store.mint("t-shared", marker("i-globex", name="globex_merger"), tenant="globex")
    approvals = Approvals(store, gateways={gate.name: gate})
    record = store.interrupt_record("t-shared", first["interrupt_id"])
    assert record is not None
    digest = interrupt_digest("t-shared", first["interrupt_id"], record["payload"])
    ann = Principal("ann", tenants=frozenset({"acme"}))
    result = approvals.answer(ann, "t-shared", first["interrupt_id"], "yes", digest)
    assert result.status == 200, result.body
    waiting = result.body["waiting"]
    assert [w["name"] for w in waiting] == ["second"]
    everyone = {o["interrupt_id"] for o in store.open_interrupts("t-shared")}
    assert "i-globex" in everyone and "i-globex" not in {w["interrupt_id"] for w in waiting}
