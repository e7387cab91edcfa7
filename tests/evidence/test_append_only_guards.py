"""``verify`` reports append-only triggers that are missing, disabled or defanged (SPEC §10).

Played as the table owner on each backend: SQLite triggers dropped, or removed from
``sqlite_master`` through ``PRAGMA writable_schema`` (no DROP statement at all), or
replaced by one that lets the write through; PostgreSQL triggers disabled, set to fire
for replication sessions only, dropped, or their function replaced.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli

from symfonic_store import InterruptStore, build_interrupt_marker


def _sqlite_writable_schema(conn: sa.Connection) -> None:
    conn.exec_driver_sql("PRAGMA writable_schema = ON")
    conn.exec_driver_sql("DELETE FROM sqlite_master WHERE type = 'trigger' AND name = 'symfonic_events_no_delete'")
    conn.exec_driver_sql("PRAGMA writable_schema = OFF")


def _sqlite_defanged(conn: sa.Connection) -> None:
    conn.exec_driver_sql("DROP TRIGGER symfonic_events_no_update")
    conn.exec_driver_sql(
        "CREATE TRIGGER symfonic_events_no_update BEFORE UPDATE ON symfonic_events "
        "BEGIN SELECT 1; END"
    )


SQLITE_ATTACKS: dict[str, tuple[Callable[[sa.Connection], None], str]] = {
    "dropped": (lambda c: c.exec_driver_sql("DROP TRIGGER symfonic_events_no_delete"), "missing"),
    "writable_schema": (_sqlite_writable_schema, "missing"),
    "defanged": (_sqlite_defanged, "replaced"),
}
POSTGRES_ATTACKS: dict[str, tuple[Callable[[sa.Connection], None], str]] = {
    "disabled": (lambda c: c.exec_driver_sql("ALTER TABLE symfonic_events DISABLE TRIGGER ALL"), "disabled"),
    "replica_only": (
        lambda c: c.exec_driver_sql("ALTER TABLE symfonic_events ENABLE REPLICA TRIGGER symfonic_events_no_update_delete"),
        "replication",
    ),
    "dropped": (
        lambda c: c.exec_driver_sql("DROP TRIGGER symfonic_events_no_truncate ON symfonic_events"),
        "missing",
    ),
    "function_replaced": (
        lambda c: c.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION symfonic_events_append_only() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$"
        ),
        "replaced",
    ),
}


@pytest.mark.parametrize("attack", sorted(set(SQLITE_ATTACKS) | set(POSTGRES_ATTACKS)))
def test_verify_reports_each_way_the_append_only_triggers_are_taken_away(
    store: InterruptStore, migrated_url: str, attack: str
) -> None:
    """Each attack leaves every chain intact, yet verify (Python and CLI, exit 1) says what happened to the triggers."""
    attacks = SQLITE_ATTACKS if store.engine.dialect.name == "sqlite" else POSTGRES_ATTACKS
    if attack not in attacks:
        pytest.skip(f"{attack!r} is an attack on the other backend")
    store.mint("t-1", build_interrupt_marker(name="n", interrupt_id="i-1", payload={}))
    assert store.verify().ok and store.verify().guards == []
    apply, word = attacks[attack]
    with store.engine.begin() as conn:
        apply(conn)

    report = store.verify()
    assert report.broken == [] and not report.ok
    assert report.guards and all("trigger" in g for g in report.guards)
    assert any(word in g for g in report.guards), report.guards
    assert word in str(report)
    line = assert_clean_error(run_cli("verify", db=migrated_url), 1)
    assert "trigger" in line and word in line


def test_the_triggers_as_migrated_are_reported_intact(store: InterruptStore) -> None:
    """A fresh store's triggers (and the PostgreSQL function behind them) match what verify expects, so the checks above are not vacuous."""
    store.mint("t-1", build_interrupt_marker(name="n", interrupt_id="i-1", payload={}))
    assert store.verify().guards == []
    with pytest.raises(sa.exc.DBAPIError), store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM symfonic_events")
