"""Benchmark 11 -- the approval service under load: 200 concurrent clients on loopback.

The real service (``symfonic-store serve``, rate limits off, 20 principals with bearer
tokens) runs as its own uvicorn process on a store seeded with pending interrupts; an
asyncio HTTP client (httpx) keeps 200 clients busy with a mix of inbox reads
(``GET /api/interrupts``, the first page) and answers (``POST .../answer``, each to an
interrupt of its own). Figures: p50 and p99 latency, errors, connection resets and
throughput, on SQLite and (when a server is named) PostgreSQL. Targets (SPEC §16): no
errors, no connection resets, p99 within 5x p50.

The peer, run in the same rounds (``paired``, ABBA) with the same client and the same
mix, is a plain Starlette app in its own uvicorn process on the same database: its inbox
read runs the same SQL as the service's first page (the open seed markers and the open
LangGraph interrupts, oldest first, ``LIMIT`` one past the page) on a pooled SQLAlchemy
connection in a sync endpoint (Starlette's thread pool); its answer is one durable
``INSERT`` into a table of its own keyed on (thread, interrupt) -- exactly once by a
unique key, with none of the store's checks (the digest, the hash chain, the projection,
the decision). No authentication. The ratio is the service's throughput over the peer's,
the median of the per-round ratios.

    python -m bench service [--quick]
    python -m bench.service_load [--quick] [--clients 200] [--requests 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.bulk_load import ThreadSpec, load
from bench.harness import paired, parser, postgres_schema, report, say, scratch_dir
from symfonic_store import InterruptStore

PRINCIPALS = 20
ANSWER_EVERY = 5
"""One request in five is an answer, the others inbox reads (an inbox is read far more
often than it is answered)."""
START_TIMEOUT = 90
PEER_TABLE = "bench_peer_answers"
READY = "listening on "


# --- the peer: a plain Starlette app running the same query ----------------------------


def peer_app(url: str) -> Any:
    """A plain Starlette app: the inbox's first page by the same SQL, and a plain answer."""
    import sqlalchemy as sa
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from symfonic_store.db.schema import open_interrupts, threads

    sqlite = sa.make_url(url).get_backend_name() == "sqlite"
    # What a plain app does on SQLite with writers: a busy timeout, and writes that take
    # the lock at BEGIN rather than upgrading a read (which deadlocks).
    engine = sa.create_engine(url, **({"connect_args": {"timeout": 5.0, "isolation_level": None}} if sqlite else {}))
    if sqlite:

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")

    answers = sa.Table(
        PEER_TABLE, sa.MetaData(),
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("interrupt_id", sa.String(255), primary_key=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("answered_at", sa.Float(), nullable=False),
    )
    answers.metadata.create_all(engine)

    def inbox(request: Request) -> JSONResponse:
        limit = 51
        with engine.connect() as conn:
            markers = conn.execute(
                sa.select(threads.c.thread_id, threads.c.pending, threads.c.pending_since)
                .where(threads.c.pending_interrupt_id.is_not(None))
                .order_by(threads.c.pending_since, threads.c.thread_id)
                .limit(limit)
            ).all()
            natives = conn.execute(
                sa.select(open_interrupts.c.thread_id, open_interrupts.c.interrupt_id,
                          open_interrupts.c.name, open_interrupts.c.payload,
                          open_interrupts.c.minted_at)
                .order_by(open_interrupts.c.minted_at, open_interrupts.c.thread_id,
                          open_interrupts.c.interrupt_id)
                .limit(limit)
            ).all()
        items = [
            {"thread_id": r.thread_id, "interrupt_id": r.pending["interrupt_id"],
             "name": r.pending.get("name"), "payload": r.pending.get("payload"),
             "minted_at": r.pending_since}
            for r in markers
        ] + [
            {"thread_id": r.thread_id, "interrupt_id": r.interrupt_id, "name": r.name,
             "payload": r.payload, "minted_at": r.minted_at}
            for r in natives
        ]
        items.sort(key=lambda i: (i["minted_at"] or 0.0, i["thread_id"], i["interrupt_id"]))
        return JSONResponse({"items": items[:50], "next": None})

    async def answer(request: Request) -> JSONResponse:
        body = await request.json()
        thread_id, interrupt_id = request.path_params["thread"], request.path_params["interrupt"]

        def write() -> None:
            with engine.connect() as conn:
                conn.info["write"] = True
                try:
                    with conn.begin():
                        conn.execute(answers.insert().values(
                            thread_id=thread_id, interrupt_id=interrupt_id, actor="peer",
                            response=body.get("response"), answered_at=time.time(),
                        ))
                finally:
                    conn.info.pop("write", None)

        from starlette.concurrency import run_in_threadpool

        try:
            await run_in_threadpool(write)
        except sa.exc.IntegrityError:
            return JSONResponse({"error": "already answered"}, status_code=409)
        return JSONResponse({"outcome": "resumed"})

    return Starlette(routes=[
        Route("/inbox", inbox, methods=["GET"]),
        Route("/answer/{thread}/{interrupt}", answer, methods=["POST"]),
    ])


def serve_peer(url: str) -> None:
    """Run the peer on a free loopback port (a child process of the benchmark)."""
    import socket

    import uvicorn

    app = peer_app(url)
    # IPPROTO_TCP named, so asyncio sets TCP_NODELAY on the accepted connections.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, access_log=False, log_level="warning", server_header=False,
                            timeout_graceful_shutdown=5)
    sock.listen(config.backlog)
    print(f"{READY}http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


# --- the processes -------------------------------------------------------------------


@contextmanager
def process(command: list[str], marker: str) -> Iterator[str]:
    """Run ``command`` until the block ends; yields the URL of the line holding ``marker``."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "NO_PROXY": "*"})
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []

    def pump(stream: Any, sink: Any) -> None:
        for line in iter(stream.readline, ""):
            sink(line)

    threading.Thread(target=pump, args=(child.stdout, lines.put), daemon=True).start()
    threading.Thread(target=pump, args=(child.stderr, log.append), daemon=True).start()
    try:
        try:
            ready = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            ready = ""
        if marker not in ready:
            raise RuntimeError(f"{command[2:5]} did not start: {ready!r}\n{''.join(log)}")
        yield ready.split(marker, 1)[1].split()[0].rstrip("/")
    finally:
        child.terminate()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=30)
        errors = [line for line in log if "Traceback" in line or "ERROR" in line]
        if errors:
            say(f"  ({command[2]} logged {len(errors)} error line(s); the last lines:\n{''.join(log[-12:])})")


def service_command(url: str, tokens: Path) -> list[str]:
    return [sys.executable, "-m", "symfonic_store.cli", "--db", url, "serve", "--port", "0",
            "--tokens", str(tokens), "--rate-limit", "off", "--no-access-log"]


# --- the clients ---------------------------------------------------------------------


RESETS = ("RemoteProtocolError", "ReadError", "WriteError", "ConnectError", "LocalProtocolError")


@dataclass
class Tally:
    """Per-request outcomes of one contender over the timed rounds."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {"read": [], "answer": []})
    statuses: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    resets: int = 0
    answered: int = 0
    requests: int = 0

    def all(self) -> list[float]:
        return self.latencies["read"] + self.latencies["answer"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Target:
    """Where one contender's requests go, and what answers it has left to send."""

    name: str
    base: str
    read_path: str
    answer_path: Any  # (thread_id, interrupt_id) -> str
    queue: list[tuple[str, str, str]]  # (thread_id, interrupt_id, digest), popped


async def run_batch(target: Target, tokens: list[str], clients: int, requests: int,
                    tally: Tally | None) -> None:
    """``requests`` requests from ``clients`` concurrent clients, each on a connection of its
    own (opened for the batch): one request in ANSWER_EVERY an answer."""
    import httpx

    work = iter(range(requests))

    async def one_client(c: int) -> None:
        async with httpx.AsyncClient(
            base_url=target.base, timeout=120, trust_env=False, verify=False,  # plain HTTP: no CA bundle to load
            headers={"Authorization": f"Bearer {tokens[c % len(tokens)]}"},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        ) as client:
            await requests_of(client, c)

    async def requests_of(client: Any, c: int) -> None:
        for n in work:
            kind = "answer" if n % ANSWER_EVERY == ANSWER_EVERY - 1 else "read"
            started = time.perf_counter()
            try:
                if kind == "read":
                    r = await client.get(target.read_path)
                else:
                    thread_id, interrupt_id, digest = target.queue.pop()
                    r = await client.post(
                        target.answer_path(thread_id, interrupt_id),
                        json={"response": {"approved": True}, "digest": digest},
                    )
                await r.aread()
                status: str = str(r.status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            elapsed = time.perf_counter() - started
            if tally is None:
                continue
            tally.requests += 1
            tally.statuses[status] += 1
            tally.latencies[kind].append(elapsed)
            if status == "200":
                tally.answered += kind == "answer"
            else:
                tally.errors += 1
                tally.resets += status in RESETS

    await asyncio.gather(*(one_client(c) for c in range(clients)))


def seed(url: str, count: int) -> list[tuple[str, str, str]]:
    """``count`` threads with one open interrupt each; returns (thread, interrupt, digest)."""
    from symfonic_store.server import interrupt_digest

    store = InterruptStore(url)
    store.setup()
    load(store, [ThreadSpec("inbox", count, 2, ending="pending")])
    open_ones = store.list_pending()
    store.close()
    assert len(open_ones) == count, (len(open_ones), count)
    return [(p["thread_id"], p["interrupt_id"],
             interrupt_digest(p["thread_id"], p["interrupt_id"], p["payload"])) for p in open_ones]


def tokens_file(folder: Path) -> tuple[Path, list[str]]:
    tokens = [secrets.token_urlsafe(24) for _ in range(PRINCIPALS)]
    data = {f"approver-{i:02d}": {"token_sha256": hashlib.sha256(t.encode()).hexdigest(), "roles": ["approver"]}
            for i, t in enumerate(tokens)}
    path = folder / "tokens.json"
    path.write_text(json.dumps(data))
    return path, tokens


def summary(tally: Tally, seconds: float) -> str:
    lat = tally.all()
    return (f"{tally.requests:,} requests in {seconds:.1f} s ({tally.requests / seconds:,.0f}/s); "
            f"p50 {percentile(lat, 0.5) * 1000:.0f} ms, p99 {percentile(lat, 0.99) * 1000:.0f} ms "
            f"(reads p50 {percentile(tally.latencies['read'], 0.5) * 1000:.0f} / p99 "
            f"{percentile(tally.latencies['read'], 0.99) * 1000:.0f} ms, answers p50 "
            f"{percentile(tally.latencies['answer'], 0.5) * 1000:.0f} / p99 "
            f"{percentile(tally.latencies['answer'], 0.99) * 1000:.0f} ms); "
            f"errors {tally.errors}, resets {tally.resets}; statuses {dict(tally.statuses)}")


def measure(label: str, url: str, folder: Path, *, clients: int, requests: int, rounds: int) -> None:
    answers_needed = (rounds + 1) * (requests // ANSWER_EVERY)
    say(f"  {label}: seeding {answers_needed + 500:,} open interrupts ...")
    seeded = seed(url, answers_needed + 500)
    tokens_path, tokens = tokens_file(folder)
    store = InterruptStore(url)
    with process(service_command(url, tokens_path), "serving the approval inbox on ") as svc_url, \
            process([sys.executable, "-m", "bench.service_load", "--peer", url], READY) as peer_url:
        targets = {
            "service": Target("service", svc_url, "/api/interrupts",
                              lambda t, i: f"/api/interrupts/{quote(t, safe='')}/{quote(i, safe='')}/answer",
                              list(reversed(seeded))),
            "peer": Target("peer", peer_url, "/inbox",
                           lambda t, i: f"/answer/{quote(t, safe='')}/{quote(i, safe='')}",
                           list(reversed(seeded))),
        }
        tallies = {name: Tally() for name in targets}

        def contender(name: str) -> Any:
            def batch(i: int) -> None:
                tally = tallies[name] if i >= 1 else None  # the first round warms up
                asyncio.run(run_batch(targets[name], tokens, clients, requests, tally))
            return batch

        batches = paired({name: contender(name) for name in targets}, rounds=rounds, warmup=1)
        left = len(store.list_pending())
    store.close()
    svc, peer = tallies["service"], tallies["peer"]
    answered_all = (rounds + 1) * (requests // ANSWER_EVERY)
    say(f"  {label} service: {summary(svc, batches.total('service'))}")
    say(f"  {label} peer:    {summary(peer, batches.total('peer'))}")
    recorded = len(seeded) - left
    say(f"  {label}: {recorded:,} interrupts answered in the store, "
        f"{answered_all:,} answers sent (warm-up included)")
    lat = svc.all()
    p50, p99 = percentile(lat, 0.5), percentile(lat, 0.99)
    clean = svc.errors == 0 and svc.resets == 0 and recorded == answered_all
    report("11 service", f"{clients} clients, errors and resets, {label}",
           f"{svc.errors} errors, {svc.resets} resets of {svc.requests:,} requests; "
           f"{recorded:,} answers recorded of {answered_all:,} sent",
           goal="0 and 0, each answer recorded once", met=clean)
    report("11 service", f"{clients} clients, p99 / p50, {label}",
           f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms", ratio=p99 / p50, at_most=5.0,
           goal="<= 5")
    report("11 service", f"{clients} clients, throughput vs a plain Starlette endpoint, {label}",
           f"{svc.requests / batches.total('service'):,.0f}/s vs {peer.requests / batches.total('peer'):,.0f}/s",
           ratio=batches.ratios("peer", "service"), goal="reported", met=None)


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--requests", type=int, help="requests per batch (default 1000; --quick 400)")
    p.add_argument("--rounds", type=int, help="timed rounds (default 5; --quick 2)")
    p.add_argument("--peer", metavar="URL", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.peer:
        serve_peer(args.peer)
        return
    requests = args.requests or (400 if args.quick else 1000)
    rounds = args.rounds or (2 if args.quick else 5)
    say(f"[11] service: {args.clients} concurrent clients, {requests:,} requests a batch "
        f"(one in {ANSWER_EVERY} an answer), {rounds} rounds against a plain Starlette peer")
    with scratch_dir() as tmp:
        measure("SQLite", f"sqlite:///{tmp / 'service.db'}", tmp, clients=args.clients,
                requests=requests, rounds=rounds)
        with postgres_schema() as url:
            if url is not None:
                measure("PostgreSQL", url, tmp, clients=args.clients, requests=requests, rounds=rounds)


if __name__ == "__main__":
    main()
