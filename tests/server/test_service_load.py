"""The service under 50 concurrent clients, against a real server process, on SQLite and
PostgreSQL: no errors, and every answer recorded exactly once -- counts, not times.

Fifty clients (asyncio, one keep-alive connection each, ten principals) read the inbox
and race each other to answer the same interrupts, three answers per interrupt, with the
rate limits off. Every response must be a 200 (a read, the one admitted answer) or a 409
naming the winner; no 5xx, no dropped connection; the log must hold exactly one answer
per interrupt, recorded with the principal whose request got the 200.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_rig import BACKENDS, answer_path, digest_of, mint, serve, served_database, write_tokens

from symfonic_store import InterruptStore
from symfonic_store.events import RESUMED

CLIENTS = 50
INTERRUPTS = 40
ANSWERS_EACH = 3
PRINCIPALS = {f"approver{n}": (f"token-load-{n}", ["approver"]) for n in range(10)}


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served_database(request, tmp_path_factory)


async def _load(url: str, work: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str, int, Any]]:
    """Run ``work`` -- (kind, principal, thread, interrupt or digest) -- from CLIENTS
    clients at once; each result is (kind, principal, thread, interrupt, status, body)."""
    queue = iter(work)
    results: list[tuple[str, str, str, str, int, Any]] = []
    start = asyncio.Event()

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=120,
                                     limits=httpx.Limits(max_connections=1)) as http:
            await http.get("/healthz")  # connected before the race starts
            await start.wait()
            for kind, who, thread_id, interrupt_id, digest in queue:
                headers = {"Authorization": f"Bearer {PRINCIPALS[who][0]}"}
                if kind == "read":
                    r = await http.get("/api/interrupts", headers=headers)
                else:
                    r = await http.post(answer_path(thread_id, interrupt_id), headers=headers,
                                        json={"response": {"approved": True}, "digest": digest})
                results.append((kind, who, thread_id, interrupt_id, r.status_code, r.json()))

    tasks = [asyncio.create_task(client(n)) for n in range(CLIENTS)]
    await asyncio.sleep(0)  # sleep-ok: one turn of the loop, so every client waits at the start line
    start.set()
    await asyncio.gather(*tasks)  # a dropped connection raises here and fails the test
    return results


def test_fifty_clients_get_no_errors_and_each_answer_is_recorded_once(served_db: str, tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.json", PRINCIPALS)
    names = sorted(PRINCIPALS)
    with InterruptStore(served_db) as store:
        prefix = f"load-{uuid.uuid4().hex[:8]}"
        targets = []
        for n in range(INTERRUPTS):
            thread_id = f"{prefix}/{n}"
            interrupt_id = mint(store, thread_id, amount=n)
            targets.append((thread_id, interrupt_id, digest_of(store, thread_id, interrupt_id)))
        # Each interrupt's answers are spread through the run, among reads, from
        # different principals, so they meet on the server while others read.
        work: list[tuple[str, str, str, str, str]] = []
        for round_ in range(ANSWERS_EACH):
            for n, (thread_id, interrupt_id, digest) in enumerate(targets):
                work.append(("answer", names[(n + round_) % len(names)], thread_id, interrupt_id, digest))
                work.append(("read", names[n % len(names)], "", "", ""))
        with serve(served_db, "--tokens", str(tokens), "--rate-limit", "off") as server:
            results = asyncio.run(_load(server.url, work))
        statuses = Counter((kind, status) for kind, _, _, _, status, _ in results)
        assert statuses == {
            ("read", 200): INTERRUPTS * ANSWERS_EACH,
            ("answer", 200): INTERRUPTS,
            ("answer", 409): INTERRUPTS * (ANSWERS_EACH - 1),
        }, (statuses, server.logs())
        winners = {(t, i): who for kind, who, t, i, status, _ in results if kind == "answer" and status == 200}
        assert len(winners) == INTERRUPTS
        for kind, _, t, i, status, body in results:
            if kind == "answer" and status == 200:
                assert body["outcome"] == "resumed" and body["actor"] == winners[(t, i)]
            elif kind == "answer":
                assert body["resolved_by"] == winners[(t, i)]
        for thread_id, interrupt_id, _ in targets:
            answers = [e for e in store.history(thread_id) if e.type == RESUMED]
            assert len(answers) == 1, (thread_id, answers)
            assert answers[0].interrupt_id == interrupt_id
            assert answers[0].actor == winners[(thread_id, interrupt_id)]
            assert answers[0].data["authenticated_by"] == "service:tokens"
        assert not [p for p in store.list_pending() if str(p["thread_id"]).startswith(prefix)]
