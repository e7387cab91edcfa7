"""tests/langgraph_suite/run.py reads its report as promised: a test that passes with
LangGraph's savers and fails with one of the store's is listed, nothing else is."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

RUNNER = Path(__file__).parents[1] / "langgraph_suite" / "run.py"


def runner() -> Any:
    spec = importlib.util.spec_from_file_location("langgraph_suite_run", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report(tmp_path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path = tmp_path / "report.jsonl"
    path.write_text(
        "".join(json.dumps({"nodeid": n, "when": w, "outcome": o, "seconds": 0.0}) + "\n" for n, w, o in rows)
    )
    return path


def phases(nodeid: str, call: str, setup: str = "passed") -> list[tuple[str, str, str]]:
    if setup != "passed":
        return [(nodeid, "setup", setup), (nodeid, "teardown", "passed")]
    return [(nodeid, "setup", "passed"), (nodeid, "call", call), (nodeid, "teardown", "passed")]


def test_only_tests_passing_with_langgraphs_savers_and_failing_with_ours_are_listed(tmp_path: Path) -> None:
    rows = [
        *phases("tests/t.py::test_a[memory]", "passed"),
        *phases("tests/t.py::test_a[symfonic_sqlite]", "failed"),  # listed
        *phases("tests/t.py::test_a[symfonic_recording]", "passed"),
        *phases("tests/t.py::test_b[sync-sqlite]", "passed"),
        *phases("tests/t.py::test_b[sync-symfonic_postgres]", "passed", setup="failed"),  # listed
        *phases("tests/t.py::test_c[memory]", "failed"),  # fails with LangGraph's too: not ours
        *phases("tests/t.py::test_c[symfonic_sqlite]", "failed"),
        *phases("tests/t.py::test_d[memory]", "skipped"),
        *phases("tests/t.py::test_d[symfonic_sqlite]", "failed"),  # LangGraph's did not pass
    ]
    by_test, regressions = runner().compare(report(tmp_path, rows))
    assert regressions == [
        ("tests/t.py::test_a", "symfonic_sqlite"),
        ("tests/t.py::test_b[sync]", "symfonic_postgres"),
    ]
    assert by_test["tests/t.py::test_b[sync]"] == {"sqlite": "passed", "symfonic_postgres": "failed"}
