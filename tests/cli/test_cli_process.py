"""The command line as a real process: the installed entry point, `python -m`, exit codes.

Everything else about the CLI is tested in this process (tests/cli_helpers.py); these
few runs check what only a real interpreter shows: the console script works, and exit
codes and stderr reach the caller the way a shell or cron sees them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_clean_error, mint_stale, run_process

import symfonic_store
from symfonic_store import InterruptStore

ENTRY_POINT = Path(sys.executable).parent / "symfonic-store"


@pytest.mark.skipif(not ENTRY_POINT.exists(), reason="the package is not installed in this interpreter")
def test_the_installed_entry_point_runs(tmp_path: Path) -> None:
    """The `symfonic-store` console script prints the version, and exits 2 on a bad flag."""
    version = run_process("--version", command=[str(ENTRY_POINT)], cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, f"symfonic-store {symfonic_store.__version__}\n")
    bad = run_process("pending", "--format", "xml", command=[str(ENTRY_POINT)], cwd=tmp_path)
    assert assert_clean_error(bad, 2).endswith("invalid --format: 'xml' is not one of table, json")
    assert list(tmp_path.iterdir()) == []


def test_python_dash_m_exit_codes_reach_the_caller(migrated_url: str) -> None:
    """`python -m symfonic_store.cli` exits 0 on success, 1 on a refused resume, 2 on bad input."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        interrupt_id = mint_stale(store, "t-proc", age=5)
        store.resume("t-proc", interrupt_id, {"approved": True}, actor="alice")

    listed = run_process("pending", "--format", "json", db=migrated_url)
    assert (listed.returncode, json.loads(listed.stdout), listed.stderr) == (0, [], "")

    refused = run_process("resume", "t-proc", interrupt_id, "--actor", "bob", db=migrated_url)
    assert "already" in assert_clean_error(refused, 1)

    hostile = run_process(
        "resume", "\u202e'; DROP TABLE symfonic_events; --", "i-x", "--actor", "é" * 300,
        "--response", "[" * 5000 + "]" * 5000, db=migrated_url,
    )
    assert "invalid --response" in assert_clean_error(hostile, 2)
    with InterruptStore(migrated_url) as store:
        assert len(store.events()) == 3  # minted, resumed, the refusal: nothing more
