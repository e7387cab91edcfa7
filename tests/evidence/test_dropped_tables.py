"""Tables of the store's schema dropped behind its back (SPEC §12, as amended in wave 4).

The schema stays "at head" when a table is dropped, so ``db upgrade`` recreates nothing:
``checkpoint --chain`` and ``verify --chain`` work from the log and the folder alone,
``verify`` names each missing table, and ``db guards --restore`` recreates them empty.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from attacker import reforge_answer
from cli_helpers import assert_clean_error, run_cli

from symfonic_store import InterruptStore, build_interrupt_marker
from symfonic_store.db import schema
from symfonic_store.services.evidence import generate_key, parse_checkpoint

CHECKPOINT_TABLES = ("symfonic_checkpoints", "symfonic_checkpoint_heads", "symfonic_checkpoint_buckets")
IID = "i-refund000001"


def refund(store: InterruptStore, thread_id: str, *, actor: str, approved: bool) -> None:
    """A refund decided by ``actor``."""
    store.record_route(thread_id, "continue", run_id="r1")
    store.mint(thread_id, build_interrupt_marker(
        name="approval_required", interrupt_id=IID, payload={"amount": 420}, run_id="r1"))
    store.resume(thread_id, IID, {"approved": approved}, actor=actor)


def drop(store: InterruptStore, *names: str) -> None:
    with store.engine.begin() as conn:
        for name in names:
            conn.exec_driver_sql(f"DROP TABLE {name}")


def tables(store: InterruptStore) -> set[str]:
    with store.engine.connect() as conn:
        return set(sa.inspect(conn).get_table_names())


def chain_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("checkpoint-*.json"))


@pytest.fixture
def key(tmp_path: Path) -> Path:
    private, _ = generate_key(tmp_path / "signing")
    return private


@pytest.fixture
def folder(store: InterruptStore, key: Path, migrated_url: str, tmp_path: Path) -> Path:
    """Two refunds (bob rejected ``t-bob``) and a chain folder holding one checkpoint of them."""
    refund(store, "t-alice", actor="alice", approved=True)
    refund(store, "t-bob", actor="bob", approved=False)
    made = tmp_path / "chain"
    made.mkdir()
    taken = run_cli("checkpoint", "--key", str(key), "--chain", str(made), db=migrated_url)
    assert taken.returncode == 0, taken.stderr
    return made


def test_chain_commands_work_from_the_log_and_the_folder_with_the_checkpoint_tables_dropped(
    store: InterruptStore, key: Path, folder: Path, migrated_url: str
) -> None:
    """With every checkpoint table dropped, checkpoint --chain proves the log against the folder's newest file and writes the next one linked to it (exit 0), verify --chain passes (the missing tables said on stderr, --thread too), a plain checkpoint says to run db guards --restore (exit 2)."""
    (first,) = chain_files(folder)
    drop(store, *CHECKPOINT_TABLES)
    store.record_route("t-alice", "finish", run_id="r2")
    pub = f"{key}.pub"

    taken = run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url)
    assert taken.returncode == 0, taken.stderr
    kept, second = chain_files(folder)
    assert kept == first
    document = parse_checkpoint(second.read_text()).document
    assert document["previous"]["id"] == parse_checkpoint(first.read_text()).id
    assert document["threads"] == 2 and len(document["heads"]) == 2 and document["full"] is False
    assert not tables(store) & set(CHECKPOINT_TABLES)  # nothing recreated behind the operator's back

    for extra in ((), ("--thread", "t-alice")):
        checked = run_cli("verify", "--chain", str(folder), "--public-key", pub, *extra, db=migrated_url)
        assert checked.returncode == 0, checked.stderr
        assert "2 checkpoint file(s), linked" in checked.stdout
        assert all(name in checked.stderr for name in CHECKPOINT_TABLES)

    plain = assert_clean_error(run_cli("checkpoint", "--key", str(key), "--out", str(folder.parent), db=migrated_url), 2)
    assert "db guards --restore" in plain and "symfonic_checkpoints" in plain and "--chain" in plain
    assert chain_files(folder) == [first, second]


def test_a_forgery_after_the_checkpoint_tables_were_dropped_is_named_by_the_chain(
    store: InterruptStore, key: Path, folder: Path, migrated_url: str
) -> None:
    """Checkpoint tables dropped and bob's rejection re-forged as alice's approval: checkpoint --chain refuses naming t-bob (exit 1, nothing written), verify --chain fails naming t-bob."""
    (kept,) = chain_files(folder)
    first_bob = store.history("t-bob")[0]
    drop(store, *CHECKPOINT_TABLES)
    reforge_answer(store, "t-bob", actor="alice", response={"approved": True}, decision="approve")

    refused = run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url)
    line = assert_clean_error(refused, 1)
    assert "thread 't-bob'" in line and "extends the newest checkpoint" in line
    assert chain_files(folder) == [kept]
    broken = run_cli("verify", "--chain", str(folder), "--public-key", f"{key}.pub", db=migrated_url)
    assert f"thread 't-bob' at position {first_bob.position}" in assert_clean_error(broken, 1)


def test_verify_names_each_missing_table_and_guards_restore_recreates_them_empty(
    store: InterruptStore, key: Path, folder: Path, migrated_url: str
) -> None:
    """verify exits 1 naming each dropped table; db upgrade is at head yet names them; db guards --restore recreates them empty as the schema declares them, after which verify passes and the next checkpoint --chain records into them again."""
    dropped = (*CHECKPOINT_TABLES, "symfonic_wakeups", "symfonic_notify_cursors")
    drop(store, *dropped)

    failed = assert_clean_error(run_cli("verify", db=migrated_url), 1)
    assert all(name in failed for name in dropped) and "db guards --restore" in failed
    upgrade = run_cli("db", "upgrade", db=migrated_url)
    assert upgrade.returncode == 0 and "(head)" in upgrade.stdout
    assert all(name in upgrade.stdout for name in dropped) and "db guards --restore" in upgrade.stdout
    assert not tables(store) & set(dropped)  # the migrations recreate nothing
    assert all(name in assert_clean_error(run_cli("db", "guards", db=migrated_url), 1) for name in dropped)

    restored = run_cli("db", "guards", "--restore", db=migrated_url)
    assert restored.returncode == 0, restored.stderr
    assert all(name in restored.stdout for name in dropped)
    assert set(dropped) <= tables(store)
    with store.engine.connect() as conn:
        inspector = sa.inspect(conn)
        for name in dropped:
            declared = schema.metadata.tables[name]
            assert [c["name"] for c in inspector.get_columns(name)] == [c.name for c in declared.columns]
            indexes = {i["name"] for i in inspector.get_indexes(name) if not i.get("duplicates_constraint")}
            assert indexes == {str(i.name) for i in declared.indexes}
            assert conn.execute(sa.select(sa.func.count()).select_from(declared)).scalar_one() == 0
    ok = run_cli("verify", db=migrated_url)
    assert ok.returncode == 0, ok.stderr

    assert run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url).returncode == 0
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.checkpoints)).scalar_one() == 1


def test_guards_restore_does_not_pass_an_empty_table_off_as_the_event_log(
    store: InterruptStore, migrated_url: str
) -> None:
    """With the event table itself dropped, verify names it and db guards --restore refuses (exit 1, nothing created): an empty table would pass for a log with nothing in it."""
    store.record_route("t-1", "continue", run_id="r1")
    drop(store, "symfonic_checkpoints")
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE symfonic_events")
    failed = assert_clean_error(run_cli("verify", db=migrated_url), 1)
    assert "symfonic_events" in failed
    refused = assert_clean_error(run_cli("db", "guards", "--restore", db=migrated_url), 1)
    assert "symfonic_events" in refused and "backup" in refused
    assert not {"symfonic_events", "symfonic_checkpoints"} & tables(store)
