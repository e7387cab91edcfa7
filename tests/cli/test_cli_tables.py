"""Tables for people: readable from 80 to 160 columns, long values cut with a marker, ids whole."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator

import pytest
from cli_helpers import mint_stale, run_cli, run_json
from rich.cells import cell_len

from symfonic_store import InterruptStore

LONG_NOTE = "x" * 5000
LONG_COMMENT = "looks fine " * 400
LONG_THREAD = "customer-4711-session-2026-11-29-refund-request-" + "a" * 12
MARKER = re.compile(r"…\(\+(\d+) chars\)")


@pytest.fixture
def shop(migrated_url: str) -> Iterator[tuple[InterruptStore, dict[str, str]]]:
    """A migrated store: long payloads (one resumed with a long response), a long thread id, a short row."""
    store = InterruptStore(migrated_url)
    store.setup()
    ids = {
        "thread-refund-1181": mint_stale(store, "thread-refund-1181", age=600, amount=420, note=LONG_NOTE),
        LONG_THREAD: mint_stale(store, LONG_THREAD, age=300, amount=7),
        "t-short": mint_stale(store, "t-short", age=60, amount=1),
        "thread-waiting-7": mint_stale(store, "thread-waiting-7", age=30, amount=9, note=LONG_NOTE),
    }
    store.resume(
        "thread-refund-1181", ids["thread-refund-1181"], {"approved": True, "comment": LONG_COMMENT}, actor="承認者"
    )
    yield store, ids
    store.close()


COMMANDS = [["pending"], ["audit"], ["replay", "thread-refund-1181"]]


@pytest.mark.parametrize("columns", [80, 160])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_terminal_tables_fit_the_width_and_cut_only_long_values(
    shop: tuple[InterruptStore, dict[str, str]], migrated_url: str, columns: int, args: list[str]
) -> None:
    """At 80 and 160 columns no line is wider; long values end in `…(+N chars)`; every id shows whole."""
    _, ids = shop
    result = run_cli(*args, db=migrated_url, env={"COLUMNS": str(columns)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= columns
    assert "…(+" in result.stdout and "chars)" in result.stdout
    assert "x" * 300 not in result.stdout
    shown = [(thread, interrupt) for thread, interrupt in ids.items() if thread in result.stdout]
    assert shown, result.stdout
    for thread, interrupt in shown:
        assert any(thread in line for line in lines), thread
        assert any(interrupt in line for line in lines), interrupt


def test_an_80_column_audit_becomes_records_and_a_160_column_inbox_stays_a_table(
    shop: tuple[InterruptStore, dict[str, str]], migrated_url: str
) -> None:
    """The audit's columns do not fit 80: each record is `name  value` lines (the interrupt's name, thread and id stacked); the inbox at 160 is one row per interrupt."""
    _, ids = shop
    audit = run_cli("audit", db=migrated_url, env={"COLUMNS": "80"}).stdout.splitlines()
    assert sum(line.startswith("interrupt ") for line in audit) == 4
    assert sum(line.startswith("decision ") for line in audit) == 4
    assert any(line.strip() == ids["t-short"] for line in audit)

    inbox = run_cli("pending", "--thread", "t-short", db=migrated_url, env={"COLUMNS": "160"}).stdout.splitlines()
    header = next(line for line in inbox if line.startswith("thread"))
    assert header.split() == ["thread", "interrupt", "name", "minted", "age", "run_id", "payload"]
    assert any("t-short" in line and ids["t-short"] in line and '"amount": 1' in line for line in inbox)


def test_piped_tables_keep_a_row_on_one_line_with_long_values_capped(
    shop: tuple[InterruptStore, dict[str, str]], migrated_url: str
) -> None:
    """Piped, each row is one line for grep; a long value is cut and the marker counts what was left out."""
    _, ids = shop
    result = run_cli("pending", db=migrated_url)
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if LONG_THREAD in line]
    assert ids[LONG_THREAD] in row
    audit = run_cli("audit", "--thread", "thread-refund-1181", db=migrated_url).stdout
    (row,) = [line for line in audit.splitlines() if "thread-refund-1181" in line]
    assert ids["thread-refund-1181"] in row and "承認者" in row
    payload = json.dumps({"amount": 420, "note": LONG_NOTE}, sort_keys=True)
    start = row.index('{"amount": 420')
    cut = MARKER.search(row, start)
    assert cut is not None
    assert payload.startswith(row[start : cut.start()])
    assert cut.start() - start + int(cut.group(1)) == len(payload)
    assert len(row) < 1000


def test_json_and_csv_always_carry_the_whole_value(
    shop: tuple[InterruptStore, dict[str, str]], migrated_url: str
) -> None:
    """--format json and csv are never cut, whatever the terminal width."""
    env = {"COLUMNS": "80"}
    (pending,) = [p for p in run_json("pending", "--format", "json", db=migrated_url, env=env) if p["thread_id"] == LONG_THREAD]
    assert pending["thread_id"] == LONG_THREAD
    (record,) = run_json("audit", "--thread", "thread-refund-1181", "--format", "json", db=migrated_url, env=env)
    assert record["payload"]["note"] == LONG_NOTE
    assert record["response"]["comment"] == LONG_COMMENT
    steps = run_json("replay", "thread-refund-1181", "--format", "json", db=migrated_url, env=env)
    assert steps[0]["event"]["data"]["payload"]["note"] == LONG_NOTE

    sheet = run_cli("audit", "--thread", "thread-refund-1181", "--format", "csv", db=migrated_url, env=env)
    header, row = list(csv.reader(io.StringIO(sheet.stdout)))
    values = dict(zip(header, row, strict=True))
    assert json.loads(values["payload"])["note"] == LONG_NOTE
    assert json.loads(values["response"])["comment"] == LONG_COMMENT
