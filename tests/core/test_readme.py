"""The README's and the docs pages' Python snippets run as written, so what they say stays true.

A snippet runs as is, in an empty folder, in a fresh namespace; or its first line says which
snippet it continues (``# continues payments.py``), and it runs after that one (and whatever
that one continues) in the same namespace. Each ``print(...)  # shown`` line prints ``shown``.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The pages whose snippets follow the rule (service.md, reliability.md, evidence.md and
# benchmarks.md show their Python as excerpts of programs described there).
PAGES = ("README.md", "docs/langgraph.md", "docs/marker-protocol.md", "docs/audit.md", "docs/operations.md", "docs/cli.md")
TEST_COMMAND = "python -m pytest -n 2 --dist loadfile"  # .ci/run runs it as the README says

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
NAMED = re.compile(r"# (\S+\.py)\b")
CONTINUES = re.compile(r"# continues (\S+\.py)\b")
PRINTED = re.compile(r"^\s*print\(.*\)\s+# (?!e\.g\.)(.+)$", re.M)


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    code: str

    @property
    def first_line(self) -> str:
        return self.code.split("\n", 1)[0]

    @property
    def name(self) -> str | None:
        found = NAMED.match(self.first_line)
        return found.group(1) if found else None

    @property
    def continues(self) -> str | None:
        found = CONTINUES.match(self.first_line)
        return found.group(1) if found else None

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def fenced(page: str) -> list[tuple[str, int, str]]:
    """Each fenced block of a page: its language, the line of its first code line, its text."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(m.group(1), text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in FENCE.finditer(text)]


def snippets(pages: tuple[str, ...] = PAGES) -> list[Snippet]:
    return [Snippet(page, line, code) for page in pages for lang, line, code in fenced(page) if lang == "python"]


def python_blocks() -> list[str]:
    """The README's Python snippets, in order."""
    return [s.code for s in snippets(("README.md",))]


def chain(snippet: Snippet) -> list[Snippet]:
    """The snippets to run for this one, first to last: what it continues, then itself."""
    by_name = {s.name: s for s in snippets() if s.name}
    runs = [snippet]
    while runs[0].continues:
        runs.insert(0, by_name[runs[0].continues])
    return runs


ALL = snippets()


def test_every_snippet_runs_as_is_or_names_the_one_it_continues() -> None:
    """Names are unique; a continued name exists, comes earlier, and the chain ends in a snippet that runs as is."""
    names = [s.name for s in ALL if s.name]
    assert len(names) == len(set(names)), names
    order = {str(s): i for i, s in enumerate(ALL)}
    for snippet in ALL:
        if snippet.continues is None:
            continue
        continued = [s for s in ALL if s.name == snippet.continues]
        assert len(continued) == 1, f"{snippet} continues {snippet.continues}, which no snippet names"
        assert order[str(continued[0])] < order[str(snippet)], f"{snippet} continues a later snippet"
        assert chain(snippet)[0].continues is None


@pytest.mark.parametrize("snippet", ALL, ids=str)
def test_snippet_runs_as_written_and_prints_what_it_shows(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The snippet runs in an empty folder (after the ones it continues); each `print(...)  # shown` prints `shown`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYMFONIC_STORE_URL", raising=False)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    for step in chain(snippet):
        capsys.readouterr()  # only the snippet's own output is compared
        exec(compile(step.code, str(ROOT / step.page), "exec"), namespace)
    printed = [line.strip() for line in capsys.readouterr().out.splitlines()]
    for shown in PRINTED.findall(snippet.code):
        assert shown.strip() in printed, (shown, printed)


def test_the_snippets_say_what_they_print() -> None:
    """The checks above have something to check: the paths' key results are claimed in print comments."""
    claimed = {str(s): PRINTED.findall(s.code) for s in ALL}
    everything = [line for lines in claimed.values() for line in lines]
    for shown in (
        "wire_approval {'amount': 999, 'name': 'wire_approval'}",   # the gateway
        "[999] alice",
        "dave",                                                     # store.checkpointer()
        "The approver said: {\"approved\": true}",                   # the marker protocol
        "escalate recorded agent",                                  # a decisions function
        "[('alice', 'approve'), ('bob', 'reject')]",               # HITL middleware
        "carol",                                                    # the recording checkpointer
    ):
        assert any(line.strip() == shown for line in everything), shown


def test_readme_starts_from_the_users_path() -> None:
    """What it is, then the table of paths, then the two commands, then each path, in that order."""
    text = README.read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    order = [
        "## Which one is yours",
        "## Try it",
        "## Run the tests",
        "## You call `interrupt()` in your own process",
        "## You serve with the Agent Server",
        "## You write the seed's marker protocol",
    ]
    assert [h for h in headings if h in order] == order
    table = text.split("## Which one is yours", 1)[1].split("## Try it", 1)[0]
    for use in ("InterruptGateway(graph, store)", "store.checkpointer()", "langgraph.json", "create_interrupt_node(store)"):
        assert use in table, use
    assert "symfonic-store demo" in text.split("## Try it", 1)[1].split("## Run the tests", 1)[0]
    assert TEST_COMMAND in text.split("## Run the tests", 1)[1].split("## ", 1)[0]


def test_readme_has_the_wiring_example() -> None:
    """The README shows a graph wired with the store's node and router, and the gateway around a plain graph."""
    blocks = python_blocks()
    assert any("make_interrupt_router(store)" in b and "create_interrupt_node(store)" in b for b in blocks)
    assert any("InterruptGateway(graph, store)" in b for b in blocks)
    assert any("store.checkpointer()" in b for b in blocks)


def test_the_agent_server_config_is_json_not_a_python_snippet() -> None:
    """The `langgraph.json` of the Agent Server path is shown as JSON (it is not run) and parses."""
    (config,) = [code for lang, _, code in fenced("README.md") if lang == "json"]
    path = json.loads(config)["checkpointer"]["path"]
    # The dotted form the server loads names the factory the package ships.
    module, _, attr = path.rpartition(".")
    assert callable(getattr(importlib.import_module(module), attr))
    assert not any("langgraph.json" in s.code or '"checkpointer"' in s.code for s in ALL)


def test_the_graph_module_only_builds_the_graph(tmp_path: Path) -> None:
    """The `--graph` module of docs/operations.md runs nothing on import: `sweep --format json` prints only JSON."""
    (block,) = [s.code for s in snippets(("docs/operations.md",)) if s.code.startswith("# refund_agent/app.py")]
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


def test_the_command_line_block_runs_on_the_snippets_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's commands "on the same database" run on what payments.py and the every-path snippet left there."""
    text = README.read_text(encoding="utf-8")
    after = text.split("From the command line, on the same database:", 1)[1]
    (block,) = [code for lang, _, code in fenced("README.md") if lang == "bash" and after.lstrip().startswith(f"```bash\n{code}")]
    commands = [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    assert commands and all(c[0] == "symfonic-store" for c in commands)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    every_path = next(s for s in ALL if s.page == "README.md" and "store.list_pending()" in s.code)
    for step in chain(every_path):
        exec(compile(step.code, str(ROOT / step.page), "exec"), namespace)
    capsys.readouterr()
    env = {k: v for k, v in os.environ.items() if k != "SYMFONIC_STORE_URL"}
    outputs = []
    for command in commands:
        done = subprocess.run(
            [sys.executable, "-m", "symfonic_store.cli", *command[1:]],
            cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
        )
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    pending, sweep, audit, replay, verify = outputs
    assert "pay-5" in pending and "sweep expired 0" in sweep and "alice" in audit
    assert "interrupt.resumed" in replay and "all hash chains hold" in verify
