"""``symfonic-store demo``: the scripted refund agent end to end, offline, on its own SQLite file."""

from __future__ import annotations

import time
from pathlib import Path

from cli_helpers import mint_stale, run_cli

from symfonic_store import InterruptStore


def test_demo_runs_twice_adding_threads_and_never_touches_symfonic_store_url(tmp_path: Path) -> None:
    """Two demo runs finish quickly, tell the story, add new threads, and ignore SYMFONIC_STORE_URL."""
    production = tmp_path / "production.db"
    env = {"SYMFONIC_STORE_URL": f"sqlite:///{production}"}
    for _ in range(2):
        started = time.monotonic()
        result = run_cli("demo", env=env, cwd=tmp_path)
        elapsed = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        assert elapsed < 30, f"the demo took {elapsed:.1f}s"
        for word in ("alice", "bob", "expired", "timed out", "Done: refunded", "rejected", "replay of thread"):
            assert word in result.stdout, word

    assert not production.exists()
    demo_store = InterruptStore(f"sqlite:///{tmp_path / 'symfonic_demo.db'}")
    records = demo_store.audit()
    assert len(records) == len({r.thread_id for r in records}) == 6
    assert sorted((r.outcome, r.actor or "") for r in records) == sorted(
        [("resumed", "alice"), ("resumed", "bob"), ("expired", "")] * 2
    )
    assert {r.reason for r in records if r.outcome == "expired"} == {"ttl"}
    assert demo_store.verify().ok
    assert demo_store.list_pending() == []
    demo_store.close()


def test_demo_uses_db_when_given(tmp_path: Path) -> None:
    """--db points the demo at another SQLite file; the default file is not created."""
    target = tmp_path / "elsewhere" / "my_demo.db"
    result = run_cli("demo", db=f"sqlite:///{target}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "symfonic_demo.db").exists()
    with InterruptStore(f"sqlite:///{target}") as store:
        assert len(store.audit()) == 3


def test_demo_never_writes_to_threads_it_did_not_create(migrated_url: str, tmp_path: Path) -> None:
    """`demo --db URL` on a store holding other threads leaves their pending interrupts, even a stale one, and their owed wake-ups untouched."""
    with InterruptStore(migrated_url) as store:
        store.setup()
        fresh = mint_stale(store, "prod-fresh", age=1)
        stale = mint_stale(store, "prod-stale", age=86_400)
        mint_stale(store, "prod-owed", age=86_400)
        assert store.sweep(ttl_seconds=60, thread_ids=["prod-owed"]).owed == 1
        before = {t: store.history(t) for t in ("prod-fresh", "prod-stale", "prod-owed")}

    result = run_cli("demo", db=migrated_url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr

    with InterruptStore(migrated_url) as store:
        assert {t: store.history(t) for t in before} == before
        waiting = {p["thread_id"]: p["interrupt_id"] for p in store.list_pending()}
        assert waiting == {"prod-fresh": fresh, "prod-stale": stale}
        demo_records = [r for r in store.audit() if not r.thread_id.startswith("prod-")]
        assert sorted(r.outcome for r in demo_records) == ["expired", "resumed", "resumed"]
        # The demo's sweep neither delivered nor settled the other thread's wake-up.
        assert store.sweep(ttl_seconds=86_400 * 2, dry_run=True).owed == 1
