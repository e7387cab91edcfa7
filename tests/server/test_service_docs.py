"""docs/service.md stays true: every `serve` flag is documented, and the metrics it lists
are the ones /metrics serves (the app in this process, through Starlette's test client)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import typer
from starlette.testclient import TestClient

from symfonic_store import InterruptStore
from symfonic_store.cli.main import app
from symfonic_store.server import TokenAuth, create_app

DOC = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text(encoding="utf-8")


def test_every_serve_flag_is_documented() -> None:
    """Each option of `symfonic-store serve` appears in docs/service.md."""
    command = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    flags = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")}
    assert len(flags) > 15
    assert sorted(f for f in flags if f not in DOC and f != "--help") == []


def test_the_documented_metrics_are_the_served_ones(tmp_path: Path) -> None:
    """The metric names in docs/service.md's table are exactly the families /metrics exposes."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"ops": {"token_sha256": hashlib.sha256(b"t").hexdigest(), "roles": []}}))
    with InterruptStore(url) as store:
        store.setup()
        client = TestClient(create_app(store, auth=TokenAuth(tokens)))
        text = client.get("/metrics", headers={"Authorization": "Bearer t"}).text
    served = set(re.findall(r"^# TYPE (symfonic_\w+) ", text, flags=re.MULTILINE))
    exposed = {name for name in served if not name.endswith("_created")}
    documented = set(re.findall(r"^\| `(symfonic_\w+)", DOC, flags=re.MULTILINE))
    assert documented == exposed
