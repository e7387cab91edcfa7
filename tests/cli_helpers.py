"""Running the real ``symfonic-store`` command in a subprocess, for the CLI tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from symfonic_store import InterruptStore, build_interrupt_marker, new_interrupt_id

CLI = [sys.executable, "-m", "symfonic_store.cli"]
TIMEOUT = 120


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without the store's own variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMFONIC_STORE_")}
    env.pop("COLUMNS", None)
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra or {})
    return env


def run_cli(
    *args: str,
    db: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``symfonic-store [--db db] args...``; stdout and stderr captured as text."""
    argv = [*CLI, *(["--db", db] if db is not None else []), *args]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=cli_env(env),
        cwd=cwd,
        timeout=TIMEOUT,
        check=False,
    )


def popen_cli(*args: str, db: str, cwd: Path | str | None = None) -> subprocess.Popen[str]:
    """Start ``symfonic-store --db db args...`` without waiting for it."""
    return subprocess.Popen(
        [*CLI, "--db", db, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=cli_env(),
        cwd=cwd,
    )


def run_json(*args: str, db: str | None = None, **kw: Any) -> Any:
    """Run a command that must succeed and parse its stdout as one JSON document."""
    result = run_cli(*args, db=db, **kw)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def assert_clean_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The exit code is ``code``; stderr has one error line and no traceback; returns it."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("symfonic-store: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def mint_stale(
    store: InterruptStore, thread_id: str, *, age: float, interrupt_id: str | None = None, **payload: Any
) -> str:
    """Mint an approval marker on ``thread_id`` that was raised ``age`` seconds ago."""
    marker = build_interrupt_marker(
        name="approval_required",
        interrupt_id=interrupt_id or new_interrupt_id(),
        payload=payload or {"amount": 420},
    )["_interrupt_pending"]
    marker["minted_at"] = time.time() - age
    store.mint(thread_id, marker)
    return str(marker["interrupt_id"])
