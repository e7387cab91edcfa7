"""``GET /api/audit`` from many clients at once, each principal with its own tenants,
against a real server process on SQLite and PostgreSQL: every answer is 200 and shows
exactly the principal's records and their refused answers.

A scoped audit's statements used to be built per call and compiled by the fast path
under their ``id()``: once one was freed, another statement on its address ran its SQL
(a 500, or another scope's rows).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import marker
from service_rig import BACKENDS, serve, served_database

from symfonic_store import InterruptAlreadyResolvedError, InterruptStore

TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")
# Every set of one to three tenants, and a principal without any (the untenanted only).
SCOPES: dict[str, frozenset[str | None]] = {
    f"p{k}": frozenset(c)
    for k, c in enumerate(c for n in (1, 2, 3) for c in itertools.combinations(TENANTS, n))
}
SCOPES["plain"] = frozenset({None})


@pytest.fixture(scope="module", params=BACKENDS)
def served_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served_database(request, tmp_path_factory)


def _write_tokens(path: Path) -> Path:
    path.write_text(json.dumps({
        name: {
            "token_sha256": hashlib.sha256(f"token-{name}".encode()).hexdigest(),
            "roles": [],
            "tenants": sorted(t for t in scope if t is not None),
        }
        for name, scope in SCOPES.items()
    }))
    return path


def test_many_clients_each_get_exactly_their_tenants_audit(served_db: str, tmp_path: Path) -> None:
    with InterruptStore(served_db) as store:
        for tenant in (*TENANTS, None):
            thread, interrupt = f"t-{tenant}", f"i-{tenant}"
            store.mint(thread, marker(interrupt), actor="agent", tenant=tenant)
            store.resume(thread, interrupt, {"ok": True}, actor="alice")
            with pytest.raises(InterruptAlreadyResolvedError):
                store.resume(thread, interrupt, {"ok": True}, actor="bob")
    wrong: list[Any] = []
    names = sorted(SCOPES)
    with serve(served_db, "--tokens", str(_write_tokens(tmp_path / "tokens.json")),
               "--rate-limit", "off", cwd=tmp_path) as server:

        def client(k: int) -> None:
            try:
                for j in range(40):
                    name = names[(k * 7 + j) % len(names)]
                    with server.client(f"token-{name}") as http:
                        response = http.get("/api/audit")
                    if response.status_code != 200:
                        wrong.append((name, response.status_code, response.text[:200]))
                        continue
                    got = {(r["thread_id"], r["tenant"], tuple(a["actor"] for a in r["attempts"]))
                           for r in response.json()["items"]}
                    want = {(f"t-{t}", t, ("bob",)) for t in SCOPES[name]}
                    if got != want:
                        wrong.append((name, got))
            except Exception as exc:  # a client's failure fails the test, not only its thread
                wrong.append(repr(exc))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert wrong == [], server.logs()[-2000:]
