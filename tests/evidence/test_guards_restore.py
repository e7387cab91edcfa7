"""``db guards --restore`` puts the append-only guards back as migrated; ``verify`` says so,
never "downgrade"; ``db downgrade`` below the event table asks for ``--yes`` (SPEC §12)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli
from test_append_only_guards import POSTGRES_ATTACKS, SQLITE_ATTACKS

from symfonic_store import InterruptStore, build_interrupt_marker
from symfonic_store.db.migrate import EVENT_LOG_REVISION, head_revision, known_revisions

_SQLITE_CATALOG = sa.text(
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'symfonic_events' "
    "ORDER BY name"
)
_PG_CATALOG = sa.text(
    "SELECT t.tgname, t.tgenabled, pg_get_triggerdef(t.oid), p.proname, p.prosrc, p.prosecdef, "
    "p.provolatile, pg_get_userbyid(p.proowner) FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_proc p ON p.oid = t.tgfoid "
    "WHERE c.relname = 'symfonic_events' AND n.nspname = current_schema() AND NOT t.tgisinternal "
    "ORDER BY t.tgname"
)

ALL_AT_ONCE: dict[str, Callable[[sa.Connection], None]] = {
    "sqlite": lambda c: [
        c.exec_driver_sql(f"DROP TRIGGER {name}")
        for name in ("symfonic_events_no_update", "symfonic_events_no_delete")
    ] and None,
    "postgresql": lambda c: [
        c.exec_driver_sql(statement)
        for statement in (
            "DROP TRIGGER symfonic_events_no_truncate ON symfonic_events",
            "ALTER TABLE symfonic_events DISABLE TRIGGER symfonic_events_no_update_delete",
            "DROP TRIGGER symfonic_events_tx_id ON symfonic_events",
            "CREATE OR REPLACE FUNCTION symfonic_events_tx_id() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
            "CREATE OR REPLACE FUNCTION symfonic_events_append_only() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$",
        )
    ] and None,
}


def catalog(store: InterruptStore) -> list[tuple[object, ...]]:
    """The event table's triggers (and, on PostgreSQL, their functions) as the catalog has them."""
    query = _SQLITE_CATALOG if store.engine.dialect.name == "sqlite" else _PG_CATALOG
    with store.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


def attacks_for(store: InterruptStore) -> dict[str, Callable[[sa.Connection], None]]:
    backend = store.engine.dialect.name
    chosen = SQLITE_ATTACKS if backend == "sqlite" else POSTGRES_ATTACKS
    return {**{name: apply for name, (apply, _) in chosen.items()}, "all": ALL_AT_ONCE[backend]}


ATTACKS = sorted({*SQLITE_ATTACKS, *POSTGRES_ATTACKS, "all"})


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_taken_guard_is_named_by_verify_and_restored_as_migrated(
    store: InterruptStore, migrated_url: str, attack: str
) -> None:
    """verify names `db guards --restore` (no downgrade); the restore brings back the migrated catalog; verify passes; the guard refuses again."""
    attacks = attacks_for(store)
    if attack not in attacks:
        pytest.skip(f"{attack!r} is an attack on the other backend")
    store.mint("t-1", build_interrupt_marker(name="n", interrupt_id="i-1", payload={"a": 1}))
    migrated = catalog(store)
    with store.engine.begin() as conn:
        attacks[attack](conn)
    assert catalog(store) != migrated

    report = store.verify()
    assert report.guards and all("db guards --restore" in g for g in report.guards), report.guards
    line = assert_clean_error(run_cli("verify", db=migrated_url), 1)
    assert "db guards --restore" in line and "downgrade" not in line
    assert "downgrade" not in str(report)
    check = assert_clean_error(run_cli("db", "guards", db=migrated_url), 1)
    assert "trigger" in check

    restored = run_cli("db", "guards", "--restore", db=migrated_url)
    assert restored.returncode == 0, restored.stderr
    assert "restored the append-only guards" in restored.stdout
    assert "in place" in restored.stdout

    assert catalog(store) == migrated
    assert store.verify().ok and store.verify().guards == []
    assert run_cli("verify", db=migrated_url).returncode == 0
    assert run_cli("db", "guards", db=migrated_url).returncode == 0
    with pytest.raises(sa.exc.DBAPIError), store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE symfonic_events SET actor = 'mallory'")
    with pytest.raises(sa.exc.DBAPIError), store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM symfonic_events")
    assert [e.type for e in store.history("t-1")] == ["interrupt.minted"]
    store.mint("t-2", build_interrupt_marker(name="n", interrupt_id="i-2", payload={}))
    assert store.verify().ok  # appends still work (and on PostgreSQL get their read key)


def test_restore_refuses_a_schema_that_is_not_at_head(store: InterruptStore, migrated_url: str) -> None:
    """Guards of the head revision are not put on an older schema: exit 2, run `db upgrade`."""
    down = run_cli("db", "downgrade", EVENT_LOG_REVISION, db=migrated_url)
    assert down.returncode == 0, down.stderr
    line = assert_clean_error(run_cli("db", "guards", "--restore", db=migrated_url), 2)
    assert "db upgrade" in line


@pytest.mark.parametrize("target", ["base", "-N"])
def test_a_downgrade_that_drops_the_event_table_needs_yes(
    store: InterruptStore, migrated_url: str, target: str
) -> None:
    """Without --yes: exit 2 naming --yes, nothing dropped; with --yes it goes to no schema (`base`, or `-N` with N every revision)."""
    if target == "-N":
        target = f"-{len(known_revisions())}"
    store.mint("t-1", build_interrupt_marker(name="n", interrupt_id="i-1", payload={}))
    refused = run_cli("db", "downgrade", "--", target, db=migrated_url)
    line = assert_clean_error(refused, 2)
    assert "--yes" in line and "event table" in line
    assert [e.type for e in store.history("t-1")] == ["interrupt.minted"]
    current = run_cli("db", "current", db=migrated_url)
    assert f"revision {head_revision()} (head)" in current.stdout

    done = run_cli("db", "downgrade", "--yes", "--", target, db=migrated_url)
    assert done.returncode == 0, done.stderr
    assert "no schema" in done.stdout


def test_a_downgrade_that_keeps_the_event_table_needs_no_yes(store: InterruptStore, migrated_url: str) -> None:
    """Down to the revision that created the event table (or one step) is not asked about."""
    one = run_cli("db", "downgrade", "--", "-1", db=migrated_url)
    assert one.returncode == 0, one.stderr
    first = run_cli("db", "downgrade", EVENT_LOG_REVISION, db=migrated_url)
    assert first.returncode == 0, first.stderr
    assert f"revision {EVENT_LOG_REVISION}," in first.stdout
