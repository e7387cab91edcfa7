"""``symfonic-store sweep --policy FILE``: the sweep's reminders and escalations, told.

The command runs in-process on the per-test database of each backend; the interrupts
were minted hours back (their ``minted_at`` says so), so no clock moves.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import assert_clean_error, mint_stale, run_cli

from symfonic_store import ESCALATED, REMINDED, InterruptStore

POLICY = {"approval_required": {"remind_after": 600, "escalate_after": 3600, "escalate_to": ["lead"]}}


def policy_file(tmp_path: Path, value: object) -> str:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(value))
    return str(path)


def test_sweep_policy_reports_a_dry_run_then_records_once(
    store: InterruptStore, migrated_url: str, tmp_path: Path
) -> None:
    """--dry-run lists what is due and writes nothing; the sweep records it (counted and
    listed, also as JSON); the next sweep records nothing more."""
    old = mint_stale(store, "t-old", age=7200)
    mint_stale(store, "t-new", age=60)
    path = policy_file(tmp_path, POLICY)

    dry = run_cli("sweep", "--policy", path, "--dry-run", db=migrated_url)
    assert dry.returncode == 0, dry.stderr
    assert "would record 1 reminder(s); would escalate 1 interrupt(s)" in dry.stdout
    assert "2 reminder(s) and escalation(s) due" in dry.stdout
    assert [e.type for e in store.history("t-old")] == ["interrupt.minted"]

    done = run_cli("sweep", "--policy", path, db=migrated_url)
    assert done.returncode == 0, done.stderr
    assert "recorded 1 reminder(s); escalated 1 interrupt(s)" in done.stdout
    assert "after 3600s to lead" in done.stdout and old in done.stdout
    assert [e.type for e in store.history("t-old")] == ["interrupt.minted", REMINDED, ESCALATED]
    assert [e.type for e in store.history("t-new")] == ["interrupt.minted"]

    again = run_cli("sweep", "--policy", path, "--format", "json", db=migrated_url)
    assert again.returncode == 0, again.stderr
    body = json.loads(again.stdout)
    assert (body["reminded"], body["escalated"]) == ([], [])


def test_sweep_policy_json_lists_both(store: InterruptStore, migrated_url: str, tmp_path: Path) -> None:
    """As JSON: reminded (thread, interrupt, after) and escalated (…, to)."""
    old = mint_stale(store, "t-old", age=7200)
    body = json.loads(run_cli("sweep", "--policy", policy_file(tmp_path, POLICY), "--format", "json", db=migrated_url).stdout)
    assert body["reminded"] == [{"thread_id": "t-old", "interrupt_id": old, "after": 600}]
    assert body["escalated"] == [{"thread_id": "t-old", "interrupt_id": old, "after": 3600, "to": ["lead"]}]


def test_a_bad_policy_file_is_exit_2_naming_it_and_nothing_is_written(
    store: InterruptStore, migrated_url: str, tmp_path: Path
) -> None:
    """A malformed entry or a missing file: one error line naming the file and the key."""
    mint_stale(store, "t-old", age=7200)
    bad = run_cli("sweep", "--policy", policy_file(tmp_path, {"x": {"escalate_after": 5}}), db=migrated_url)
    line = assert_clean_error(bad, 2)
    assert "policy.json" in line and "escalate_to" in line
    missing = run_cli("sweep", "--policy", str(tmp_path / "none.json"), db=migrated_url)
    assert "cannot be read" in assert_clean_error(missing, 2)
    assert [e.type for e in store.history("t-old")] == ["interrupt.minted"]
