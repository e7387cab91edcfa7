"""What the README's examples say they print is what they print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_readme import README, python_blocks

PRINTED = re.compile(r"^print\(.*\)\s+# (?!e\.g\.)(.+)$", re.M)


def test_readme_print_comments_are_the_real_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each `print(...)  # shown` line of the README prints exactly `shown` (a payload's keys sorted, as stored)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    claimed: list[str] = []
    for block in python_blocks():
        if "db.internal" in block:  # needs a PostgreSQL host of the reader's
            continue
        claimed += PRINTED.findall(block)
        exec(compile(block, str(README), "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert "wire_approval {'amount': 999, 'name': 'wire_approval'}" in claimed
    for line in claimed:
        assert line.strip() in printed, (line, printed)
