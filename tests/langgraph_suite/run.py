"""LangGraph's own tests, run against the store's savers beside LangGraph's (SPEC §8).

Usage (from the repository root, with the ``langgraph-suite`` extra installed)::

    python tests/langgraph_suite/run.py [-k EXPRESSION] [pytest args ...]

Fetches the sdist of exactly the installed ``langgraph`` (it ships its ``tests/``) into
a cache folder (``SYMFONIC_SUITE_CACHE``, default ``~/.cache/symfonic-store``), adds the
store's savers to the suite's ``sync_checkpointer`` / ``async_checkpointer`` fixtures
(:mod:`savers`), runs the checkpointer-parametrised tests for LangGraph's savers and
ours, and prints every test that passes with LangGraph's savers and fails with one of
ours. Exit status: 0 when there is none, 1 when there are, 2 when the suite did not run.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = "# --- symfonic-store: the store's savers beside LangGraph's"
# LangGraph's savers that run without Docker (NO_DOCKER=true), by fixture parameter.
THEIR_SYNC = ["memory", "sqlite", "sqlite_aes"]
THEIR_ASYNC = ["memory", "sqlite_aio"]
CONFTEST_TAIL = f"""

{MARK} (tests/langgraph_suite/run.py)
from tests import _symfonic_savers as _symfonic

sync_checkpointer, async_checkpointer = _symfonic.extend(
    {THEIR_SYNC!r},
    lambda name: globals()["_checkpointer_" + name](),
    {THEIR_ASYNC!r},
    lambda name: globals()["_checkpointer_" + name](),
)
pytest_collection_modifyitems = _symfonic.pytest_collection_modifyitems
pytest_runtest_logreport = _symfonic.pytest_runtest_logreport
"""


def prepare(cache: Path) -> Path:
    """LangGraph's source tree for the installed version, with the store's savers added."""
    version = importlib.metadata.version("langgraph")
    tree = cache / f"langgraph-{version}"
    if not (tree / "tests" / "conftest.py").exists():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                 f"langgraph=={version}", "-d", tmp],
                check=True,
            )
            (sdist,) = Path(tmp).glob("langgraph-*.tar.gz")
            with tarfile.open(sdist) as archive:
                archive.extractall(cache, filter="data")
    conftest = tree / "tests" / "conftest.py"
    # LangGraph's conftest as shipped (without the tail a previous run added).
    text = conftest.read_text(encoding="utf-8").split("\n\n" + MARK, 1)[0]
    for name in {*THEIR_SYNC, *THEIR_ASYNC}:
        if f"_checkpointer_{name}" not in text:
            raise SystemExit(f"langgraph {version}: its conftest has no _checkpointer_{name}; update THEIR_*")
    conftest.write_text(text + CONFTEST_TAIL, encoding="utf-8")
    shutil.copyfile(HERE / "savers.py", tree / "tests" / "_symfonic_savers.py")
    shutil.copyfile(HERE.parent / "migrated.py", tree / "tests" / "_symfonic_migrated.py")
    return tree


def compare(report: Path) -> tuple[dict[str, dict[str, str]], list[tuple[str, str]]]:
    """Per test (its id without the saver), each saver's outcome; and the regressions."""
    outcomes: dict[str, str] = {}
    for line in report.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        nodeid, outcome = row["nodeid"], row["outcome"]
        if outcome == "failed" or nodeid not in outcomes or outcomes[nodeid] == "passed":
            outcomes[nodeid] = outcome if outcomes.get(nodeid) != "failed" else "failed"
    by_test: dict[str, dict[str, str]] = defaultdict(dict)
    for nodeid, outcome in outcomes.items():
        if "[" not in nodeid:
            continue
        base, ids = nodeid[:-1].split("[", 1)
        parts = ids.split("-")
        saver = next((p for p in parts if p in {*THEIR_SYNC, *THEIR_ASYNC} or p.startswith("symfonic_")), None)
        if saver is None:
            continue
        rest = "-".join(p for p in parts if p != saver)
        by_test[f"{base}[{rest}]" if rest else base][saver] = outcome
    regressions = []
    for test, savers in sorted(by_test.items()):
        theirs = [o for s, o in savers.items() if not s.startswith("symfonic_")]
        if not theirs or any(o == "failed" for o in theirs) or "passed" not in theirs:
            continue
        for saver, outcome in sorted(savers.items()):
            if saver.startswith("symfonic_") and outcome == "failed":
                regressions.append((test, saver))
    return by_test, regressions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="select", default=None, help="pytest -k expression")
    parser.add_argument("--cache", default=os.environ.get("SYMFONIC_SUITE_CACHE") or str(Path.home() / ".cache" / "symfonic-store"))
    parser.add_argument("--baseline", help="LangGraph's savers to run, comma-separated (default: all that run without Docker)")
    parser.add_argument("--savers", help="the store's savers to run, comma-separated (default: all)")
    args, extra = parser.parse_known_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    tree = prepare(cache)
    report = cache / "report.jsonl"
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-o", "addopts=", "-o", "asyncio_default_fixture_loop_scope=function", "--tb=line", "-rN"]
    if args.select:
        command += ["-k", args.select]
    command += extra
    env = {**os.environ, "NO_DOCKER": "true", "SYMFONIC_SUITE_REPORT": str(report)}
    if args.baseline:
        env["SYMFONIC_SUITE_BASELINE"] = args.baseline
    if args.savers:
        env["SYMFONIC_SUITE_SAVERS"] = args.savers
    started = time.monotonic()
    print(f"== LangGraph {tree.name.split('-', 1)[1]}'s tests in {tree}: {' '.join(command[3:])}", flush=True)
    run = subprocess.run(command, cwd=tree, env=env, check=False)
    took = time.monotonic() - started
    if run.returncode not in (0, 1) or not report.exists():
        print(f"the suite did not run (pytest exit {run.returncode})")
        return 2
    by_test, regressions = compare(report)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for savers in by_test.values():
        for saver, outcome in savers.items():
            counts[saver][outcome] += 1
    print(f"== {len(by_test)} checkpointer tests in {took:.0f} s; per saver:")
    for saver in sorted(counts):
        print(f"   {saver:22} " + ", ".join(f"{n} {o}" for o, n in sorted(counts[saver].items())))
    if regressions:
        print(f"== {len(regressions)} pass with LangGraph's savers and fail with the store's:")
        for test, saver in regressions:
            print(f"   {test}  [{saver}]")
        return 1
    print("== none passes with LangGraph's savers and fails with the store's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
