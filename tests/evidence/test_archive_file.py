"""The archive's output file: a file that appears under the name is never removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from symfonic_store import InvalidInputError
from symfonic_store.services.archive import _new_file


def test_a_file_that_appeared_since_the_check_is_refused_and_kept(tmp_path: Path) -> None:
    # Another process created the file after the store looked for it: opening it
    # exclusively fails, and the refusal must not delete that process's file.
    path = tmp_path / "archive.jsonl"
    path.write_bytes(b"someone else's\n")
    with pytest.raises(InvalidInputError, match="never overwritten"):
        with _new_file(path):
            pass  # pragma: no cover - never reached
    assert path.read_bytes() == b"someone else's\n"


def test_a_failed_write_removes_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "archive.jsonl"
    with pytest.raises(RuntimeError):
        with _new_file(path) as handle:
            handle.write(b"partial\n")
            raise RuntimeError("the write failed")
    assert not path.exists()
