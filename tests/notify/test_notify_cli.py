"""``symfonic-store notify`` (SPEC §14): exit codes (0 ran, 1 store unreachable, 2 bad
config naming the field), ``status`` showing scheme and host only, ``retry`` and ``enable``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_cli
from factories import mint
from notify_rig import hook_config, http_receiver, write_config, write_secret

from symfonic_store import InterruptStore
from symfonic_store.errors import InvalidInputError
from symfonic_store.notify import parse_config


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"subscriptions": []}, "subscriptions"),
        ({"subscriptions": [{"name": "x", "apprise": "json://h/", "colour": 1}]}, "subscriptions[0].colour"),
        ({"subscriptions": [{"name": "", "apprise": "json://h/"}]}, "subscriptions[0].name"),
        ({"subscriptions": [{"name": "x"}]}, "subscriptions[0]"),
        ({"subscriptions": [{"name": "x", "events": "interrupt.*", "apprise": "json://h/"}]}, "subscriptions[0].events"),
        ({"subscriptions": [{"name": "x", "webhook": {"url": "ftp://h/", "secret_file": "s"}}]}, "subscriptions[0].webhook.url"),
        ({"subscriptions": [{"name": "x", "webhook": {"url": "https://h/", "secret_file": "missing"}}]}, "subscriptions[0].webhook.secret_file"),
        ({"retry": {"max_tries": 0}, "subscriptions": [{"name": "x", "apprise": "json://h/"}]}, "retry.max_tries"),
        ({"retry": {"backoff_seconds": [5, 1]}, "subscriptions": [{"name": "x", "apprise": "json://h/"}]}, "retry.backoff_seconds"),
        ({"subscriptions": [{"name": "x", "apprise": "json://h/", "retry": {"max_age_seconds": "1d"}}]}, "subscriptions[0].retry.max_age_seconds"),
        ({"subscriptions": [{"name": "x", "apprise": "json://h/", "tenants": "acme"}]}, "subscriptions[0].tenants"),
        ({"subscriptions": [{"name": "x", "apprise": "json://h/"}, {"name": "x", "apprise": "json://h/"}]}, "subscriptions[1].name"),
    ],
)
def test_a_bad_config_is_exit_2_naming_the_field(tmp_path: Path, config: dict[str, Any], field: str, migrated_sqlite_url: str) -> None:
    """Each wrong key is refused before anything runs, the message naming it."""
    path = write_config(tmp_path, config)
    result = run_cli("notify", "--config", str(path), "--once", db=migrated_sqlite_url)
    assert result.returncode == 2
    assert f"invalid notify config {field}:" in result.stderr


def test_the_spec_example_config_parses_with_per_subscription_retry(tmp_path: Path) -> None:
    """§14's example: global retry, a subscription's own retry overriding only what it names, tenants accepted."""
    write_secret(tmp_path)
    config = parse_config({
        "retry": {"max_tries": 10, "max_age_seconds": 86400, "backoff_seconds": [1, 600]},
        "subscriptions": [
            {"name": "finance", "events": ["interrupt.minted", "interrupt.escalated"], "interrupts": ["refund_*"],
             "tenants": ["acme"], "apprise": "slack://T1/B1/C1"},
            {"name": "erp", "events": ["*"], "webhook": {"url": "https://erp.example/hook", "secret_file": "hook.secret"},
             "retry": {"max_tries": 3}},
        ],
    }, base=tmp_path)
    finance, erp = config.subscriptions
    assert finance.tenants == ("acme",) and finance.retry.max_tries == 10
    assert (erp.retry.max_tries, erp.retry.max_age_seconds, erp.retry.backoff_cap) == (3, 86400, 600)
    assert [erp.retry.delay(n) for n in (1, 2, 3, 10, 11)] == [1, 2, 4, 512, 600]
    assert finance.matches("interrupt.minted", "refund_1", "acme")
    assert not finance.matches("interrupt.minted", "refund_1", None)  # minted without a tenant
    assert not finance.matches("interrupt.minted", "wire", "acme")
    with pytest.raises(InvalidInputError, match="NAME"):
        config.get("nobody")


def test_once_exits_0_after_running_and_counts_failures(store: InterruptStore, migrated_url: str, tmp_path: Path) -> None:
    """--once with a failing receiver: exit 0, the failure counted; status lists it, the URL's secret never printed."""
    with http_receiver() as receiver:
        receiver.answer = lambda r: 500
        mint(store, "t-1")
        url = receiver.url + "?token=SUPERSECRETTOKEN"
        path = write_config(tmp_path, hook_config(tmp_path, url))
        result = run_cli("notify", "--config", str(path), "--once", "--from-start", db=migrated_url)
        assert result.returncode == 0, result.stderr
        assert "failed 1" in result.stdout
        status = run_cli("notify", "status", "--config", str(path), "--format", "json", db=migrated_url)
        table = run_cli("notify", "status", "--config", str(path), db=migrated_url)
    assert status.returncode == 0 and table.returncode == 0
    (row,) = json.loads(status.stdout)
    assert row["target"] == "http://127.0.0.1" and row["failed"] == 1 and row["state"].startswith("retrying")
    for text in (status.stdout, table.stdout, result.stdout, result.stderr):
        assert "SUPERSECRETTOKEN" not in text


def test_once_exits_1_when_the_store_cannot_be_reached(tmp_path: Path) -> None:
    """Nothing listens at the database's address: exit 1, one line saying it could not run."""
    path = write_config(tmp_path, hook_config(tmp_path, "http://127.0.0.1:9/hook"))
    result = run_cli("notify", "--config", str(path), "--once", db="postgresql+psycopg://u:pw@127.0.0.1:1/none")
    assert result.returncode == 1
    assert "could not run" in result.stderr and "pw" not in result.stderr.replace("psycopg", "")


def test_retry_and_enable_from_the_command_line(store: InterruptStore, migrated_url: str, tmp_path: Path) -> None:
    """A dead letter is re-sent by `notify retry NAME`; a 410-disabled subscription resumes with `notify enable NAME`."""
    with http_receiver() as receiver:
        answers = iter([500, 410])
        receiver.answer = lambda r: next(answers, 200)
        mint(store, "t-1")
        mint(store, "t-2")
        path = write_config(tmp_path, hook_config(tmp_path, receiver.url, retry={"max_tries": 1}))
        assert run_cli("notify", "--config", str(path), "--once", "--from-start", db=migrated_url).returncode == 0
        (row,) = json.loads(run_cli("notify", "status", "--config", str(path), "--format", "json", db=migrated_url).stdout)
        assert row["state"] == "disabled" and [d["thread_id"] for d in row["dead_letters"]] == ["t-1"]
        resent = run_cli("notify", "retry", "erp", "--config", str(path), db=migrated_url)
        assert resent.returncode == 0 and "re-sent 1" in resent.stdout
        enabled = run_cli("notify", "enable", "erp", "--config", str(path), db=migrated_url)
        assert enabled.returncode == 0 and "erp: enabled" in enabled.stdout
        assert run_cli("notify", "--config", str(path), "--once", db=migrated_url).returncode == 0
        (row,) = json.loads(run_cli("notify", "status", "--config", str(path), "--format", "json", db=migrated_url).stdout)
        threads = [r.json()["data"]["thread_id"] for r in receiver.requests]
    assert threads == ["t-1", "t-2", "t-1", "t-2"]
    assert row["state"] == "ok" and row["dead_letters"] == [] and row["delivered"] == 2
    unknown = run_cli("notify", "retry", "nobody", "--config", str(path), db=migrated_url)
    assert unknown.returncode == 2 and "no subscription 'nobody'" in unknown.stderr


def test_a_lease_shorter_than_a_timeout_is_refused(store: InterruptStore, tmp_path: Path) -> None:
    """A send could outlast the lease and another process send the same event at once: refused, naming lease_seconds."""
    from symfonic_store.notify import Notifier

    config = hook_config(tmp_path, "http://127.0.0.1:9/hook")
    with pytest.raises(InvalidInputError, match="lease_seconds.*10 s"):
        Notifier(store, config, lease_seconds=10)
    Notifier(store, config, lease_seconds=11).close()


def test_without_the_extra_the_error_says_what_to_install(
    store: InterruptStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """standardwebhooks missing: making a Notifier raises ImportError naming the notify extra."""
    import sys

    from symfonic_store.notify import Notifier

    monkeypatch.setitem(sys.modules, "standardwebhooks", None)
    with pytest.raises(ImportError, match=r"pip install '\.\[notify\]' in a checkout"):
        Notifier(store, hook_config(tmp_path, "http://127.0.0.1:9/hook"))


def test_from_start_rewinds_an_existing_subscription_and_says_so(store: InterruptStore, migrated_url: str, tmp_path: Path) -> None:
    """notify --from-start on a subscription whose cursor is at the log's end delivers the log again from its start, saying on stderr that it rewound; a run without it then delivers nothing more."""
    mint(store, "t-1")
    mint(store, "t-2")
    with http_receiver() as receiver:
        path = write_config(tmp_path, hook_config(tmp_path, receiver.url))
        first = run_cli("notify", "--config", str(path), "--once", db=migrated_url)
        assert first.returncode == 0 and "delivered 0" in first.stdout  # made at the log's end
        again = run_cli("notify", "--config", str(path), "--once", "--from-start", db=migrated_url)
        assert again.returncode == 0, again.stderr
        sent = [r.json() for r in receiver.wait_for(2)]
        assert "delivered 2" in again.stdout
        assert "erp rewound to the log's start" in again.stderr and "position 2" in again.stderr
        after = run_cli("notify", "--config", str(path), "--once", db=migrated_url)
    assert "delivered 0" in after.stdout and "rewound" not in after.stderr
    assert [m["data"]["thread_id"] for m in sent] == ["t-1", "t-2"]
