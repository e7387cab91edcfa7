"""The README's Python examples run as written (so the README stays true)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_readme_has_the_wiring_example() -> None:
    """The README shows a graph wired with the store's node and router."""
    blocks = python_blocks()
    assert any("make_interrupt_router(store)" in b and "create_interrupt_node(store)" in b for b in blocks)


def test_readme_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every runnable Python block of the README executes, in order, in one namespace."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    ran = 0
    for block in python_blocks():
        if "db.internal" in block:  # needs a PostgreSQL host of the reader's
            continue
        exec(compile(block, str(README), "exec"), namespace)
        ran += 1
    assert ran >= 3
    out = capsys.readouterr().out
    assert 'The approver said: {"approved": true}' in out
    assert "alice" in out
    assert "sweep expired" in out
    assert "escalate recorded agent" in out  # the decisions function's word, in the audit


def test_readme_graph_module_only_builds_the_graph(tmp_path: Path) -> None:
    """The README's `--graph` module runs nothing on import: `sweep --format json` prints only JSON."""
    import json
    import subprocess
    import sys

    block = next(b for b in python_blocks() if b.startswith("# refund_agent/app.py"))
    package = tmp_path / "refund_agent"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "app.py").write_text(block)
    cli = [sys.executable, "-m", "symfonic_store.cli", "--db", "sqlite:///agent.db"]
    subprocess.run([*cli, "db", "upgrade"], cwd=tmp_path, check=True, capture_output=True)
    done = subprocess.run(
        [*cli, "sweep", "--graph", "refund_agent.app:graph", "--format", "json"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["expired"] == [] and report["woken"] == 0
