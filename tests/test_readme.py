"""The README's Python examples run as written (so the README stays true)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


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
