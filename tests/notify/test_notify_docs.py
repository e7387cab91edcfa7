"""docs/notify.md is true: its configs parse (and Apprise reads each of its URLs), and its
receiver snippet verifies a real delivery and drops the duplicate."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from factories import mint
from notify_rig import SECRET, http_receiver, write_config, write_secret

from symfonic_store import InterruptStore
from symfonic_store.notify import Notifier, parse_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "notify.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text(encoding="utf-8")) if lang == language]


def test_the_docs_configs_parse_and_apprise_reads_every_url(tmp_path: Path, store: InterruptStore) -> None:
    """Each JSON block of the page is a valid config; a Notifier over it accepts every Apprise URL (nothing is sent)."""
    configs = [json.loads(b) for b in blocks("json")]
    assert len(configs) == 2
    (tmp_path / "erp.secret").write_text(SECRET)
    for config in configs:
        parsed = parse_config(config, base=tmp_path)
        with Notifier(store, parsed):
            pass


def test_the_receiver_snippet_verifies_a_delivery_and_drops_its_duplicate(
    tmp_path: Path, store: InterruptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's receiver.py, run on what the notifier sent: the event once, then None for the same webhook-id, and an error for a forged body."""
    (snippet,) = [b for b in blocks("python") if b.startswith("# receiver.py")]
    monkeypatch.setenv("SYMFONIC_WEBHOOK_SECRET", SECRET)
    scope: dict[str, Any] = {}
    exec(compile(snippet, "receiver.py", "exec"), scope)
    mint(store, "t-1", name="refund_large")
    with http_receiver() as receiver:
        config = write_config(tmp_path, {"subscriptions": [
            {"name": "erp", "webhook": {"url": receiver.url, "secret_file": str(write_secret(tmp_path))}}]})
        with Notifier(store, config, from_start=True) as n:
            n.run_once()
        (request,) = receiver.requests
    event = scope["receive"](request.body, request.headers)
    assert event["type"] == "interrupt.minted" and event["data"]["name"] == "refund_large"
    assert scope["receive"](request.body, request.headers) is None
    with pytest.raises(Exception, match="signature"):
        scope["receive"](request.body.replace(b"refund_large", b"refund_small"), {**request.headers, "webhook-id": "msg_other"})
