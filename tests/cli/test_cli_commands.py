"""The ``symfonic-store`` commands on SQLite and PostgreSQL (SPEC §5), run in this process."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, mint_stale, run_cli, run_json

from symfonic_store import INTERRUPT_ACK_SENTINEL, InterruptStore
from symfonic_store.db.schema import POSTGRES_DROP_TRIGGERS, SQLITE_DROP_TRIGGERS

AUDIT_NAMES = [
    "thread_id",
    "interrupt_id",
    "name",
    "payload",
    "minted_at",
    "outcome",
    "reason",
    "actor",
    "response",
    "resolved_at",
    "attempts",
    "decision",
    "action",
    "action_index",
    # appended by SPEC §12, in this order, after the earlier names
    "requested_by",
    "decision_source",
    "authenticated_by",
    # appended by SPEC §15
    "tenant",
    "approvers",
]
EVENT_COLUMNS = {
    "position",
    "thread_id",
    "version",
    "type",
    "interrupt_id",
    "run_id",
    "actor",
    "data",
    "occurred_at",
    "hash",
}


@pytest.fixture
def migrated(migrated_url: str) -> Iterator[InterruptStore]:
    """A migrated store on the test database; the CLI runs against the same URL."""
    store = InterruptStore(migrated_url)
    store.setup()
    yield store
    store.close()


def empty_database(db_url: str) -> str:
    """The URL's database, existing and empty: on SQLite an empty file (a fresh schema on PostgreSQL)."""
    parsed = sa.make_url(db_url)
    if parsed.get_backend_name() == "sqlite":
        assert parsed.database is not None
        Path(parsed.database).touch()
    return db_url


def test_db_commands_migrate_report_and_downgrade(db_url: str) -> None:
    """db current/upgrade/downgrade work on an empty database; other commands ask for an upgrade."""
    empty_database(db_url)
    before = run_cli("db", "current", db=db_url)
    assert before.returncode == 0, before.stderr
    assert "no schema" in before.stdout and "symfonic-store db upgrade" in before.stdout

    behind = run_cli("pending", db=db_url)
    assert "symfonic-store db upgrade" in assert_clean_error(behind, 2)

    upgraded = run_cli("db", "upgrade", db=db_url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "(head)" in upgraded.stdout
    assert run_json("pending", "--format", "json", db=db_url) == []

    down = run_cli("db", "downgrade", "base", "--yes", db=db_url)  # base drops the events: --yes
    assert down.returncode == 0, down.stderr
    assert "no schema" in down.stdout
    assert "symfonic-store db upgrade" in assert_clean_error(run_cli("audit", db=db_url), 2)

    bad = run_cli("db", "downgrade", "no-such-revision", db=db_url)
    assert "revision" in assert_clean_error(bad, 2)

    again = run_cli("db", "upgrade", db=db_url)
    assert again.returncode == 0 and "(head)" in again.stdout
    current = run_cli("db", "current", db=db_url)
    assert current.returncode == 0 and "(head)" in current.stdout


def test_pending_lists_the_inbox_as_table_and_json(migrated: InterruptStore, migrated_url: str) -> None:
    """pending shows every waiting interrupt oldest first; --thread and --older-than filter it."""
    old = mint_stale(migrated, "thread-old", age=3600, amount=1)
    new = mint_stale(migrated, "thread-new", age=10, amount=2)
    done = mint_stale(migrated, "thread-done", age=100)
    migrated.resume("thread-done", done, {"approved": True}, actor="alice")

    everything = run_json("pending", "--format", "json", db=migrated_url)
    assert [(p["thread_id"], p["interrupt_id"]) for p in everything] == [
        ("thread-old", old),
        ("thread-new", new),
    ]
    assert everything == migrated.list_pending()
    assert set(everything[0]) >= {"name", "interrupt_id", "payload", "tool_call_id", "run_id", "minted_at", "thread_id"}

    assert run_json("pending", "--older-than", "60", "--format", "json", db=migrated_url) == [everything[0]]
    only_new = run_json("pending", "--thread", "thread-new", "--format", "json", db=migrated_url)
    assert [p["interrupt_id"] for p in only_new] == [new]

    # The URL may also come from the environment.
    table = run_cli("pending", env={"SYMFONIC_STORE_URL": migrated_url})
    assert table.returncode == 0, table.stderr
    assert "thread-old" in table.stdout and new in table.stdout and "thread-done" not in table.stdout


def test_resume_prints_one_json_line_and_refuses_a_second_answer(
    migrated: InterruptStore, migrated_url: str
) -> None:
    """resume prints the Command's resume value; a refused resume exits 1 with the reason."""
    approved = mint_stale(migrated, "t-approve", age=5)
    acked = mint_stale(migrated, "t-ack", age=5)

    first = run_cli("resume", "t-approve", approved, "--actor", "alice", "--response", '{"approved": true}', db=migrated_url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("\n") == 1
    assert json.loads(first.stdout) == {"approved": True}

    ack = run_cli("resume", "t-ack", acked, "--actor", "carol", db=migrated_url)
    assert ack.returncode == 0, ack.stderr
    assert json.loads(ack.stdout) == {INTERRUPT_ACK_SENTINEL: True}

    second = run_cli("resume", "t-approve", approved, "--actor", "bob", "--response", '{"approved": false}', db=migrated_url)
    line = assert_clean_error(second, 1)
    assert "already" in line and second.stdout == ""

    unknown = run_cli("resume", "t-approve", "i-000000000000", "--actor", "bob", db=migrated_url)
    assert "unknown" in assert_clean_error(unknown, 1)

    not_json = run_cli("resume", "t-ack", acked, "--actor", "bob", "--response", "{nope", db=migrated_url)
    assert "--response" in assert_clean_error(not_json, 2)
    no_actor = run_cli("resume", "t-ack", acked, db=migrated_url)
    assert no_actor.returncode == 2 and "--actor" in no_actor.stderr

    records = {r.thread_id: r for r in migrated.audit()}
    assert (records["t-approve"].actor, records["t-approve"].response) == ("alice", {"approved": True})
    assert (records["t-ack"].actor, records["t-ack"].response) == ("carol", {})
    whys = [e.data.get("why") for e in migrated.history("t-approve") if e.type == "interrupt.resume_rejected"]
    assert whys == ["already_resolved", "unknown"]


def test_sweep_expires_stale_interrupts_with_the_right_ttl(migrated: InterruptStore, migrated_url: str) -> None:
    """sweep's --ttl beats the global --ttl, which beats SYMFONIC_STORE_TTL; --dry-run writes nothing."""
    stale = mint_stale(migrated, "t-stale", age=600)
    mint_stale(migrated, "t-fresh", age=5)

    dry = run_json("--ttl", "100000", "sweep", "--ttl", "60", "--dry-run", "--format", "json", db=migrated_url)
    assert dry["dry_run"] is True
    assert dry["expired"] == [{"thread_id": "t-stale", "interrupt_id": stale, "reason": "ttl"}]
    assert len(migrated.list_pending()) == 2

    # The global TTL of a day keeps both; SYMFONIC_STORE_TTL is ignored when --ttl is given.
    kept = run_json("--ttl", "86400", "sweep", "--format", "json", db=migrated_url, env={"SYMFONIC_STORE_TTL": "1"})
    assert kept["expired"] == [] and kept["ttl_seconds"] == 86400

    by_env = run_cli("sweep", "--batch-size", "1", db=migrated_url, env={"SYMFONIC_STORE_TTL": "60"})
    assert by_env.returncode == 0, by_env.stderr
    # No --graph: the wake-up stays owed for a sweep that can deliver it.
    lines = by_env.stdout.strip().splitlines()
    assert lines[0] == "sweep expired 1 interrupt(s) (1 ttl); ttl 60s; 1 wake-up(s) still owed (1 to no named graph)"
    # Every sweep lists what it expired (SPEC §12), as --dry-run does.
    assert any("t-stale" in line and stale in line and line.split()[-1] == "ttl" for line in lines[1:])
    assert [p["thread_id"] for p in migrated.list_pending()] == ["t-fresh"]
    assert [r.outcome for r in migrated.audit(thread_id="t-stale")] == ["expired"]

    nothing_left = run_json("sweep", "--ttl", "60", "--format", "json", db=migrated_url)
    assert nothing_left["expired"] == [] and nothing_left["wake_failures"] == []


def test_audit_csv_quotes_cells_a_spreadsheet_would_run(migrated: InterruptStore, migrated_url: str) -> None:
    """audit --format csv puts a ' before a cell beginning with =, +, -, @, a tab or a CR;
    --format json keeps the values as they are."""
    threads = ['=HYPERLINK("https://evil.example","open")', "+1", "-2", "@SUM(A1)", "\tx", "\rx", "plain"]
    for t in threads:
        i = mint_stale(migrated, t, age=60)
        migrated.resume(t, i, {"approved": True}, actor="=1+2")
    sheet = run_cli("audit", "--format", "csv", db=migrated_url)
    assert sheet.returncode == 0, sheet.stderr
    rows = list(csv.reader(io.StringIO(sheet.stdout, newline="")))
    cells = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert sorted(c["thread_id"] for c in cells) == sorted(t if t == "plain" else "'" + t for t in threads)
    assert {c["actor"] for c in cells} == {"'=1+2"}
    records = run_json("audit", "--format", "json", db=migrated_url)
    assert sorted(r["thread_id"] for r in records) == sorted(threads)
    assert {r["actor"] for r in records} == {"=1+2"}


def test_audit_renders_json_csv_and_table_with_filters(migrated: InterruptStore, migrated_url: str) -> None:
    """audit --format json/csv carry the §3 names; --since/--until/--actor/--thread filter."""
    a = mint_stale(migrated, "t-a", age=7200, amount=420, note="café, \"quoted\"")
    b = mint_stale(migrated, "t-b", age=60, amount=75)
    migrated.resume("t-a", a, {"approved": True, "by": "phone"}, actor="alice")
    migrated.resume("t-b", b, {"approved": False}, actor="bob")
    mint_stale(migrated, "t-c", age=30)

    records = run_json("audit", "--format", "json", db=migrated_url)
    assert [list(r) for r in records] == [AUDIT_NAMES] * 3
    assert [(r["thread_id"], r["outcome"], r["actor"]) for r in records] == [
        ("t-a", "resumed", "alice"),
        ("t-b", "resumed", "bob"),
        ("t-c", "pending", None),
    ]
    minted = datetime.fromisoformat(records[0]["minted_at"])
    assert minted.utcoffset() == timedelta(0)
    assert records[0]["response"] == {"approved": True, "by": "phone"}

    # An ISO value without an offset is UTC: this bound falls between t-a and t-b.
    middle = (datetime.now(UTC) - timedelta(hours=1)).replace(tzinfo=None).isoformat()
    recent = run_json("audit", "--since", middle, "--format", "json", db=migrated_url)
    assert [r["thread_id"] for r in recent] == ["t-b", "t-c"]
    early = run_json("audit", "--until", middle, "--actor", "alice", "--format", "json", db=migrated_url)
    assert [r["thread_id"] for r in early] == ["t-a"]

    sheet = run_cli("audit", "--format", "csv", "--thread", "t-a", db=migrated_url)
    assert sheet.returncode == 0, sheet.stderr
    rows = list(csv.reader(io.StringIO(sheet.stdout)))
    assert rows[0] == AUDIT_NAMES
    assert len(rows) == 2
    row = dict(zip(rows[0], rows[1], strict=True))
    assert json.loads(row["payload"]) == {"amount": 420, "note": "café, \"quoted\""}
    assert json.loads(row["response"]) == {"approved": True, "by": "phone"}
    assert row["actor"] == "alice" and row["reason"] == ""

    table = run_cli("audit", db=migrated_url)
    assert table.returncode == 0, table.stderr
    assert all(word in table.stdout for word in ("t-a", "alice", "bob", "pending", "resumed"))

    malformed = run_cli("audit", "--since", "yesterday-ish", db=migrated_url)
    assert "--since" in assert_clean_error(malformed, 2)


def test_replay_shows_each_event_with_the_state_after_it(migrated: InterruptStore, migrated_url: str) -> None:
    """replay --format json gives {event, state} per event; --until bounds it; unknown thread exits 1."""
    first = mint_stale(migrated, "t-r", age=50)
    migrated.record_route("t-r", "interrupt", run_id="run-1")
    migrated.resume("t-r", first, {"approved": True}, actor="alice")
    history = migrated.history("t-r")

    steps = run_json("replay", "t-r", "--format", "json", db=migrated_url)
    assert [set(s) for s in steps] == [{"event", "state"}] * 3
    assert [set(s["event"]) for s in steps] == [EVENT_COLUMNS] * 3
    assert [s["event"]["type"] for s in steps] == ["interrupt.minted", "route.decided", "interrupt.resumed"]
    assert [s["event"]["position"] for s in steps] == [e.position for e in history]
    assert steps[0]["state"]["_interrupt_pending"]["interrupt_id"] == first
    assert steps[1]["state"]["run_id"] == "run-1"
    assert steps[2]["state"] == {"_interrupt_pending": None, "run_id": "run-1"}
    assert datetime.fromisoformat(steps[0]["event"]["occurred_at"]).utcoffset() == timedelta(0)

    upto = run_json("replay", "t-r", "--until", str(history[1].position), "--format", "json", db=migrated_url)
    assert len(upto) == 2
    as_of = history[0].occurred_at.astimezone(UTC).replace(tzinfo=None).isoformat()
    assert len(run_json("replay", "t-r", "--until", as_of, "--format", "json", db=migrated_url)) == 1

    table = run_cli("replay", "t-r", db=migrated_url)
    assert table.returncode == 0, table.stderr
    assert "interrupt.resumed" in table.stdout and "alice" in table.stdout

    unknown = run_cli("replay", "no-such-thread", db=migrated_url)
    assert "no-such-thread" in assert_clean_error(unknown, 1)


def _drop_append_only_triggers(store: InterruptStore) -> None:
    statements = SQLITE_DROP_TRIGGERS if store.engine.dialect.name == "sqlite" else POSTGRES_DROP_TRIGGERS
    with store.engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)


def test_verify_exits_1_naming_the_thread_and_position_of_a_tampered_event(
    migrated: InterruptStore, migrated_url: str
) -> None:
    """verify passes on an untouched log and names the first broken link after tampering."""
    good = mint_stale(migrated, "t-good", age=5)
    migrated.resume("t-good", good, {"approved": True}, actor="alice")
    bad = mint_stale(migrated, "t-bad", age=5)
    migrated.resume("t-bad", bad, {"approved": False}, actor="bob")

    ok = run_cli("verify", db=migrated_url)
    assert ok.returncode == 0, ok.stderr
    assert "all hash chains hold" in ok.stdout

    _drop_append_only_triggers(migrated)
    target = migrated.history("t-bad")[1]
    events = sa.table("symfonic_events", sa.column("position"), sa.column("actor"))
    with migrated.engine.begin() as conn:
        conn.execute(sa.update(events).where(events.c.position == target.position).values(actor="mallory"))

    broken = run_cli("verify", db=migrated_url)
    line = assert_clean_error(broken, 1)
    assert "t-bad" in line and str(target.position) in line
    assert "t-bad" in broken.stdout and f"position {target.position}" in broken.stdout
    assert "t-good" not in line

    just_good = run_cli("verify", "--thread", "t-good", db=migrated_url)
    # t-good's chain holds: what still fails is the append-only triggers dropped above.
    good_line = assert_clean_error(just_good, 1)
    assert "t-good" not in good_line and "trigger" in good_line


def test_projection_rebuild_folds_every_event(migrated: InterruptStore, migrated_url: str) -> None:
    """projection rebuild reports the events folded and leaves the same projection."""
    first = mint_stale(migrated, "t-p", age=5)
    migrated.resume("t-p", first, None, actor="alice")
    mint_stale(migrated, "t-q", age=5)
    before = migrated.list_pending()

    result = run_cli("projection", "rebuild", db=migrated_url)
    assert result.returncode == 0, result.stderr
    assert "rebuilt the projection from 3 event(s)" in result.stdout
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    assert migrated.list_pending() == before
