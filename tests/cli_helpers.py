"""Running the ``symfonic-store`` command line for the CLI tests.

``run_cli`` calls :func:`symfonic_store.cli.main` in this process: no interpreter start-up
and no re-import per call, which is what made the CLI tests slow. It gives the same
result as a real run -- a ``CompletedProcess`` with the exit code, stdout and stderr --
with the store's environment variables, ``COLUMNS``, the current folder and ``sys.path``
set for that one call and restored afterwards. ``run_process`` and ``popen_cli`` start a
real process, for the few tests about the process itself (the entry point, exit codes
through a real interpreter, concurrent sweeps, importing a ``--graph`` module).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from symfonic_store import InterruptStore, build_interrupt_marker, new_interrupt_id
from symfonic_store.cli import main

CLI = [sys.executable, "-m", "symfonic_store.cli"]
TIMEOUT = 120
Result = subprocess.CompletedProcess[str]


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without the store's own variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMFONIC_STORE_")}
    env.pop("COLUMNS", None)
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra or {})
    return env


def _argv(args: tuple[str, ...], db: str | None) -> list[str]:
    return [*(["--db", db] if db is not None else []), *args]


def run_cli(
    *args: str,
    db: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
) -> Result:
    """``symfonic-store [--db db] args...`` in this process; stdout and stderr as text.

    Like a real run, the command sees only ``env`` of the store's variables (none of
    this process's ``SYMFONIC_STORE_*`` or ``COLUMNS``), and its stdout and stderr are
    pipes: byte streams with a UTF-8 text layer, not terminals.
    """
    argv = _argv(args, db)
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("SYMFONIC_STORE_") or name == "COLUMNS":
                mp.delenv(name)
        for name, value in (env or {}).items():
            mp.setenv(name, value)
        if cwd is not None:
            mp.chdir(cwd)
        # `sweep --graph` puts the current folder on sys.path; keep that to this call.
        mp.setattr(sys, "path", list(sys.path))
        mp.setattr(sys, "stdout", stdout)
        mp.setattr(sys, "stderr", stderr)
        # A `--graph` module imported from the current folder belongs to this call only:
        # the next call (another database, another folder) must import its own.
        modules = set(sys.modules)
        try:
            code = main(argv)
        except SystemExit as exc:  # main() returns its code; this would be a bug
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            if cwd is not None:
                for name in set(sys.modules) - modules:
                    module_file = getattr(sys.modules[name], "__file__", None) or ""
                    if module_file.startswith(str(cwd)):
                        del sys.modules[name]
        stdout.flush()
        stderr.flush()
    return subprocess.CompletedProcess(
        argv, code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")
    )


def run_process(
    *args: str,
    db: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    command: list[str] | None = None,
) -> Result:
    """``symfonic-store [--db db] args...`` as a real process (``python -m`` unless ``command``)."""
    return subprocess.run(
        [*(command or CLI), *_argv(args, db)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=cli_env(env),
        cwd=cwd,
        timeout=TIMEOUT,
        check=False,
    )


def popen_cli(*args: str, db: str, cwd: Path | str | None = None) -> subprocess.Popen[str]:
    """Start ``symfonic-store --db db args...`` as a real process without waiting for it."""
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
    """Run a command (in this process) that must succeed; parse its stdout as one JSON document."""
    result = run_cli(*args, db=db, **kw)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def assert_clean_error(result: Result, code: int) -> str:
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
