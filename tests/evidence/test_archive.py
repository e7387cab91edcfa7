"""Retention that keeps the evidence: archive, verify-archive, and what still verifies (SPEC §10).

Threads are written at frozen times: ``t-old-*`` finished in January, ``t-late`` started
then but had an event in March, ``t-open`` still waits for an answer. ``archive --before
February`` must take exactly the old finished ones, into a file that verifies offline,
and leave every check (``verify``, the rebuild, older and newer checkpoints) passing.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.util import CommandError
from attacker import EVENTS, THREADS, delete_thread, disable_triggers
from cli_helpers import assert_clean_error, run_cli
from freezegun import freeze_time
from langgraph.types import Command  # noqa: F401 - before any frozen clock: pydantic v1 breaks on a fake date

from symfonic_store import (
    ConcurrencyConflictError,
    EvidenceError,
    InterruptStore,
    InvalidInputError,
    build_interrupt_marker,
)
from symfonic_store.db.migrate import downgrade
from symfonic_store.services import archive as archiving
from symfonic_store.services.evidence import generate_key, keys_by_id

JANUARY = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
FEBRUARY = datetime(2026, 2, 1, tzinfo=UTC)
MARCH = datetime(2026, 3, 5, 9, 0, tzinfo=UTC)


def decided(store: InterruptStore, thread_id: str, interrupt_id: str = "i-1", *, actor: str = "alice") -> None:
    store.record_route(thread_id, "continue", run_id="r1")
    store.mint(thread_id, build_interrupt_marker(name="approval_required", interrupt_id=interrupt_id,
                                                 payload={"amount": 420}, run_id="r1"))
    store.resume(thread_id, interrupt_id, {"approved": True}, actor=actor)


@pytest.fixture
def key(tmp_path: Path) -> Path:
    return generate_key(tmp_path / "signing")[0]


@pytest.fixture
def pub(key: Path) -> Path:
    return key.with_name(key.name + ".pub")


@pytest.fixture
def history(store: InterruptStore) -> Iterator[InterruptStore]:
    """Two old finished threads, one finished late, one still open; the clock in March."""
    with freeze_time(JANUARY) as clock:
        decided(store, "t-old-1")
        decided(store, "t-old-2", actor="bob")
        decided(store, "t-late")
        store.mint("t-open", build_interrupt_marker(name="approval_required", interrupt_id="i-9", payload={}))
        clock.move_to(MARCH)
        store.record_route("t-late", "finish", run_id="r1")
        yield store


def count(store: InterruptStore, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())  # noqa: S608


def test_archive_moves_only_whole_finished_threads_and_everything_still_verifies(
    history: InterruptStore, key: Path, pub: Path, tmp_path: Path
) -> None:
    """The two old finished threads go into a signed file that verifies offline; their events leave the table, their heads stay marked; verify and rebuild still pass."""
    store = history
    heads = {t: store.history(t)[-1] for t in ("t-old-1", "t-old-2")}
    out = tmp_path / "2026-01.jsonl"
    result = store.archive(FEBRUARY, out, key=key)
    assert result.threads == ["t-old-1", "t-old-2"] and result.events == result.removed == 6
    assert result.signed

    check = archiving.verify_archive(out, keys_by_id([pub]))
    assert check.ok and check.events == 6 and check.signed_by is not None, str(check)
    lines = out.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "symfonic-store/archive/1"
    assert [json.loads(line)["thread_id"] for line in lines[1:-1]] == ["t-old-1"] * 3 + ["t-old-2"] * 3
    assert "manifest" in json.loads(lines[-1])

    assert store.history("t-old-1") == [] and len(store.history("t-late")) == 4
    assert count(store, "symfonic_events") == 4 + 1
    with store.engine.connect() as conn:
        rows = dict(conn.execute(sa.select(THREADS.c.thread_id, THREADS.c.archived_version)).all())
    assert rows == {"t-old-1": 3, "t-old-2": 3, "t-late": None, "t-open": None}
    assert store.verify().ok, str(store.verify())
    assert store.rebuild_projection() == 5
    assert store.verify().ok
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(THREADS).where(THREADS.c.thread_id == "t-old-1")).one()
    assert (row.version, row.last_hash, row.archived_version) == (3, heads["t-old-1"].hash, 3)

    again = store.archive(FEBRUARY, tmp_path / "again.jsonl", key=key)
    assert again.threads == [] and not (tmp_path / "again.jsonl").exists()


def test_a_later_event_on_an_archived_thread_chains_on_from_its_archived_head(
    history: InterruptStore, key: Path, pub: Path, tmp_path: Path
) -> None:
    """A new event on t-old-1 gets version 4 chained on the archived hash; verify, the rebuild and a second archive of the thread all hold."""
    store = history
    archived_head = store.history("t-old-1")[-1]
    store.archive(FEBRUARY, tmp_path / "a.jsonl", key=key)
    with freeze_time(MARCH):
        decided(store, "t-old-1", "i-2")
    later = store.history("t-old-1")
    assert [e.version for e in later] == [4, 5, 6]
    assert store.verify().ok
    assert store.verify("t-old-1").ok
    assert store.rebuild_projection() == 8
    assert store.verify().ok and store.pending("t-old-1") is None
    with freeze_time(MARCH + timedelta(days=30)):
        second = store.archive(MARCH + timedelta(days=1), tmp_path / "b.jsonl.gz", key=key)
    assert second.threads == ["t-late", "t-old-1"]
    manifest = archiving.read_archive(tmp_path / "b.jsonl.gz").heads["t-old-1"]
    assert (manifest.base_version, manifest.base_hash, manifest.version) == (3, archived_head.hash, 6)
    assert archiving.verify_archive(tmp_path / "b.jsonl.gz", keys_by_id([pub])).ok
    with gzip.open(tmp_path / "b.jsonl.gz", "rt") as handle:
        assert len(handle.readlines()) == 1 + 4 + 3 + 1
    assert store.verify().ok


def test_checkpoints_keep_passing_across_archives(
    history: InterruptStore, key: Path, pub: Path, tmp_path: Path
) -> None:
    """A checkpoint taken before the archive fails without it (naming the archived threads) and passes with it; one taken after passes alone."""
    store = history
    before = store.checkpoint(key)
    out = tmp_path / "a.jsonl"
    store.archive(FEBRUARY, out, key=key)
    missing = store.verify_checkpoint(before, public_keys=[pub])
    assert [p.thread_id for p in missing.problems] == ["t-old-1", "t-old-2"]
    assert all("--archive" in p.problem for p in missing.problems)
    assert store.verify_checkpoint(before, public_keys=[pub], archives=[out]).ok

    after = store.checkpoint(key)
    assert {h[0] for h in after.document["heads"]} == {"t-old-1", "t-old-2"}
    assert store.verify_checkpoint(after, public_keys=[pub]).ok
    with freeze_time(MARCH):
        decided(store, "t-old-1", "i-2")
    latest = store.checkpoint(key)
    for cp in (after, latest):
        assert store.verify_checkpoint(cp, public_keys=[pub]).ok
    assert store.verify_checkpoint(before, public_keys=[pub], archives=[out]).ok
    full = store.checkpoint(key, full=True)
    assert full.root == latest.root  # the incremental heads are the ones a full pass computes


def test_a_thread_deleted_and_passed_off_as_archived_is_caught(
    history: InterruptStore, key: Path, pub: Path, tmp_path: Path
) -> None:
    """The attacker deletes t-late and forges the archive marks for it: the earlier checkpoint names the thread, and a forged archive file does not help."""
    store = history
    cp = store.checkpoint(key)
    head = store.history("t-late")[-1]
    delete_thread(store, "t-late")
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO symfonic_archives (id, root, before, created_at, threads, events, manifest) "
            "VALUES (99, 'x', '2026-03-01', '2026-03-01', 1, 4, '{}')"
        )
        conn.execute(sa.text(
            "INSERT INTO symfonic_archived_threads (thread_id, version, archive_id, first_version, position, last_hash) "
            "VALUES ('t-late', 4, 99, 1, :p, :h)"), {"p": head.position, "h": head.hash})
        conn.execute(sa.text(
            "INSERT INTO symfonic_threads (thread_id, version, last_hash, archived_version) VALUES ('t-late', 4, :h, 4)"),
            {"h": head.hash})
    assert store.verify().broken == []  # the database's own records agree with each other
    report = store.verify_checkpoint(cp, public_keys=[pub])
    assert [p.thread_id for p in report.problems] == ["t-late"]

    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join([
        json.dumps({"format": "symfonic-store/archive/1"}),
        json.dumps({"manifest": {"threads": [["t-late", 0, 0, "0" * 64, 4, head.position, head.hash, None]],
                                 "events": 0, "content": "0" * 64}, "signature": None}),
    ]) + "\n")
    assert not archiving.verify_archive(forged).ok
    assert not store.verify_checkpoint(cp, public_keys=[pub], archives=[forged]).ok


def test_verify_archive_refuses_an_edited_file_another_key_and_an_unsigned_manifest(
    history: InterruptStore, key: Path, pub: Path, tmp_path: Path, migrated_url: str
) -> None:
    """verify-archive (CLI, exit 1) names the edited line's thread, a manifest signed by another key, and an unsigned one when a key is required."""
    store = history
    out = tmp_path / "a.jsonl"
    store.archive(FEBRUARY, out, key=key)
    ok = run_cli("verify-archive", str(out), "--public-key", str(pub))
    assert ok.returncode == 0, ok.stderr
    assert "6 event(s) of 2 thread(s)" in ok.stdout

    edited = tmp_path / "edited.jsonl"
    edited.write_text(out.read_text().replace('"actor":"bob"', '"actor":"alice"'))
    line = assert_clean_error(run_cli("verify-archive", str(edited), "--public-key", str(pub)), 1)
    assert "t-old-2" in line

    _, other = generate_key(tmp_path / "other")
    assert "not one of the given public keys" in assert_clean_error(
        run_cli("verify-archive", str(out), "--public-key", str(other)), 1
    )
    with freeze_time(MARCH + timedelta(days=30)):
        unsigned = tmp_path / "unsigned.jsonl"
        assert run_cli("archive", "--before", "2026-03-06", "--out", str(unsigned), db=migrated_url).returncode == 0
    assert archiving.verify_archive(unsigned).ok
    assert "not signed" in assert_clean_error(
        run_cli("verify-archive", str(unsigned), "--public-key", str(pub)), 1
    )
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("\n".join(out.read_text().splitlines()[:-1]) + "\n")
    assert assert_clean_error(run_cli("verify-archive", str(truncated)), 1)


def test_nothing_is_removed_when_a_thread_changes_while_it_is_archived(
    history: InterruptStore, key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event appended to an archived thread between the file and the removal: the removal refuses, nothing leaves the table, the file is gone."""
    store = history
    real = archiving.verify_archive

    def verify_then_append(*args: object, **kw: object) -> archiving.ArchiveCheck:
        checked = real(*args, **kw)  # type: ignore[arg-type]
        store.record_route("t-old-2", "finish", run_id="r1")
        return checked

    monkeypatch.setattr(archiving, "verify_archive", verify_then_append)
    out = tmp_path / "a.jsonl"
    before = count(store, "symfonic_events")
    with pytest.raises(ConcurrencyConflictError, match="t-old-2"):
        store.archive(FEBRUARY, out, key=key)
    assert count(store, "symfonic_events") == before + 1
    assert count(store, "symfonic_archives") == 0 and not out.exists()


def test_an_archive_never_overwrites_and_refuses_a_broken_chain(
    history: InterruptStore, key: Path, tmp_path: Path, migrated_url: str
) -> None:
    """An existing --out is refused (exit 2); a thread whose chain is broken stops the archive before anything is removed."""
    store = history
    taken = tmp_path / "taken.jsonl"
    taken.write_text("mine")
    assert "never overwritten" in assert_clean_error(
        run_cli("archive", "--before", "2026-02-01", "--out", str(taken), db=migrated_url), 2
    )
    assert taken.read_text() == "mine"
    with pytest.raises(InvalidInputError):
        store.archive(None, tmp_path / "x.jsonl")  # type: ignore[arg-type]

    disable_triggers(store)
    target = store.history("t-old-2")[1]
    with store.engine.begin() as conn:
        conn.execute(sa.update(EVENTS).where(EVENTS.c.position == target.position).values(actor="mallory"))
    with pytest.raises(EvidenceError, match="t-old-2"):
        store.archive(FEBRUARY, tmp_path / "b.jsonl")
    assert not (tmp_path / "b.jsonl").exists()
    assert len(store.history("t-old-1")) == 3


def test_the_append_only_triggers_stay_in_force_after_an_archive(
    history: InterruptStore, tmp_path: Path
) -> None:
    """After archiving, UPDATE and DELETE on the events are still refused and verify reports no guard problem."""
    store = history
    store.archive(FEBRUARY, tmp_path / "a.jsonl")
    assert store.verify().guards == []
    for statement in ("DELETE FROM symfonic_events", "UPDATE symfonic_events SET actor = 'x'"):
        with pytest.raises(sa.exc.DBAPIError), store.engine.begin() as conn:
            conn.exec_driver_sql(statement)


def test_downgrading_past_the_archive_migration_refuses_while_archived_heads_exist(
    history: InterruptStore, tmp_path: Path
) -> None:
    """db downgrade below 0009_archive says why it refuses and changes nothing; without archived heads it goes down and up again."""
    store = history
    store.archive(FEBRUARY, tmp_path / "a.jsonl")
    # On PostgreSQL the archived events' read keys refuse first (0012), on SQLite (which
    # keeps none: its readers read by position) the archived heads (0009).
    first = "archived event" if store.engine.dialect.name == "postgresql" else "archived thread head"
    with pytest.raises(CommandError, match=first):
        with store.engine.connect() as conn, conn.begin():
            downgrade(conn, "0003_native_interrupts")
    assert store.verify().ok


def test_archive_on_the_command_line(history: InterruptStore, key: Path, migrated_url: str, tmp_path: Path) -> None:
    """archive --before --out --key prints what it moved; the .gz archive is gzip."""
    out = tmp_path / "a.jsonl.gz"
    done = run_cli("archive", "--before", "2026-02-01T00:00:00", "--out", str(out), "--key", str(key), db=migrated_url)
    assert done.returncode == 0, done.stderr
    assert "archived 2 thread(s), 6 event(s)" in done.stdout
    with gzip.open(out, "rt") as handle:
        assert len(handle.readlines()) == 8
    assert "--before" in assert_clean_error(run_cli("archive", "--out", str(tmp_path / "x"), db=migrated_url), 2)


@pytest.mark.postgres
def test_on_postgres_only_the_archive_function_removes_events_for_the_application_role(
    postgres_schema_url: str, tmp_path: Path
) -> None:
    """The application's role (not the owner, no DELETE) cannot delete events, even with the archive's setting on, yet archives through symfonic_archive_remove; the owner's direct DELETE is still refused by the trigger."""
    import uuid

    owner = InterruptStore(postgres_schema_url)
    owner.setup()
    with freeze_time(JANUARY):
        decided(owner, "t-1")
        decided(owner, "t-2")
    schema = sa.make_url(postgres_schema_url).query["options"].split("=", 1)[1]
    role = f"app_{uuid.uuid4().hex[:8]}"
    with owner.engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" NOLOGIN')
    try:
        _archive_as_a_role_that_is_not_the_owner(owner, postgres_schema_url, schema, role, tmp_path)
    finally:
        with owner.engine.begin() as conn:  # roles are the cluster's: never leave one behind
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')
        owner.close()


def _archive_as_a_role_that_is_not_the_owner(
    owner: InterruptStore, url: str, schema: str, role: str, tmp_path: Path
) -> None:
    with owner.engine.begin() as conn:
        conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        conn.exec_driver_sql(f'GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        conn.exec_driver_sql(
            f'GRANT UPDATE, DELETE ON symfonic_threads, symfonic_open_interrupts, symfonic_claims, '
            f'symfonic_wakeups, symfonic_checkpoint_heads, symfonic_checkpoint_buckets, '
            f'symfonic_open_counts, symfonic_open_count_deltas, symfonic_metric_counts, '
            f'symfonic_metric_fold, symfonic_audit_rows TO "{role}"'
        )
        conn.exec_driver_sql(f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"')
        conn.exec_driver_sql(f'GRANT EXECUTE ON FUNCTION symfonic_archive_remove(jsonb) TO "{role}"')
    app_engine = sa.create_engine(url)

    @sa.event.listens_for(app_engine, "connect")
    def as_app(dbapi_connection: object, _record: object) -> None:
        cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
        cursor.execute(f'SET ROLE "{role}"')
        cursor.close()

    app = InterruptStore(app_engine)
    try:
        with pytest.raises(sa.exc.ProgrammingError) as denied, app.engine.begin() as conn:
            conn.exec_driver_sql("SELECT set_config('symfonic.archive_removal', 'on', true)")
            conn.exec_driver_sql("DELETE FROM symfonic_events WHERE thread_id = 't-1'")
        assert denied.value.orig.sqlstate == "42501"  # type: ignore[union-attr]
        with pytest.raises(sa.exc.DBAPIError), app.engine.begin() as conn:
            conn.exec_driver_sql(
                "SELECT symfonic_archive_remove('[{\"thread_id\": \"t-1\", \"version\": 3, \"last_hash\": \"x\"}]')"
            )  # not recorded as archived: the function refuses
        result = app.archive(FEBRUARY, tmp_path / "a.jsonl")
        assert result.removed == 6 and app.verify().ok
        app.record_route("t-1", "continue", run_id="r2")  # and it still appends, chaining on
        assert app.verify("t-1").ok
        # A mint and its answer: the triggers that keep the audit's rows and the open
        # counts write as the application's role.
        app.mint("t-app", {"name": "pay", "interrupt_id": "i-app"})
        app.resume("t-app", "i-app", {"approved": True}, actor="alice")
        (record,) = app.audit(thread_id="t-app")
        assert (record.outcome, record.actor) == ("resumed", "alice")
    finally:
        app.close()
        app_engine.dispose()
    decided(owner, "t-3")
    with pytest.raises(sa.exc.DBAPIError) as refused, owner.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM symfonic_events WHERE thread_id = 't-3'")
    assert refused.value.orig.sqlstate == "23001"  # type: ignore[union-attr]


def test_an_archived_head_removed_from_the_projection_or_refilled_below_it_is_caught(
    history: InterruptStore, key: Path, pub: Path, tmp_path: Path
) -> None:
    """Deleting an archived thread's projection row is reported by verify; events put back into the table at archived versions are named by a checkpoint taken after the archive."""
    store = history
    store.archive(FEBRUARY, tmp_path / "a.jsonl")
    after = store.checkpoint(key)
    with store.engine.begin() as conn:
        conn.execute(sa.delete(THREADS).where(THREADS.c.thread_id == "t-old-1"))
    problems = {b.thread_id: b for b in store.verify().broken}
    assert set(problems) == {"t-old-1"} and "no projection row" in problems["t-old-1"].problem

    # Put the January events back (at their old positions) as if never archived.
    for line in (tmp_path / "a.jsonl").read_text().splitlines()[1:4]:
        event = archiving.event_from_dict(json.loads(line))
        with store.engine.begin() as conn:
            conn.execute(sa.insert(EVENTS).values(
                position=event.position, thread_id=event.thread_id, version=event.version,
                type=event.type, interrupt_id=event.interrupt_id, run_id=event.run_id,
                actor=event.actor, data=event.data, occurred_at=event.occurred_at, hash=event.hash))
    report = store.verify_checkpoint(after, public_keys=[pub])
    assert [p.thread_id for p in report.problems] == ["t-old-1"]
    assert "inserted" in report.problems[0].problem


def test_verify_with_archives_on_the_command_line(
    history: InterruptStore, key: Path, pub: Path, migrated_url: str, tmp_path: Path
) -> None:
    """verify --checkpoint of a checkpoint taken before an archive exits 1 naming the archived threads, and 0 with --archive FILE."""
    store = history
    cp = tmp_path / "before.json"
    cp.write_text(store.checkpoint(key).to_json())
    out = tmp_path / "a.jsonl.gz"
    store.archive(FEBRUARY, out, key=key)
    args = ("verify", "--checkpoint", str(cp), "--public-key", str(pub))
    line = assert_clean_error(run_cli(*args, db=migrated_url), 1)
    assert "t-old-1" in line and "--archive" in line
    passed = run_cli(*args, "--archive", str(out), db=migrated_url)
    assert passed.returncode == 0, passed.stderr
    assert "holds everything it committed to" in passed.stdout


def test_a_thread_that_gets_an_event_before_it_is_written_is_not_archived(
    history: InterruptStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event appended between choosing the threads and writing them: the archive stops as a race (nothing written, nothing removed)."""
    store = history
    real = archiving.candidates

    def choose_then_append(conn: sa.Connection, **kw: object) -> list[tuple[str, int, str]]:
        chosen = real(conn, **kw)  # type: ignore[arg-type]
        store.record_route("t-old-1", "finish", run_id="r1")
        return chosen

    monkeypatch.setattr(archiving, "candidates", choose_then_append)
    out = tmp_path / "a.jsonl"
    with pytest.raises(ConcurrencyConflictError, match="t-old-1"):
        store.archive(FEBRUARY, out)
    assert not out.exists() and count(store, "symfonic_archives") == 0
    assert len(store.history("t-old-1")) == 4
