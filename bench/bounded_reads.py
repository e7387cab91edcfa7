"""Benchmark 12 -- bounded reads: each read's cost at a small and at a large store (SPEC §17).

Two stores are loaded as ``bench/bulk_load.py`` loads (rows written straight into the
event table, the projection rebuilt from them): one with ``--small`` open interrupts, one
with ``--large``, each open interrupt on a thread of its own with three events (M ~ 3N),
a tenth of them minted for the tenant ``acme``; beside them, in both, one resolved thread
of ``--thread-events`` events (answers by ``alice`` and ``bob``, some rejected). A real
``symfonic-store serve`` runs on each store, on loopback (started as
``bench/service_load.py`` starts it). Every read below then runs on both stores in turn,
small and large alternating (ABBA, :func:`bench.harness.orders`): one warm-up pair, then
``--samples`` timed pairs. The figure of a read is the median of its per-pair ratios
large / small, with their spread; the target is <= 1.5 (the cost follows the page, not
the history). Writes that a read needs first (an answer's fresh interrupt, the new
events of a notifier batch, the stale interrupts of a sweep batch) are made before its
sample, outside the time.

    python -m bench.bounded_reads --small 1000 --large 1000000 --backend sqlite --samples 7
    python -m bench.bounded_reads --small 1000 --large 20000 --backend postgresql --timeout 60

A read with an HTTP call over ``--timeout`` seconds is reported missed and the run goes on.

PostgreSQL needs ``SYMFONIC_STORE_BENCH_POSTGRES_URL`` (or ``..._TEST_POSTGRES_URL``);
each store gets a fresh schema. Not part of ``python -m bench`` (the million takes long
to load) and not run in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

from bench.bulk_load import PAYLOAD, ThreadSpec
from bench.harness import (
    Ratios,
    load_in_child,
    orders,
    postgres_schema,
    report,
    say,
    scratch_dir,
    timed,
)
from bench.service_load import process, service_command, tokens_file
from symfonic_store import InterruptStore

TARGET = 1.5
PAGE = 50
TENANT = "acme"
ASSIGNEE = "bob"
LONG = "long-0000000"
FIRST = "i-000000000001"  # every bulk-loaded thread's first interrupt
STALE_TTL = 86_400.0
"""The sweep's TTL: a day, so the bulk-loaded interrupts stay fresh however long a load
takes, and the ones a sweep sample mints two days old are stale."""


def specs(open_count: int, thread_events: int) -> list[ThreadSpec]:
    """``open_count`` open interrupts (a tenth for ``acme``) and one long resolved thread."""
    scoped = open_count // 10
    return [
        ThreadSpec("inbox", open_count - scoped, 3, ending="pending"),
        ThreadSpec(TENANT, scoped, 3, ending="pending", tenant=TENANT),
        ThreadSpec("long", 1, thread_events),
    ]


# --- a webhook receiver for the notifier ------------------------------------------------


class _Accept(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def receiver() -> Iterator[str]:
    """A local webhook receiver that accepts every delivery; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accept)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


# --- one store, its service and its clients --------------------------------------------


@dataclass
class Side:
    """One store of a size: its URL, the service on it, clients, and what reads need."""

    label: str
    size: int
    url: str
    store: InterruptStore
    http: Any  # httpx.Client, an approver without tenants
    acme: Any  # httpx.Client, an approver of the tenant acme
    notifier: Any  # Notifier with one webhook subscription to interrupt.minted
    known: dict[str, Any] = field(default_factory=dict)
    answered: int = 0

    def get(self, path: str, params: dict[str, Any] | None = None, *, client: Any = None) -> Any:
        r = (client or self.http).get(path, params=params)
        if r.status_code != 200:
            raise RuntimeError(f"{self.label}: GET {path} {params}: {r.status_code} {r.text[:200]}")
        return r

    def mint(self, prefix: str, count: int, *, minted_at: float | None = None) -> None:
        """``count`` new interrupts on fresh threads (``minted_at`` as given, or now)."""
        for _ in range(count):
            self.known["minted"] = n = self.known.get("minted", 0) + 1
            self.store.mint(f"{prefix}-{n:07d}", {
                "name": "approval_required", "interrupt_id": FIRST, "payload": PAYLOAD,
                "run_id": f"run-{n}", "minted_at": minted_at if minted_at is not None else time.time(),
            })


def open_clients(base: str, tokens: list[str], timeout: float) -> tuple[Any, Any]:
    import httpx

    def client(token: str) -> Any:
        return httpx.Client(base_url=base, timeout=timeout, trust_env=False,
                            headers={"Authorization": f"Bearer {token}"})

    return client(tokens[0]), client(tokens[1])


def tokens_with_tenant(folder: Path) -> tuple[Path, list[str]]:
    """``tokens_file``'s approvers, the second one made an approver of ``acme`` only."""
    path, tokens = tokens_file(folder)
    data = json.loads(path.read_text())
    data["approver-01"]["tenants"] = [TENANT]
    path.write_text(json.dumps(data))
    return path, tokens


def notifier_for(store: InterruptStore, folder: Path, hook: str) -> Any:
    import base64

    from symfonic_store.notify import Notifier

    secret = folder / "whsec"
    secret.write_text("whsec_" + base64.b64encode(b"bench-bounded-reads-secret-32byte").decode())
    config = {"subscriptions": [{"name": "bench", "events": ["interrupt.minted"],
                                 "webhook": {"url": hook, "secret_file": str(secret)}}]}
    notifier = Notifier(store, config)
    notifier.run_once()  # makes its cursor, at the log's end
    return notifier


@contextlib.contextmanager
def side(label: str, size: int, url: str, folder: Path, hook: str, args: argparse.Namespace) -> Iterator[Side]:
    """A loaded store of ``size`` open interrupts with its service running."""
    say(f"  {label}: loading {size:,} open interrupts and a thread of {args.thread_events:,} events ...")
    started = time.perf_counter()
    load_in_child(url, specs(size, args.thread_events))
    if sa.make_url(url).get_backend_name() == "postgresql":
        # Statistics, as autovacuum would soon gather them: planned without any, a query
        # made right after a bulk load can take minutes (a nested loop over the log).
        # Only this schema's tables: a bare ANALYZE would take the whole database's.
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            for table in sa.inspect(conn).get_table_names():
                conn.exec_driver_sql(f'ANALYZE "{table}"')
            conn.commit()
        engine.dispose()
    say(f"  {label}: loaded in {time.perf_counter() - started:.0f} s")
    folder.mkdir(parents=True, exist_ok=True)
    tokens_path, tokens = tokens_with_tenant(folder)
    store = InterruptStore(url)
    with process(service_command(url, tokens_path), "serving the approval inbox on ") as base:
        http, acme = open_clients(base, tokens, args.timeout)
        try:
            yield Side(label, size, url, store, http, acme, notifier_for(store, folder, hook))
        finally:
            http.close()
            acme.close()
            store.close()


# --- the reads -------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """One read: ``run`` is timed; ``prepare`` (untimed) makes what the sample needs."""

    name: str
    run: Callable[[Side], Any]
    prepare: Callable[[Side], Any] | None = None


def _page(path: str, params: dict[str, Any], *, acme: bool = False) -> Callable[[Side], Any]:
    """A page of ``path``; a ``$name`` value is the side's own (a cursor: stores differ)."""

    def read(s: Side) -> Any:
        asked = {k: s.known[v] if str(v).startswith("$") else v for k, v in params.items()}
        return s.get(path, {**asked, "limit": PAGE}, client=s.acme if acme else None)

    return read


def _api_page(params: dict[str, Any], *, acme: bool = False) -> Callable[[Side], Any]:
    return _page("/api/interrupts", params, acme=acme)


def _audit_page(params: dict[str, Any], *, acme: bool = False) -> Callable[[Side], Any]:
    return _page("/api/audit", params, acme=acme)


def _answer_prepare(s: Side) -> None:
    """The next fresh interrupt to answer: the bulk-loaded ones, newest thread first."""
    from symfonic_store.server import interrupt_digest

    s.answered += 1
    thread = f"inbox-{s.size - s.size // 10 - s.answered:07d}"
    s.known["answer"] = (thread, interrupt_digest(thread, FIRST, PAYLOAD))


def _answer(s: Side) -> None:
    thread, digest = s.known["answer"]
    r = s.http.post(f"/api/interrupts/{quote(thread, safe='')}/{FIRST}/answer",
                    json={"response": {"approved": True}, "digest": digest})
    if r.status_code != 200:
        raise RuntimeError(f"{s.label}: answer {thread}: {r.status_code} {r.text[:200]}")


def _stream_first_page(s: Side) -> None:
    """``/api/events/stream`` from a position near the log's end, until its first event."""
    with s.http.stream("GET", "/api/events/stream", params={"after": s.known["tail"]}) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{s.label}: stream {r.status_code}")
        for line in r.iter_lines():
            if line.startswith("id: "):
                return


def _sweep_batch(s: Side) -> None:
    found = s.store.sweep(ttl_seconds=STALE_TTL, batch_size=s.known["k"]).count
    if found != s.known["k"]:
        raise RuntimeError(f"{s.label}: the sweep expired {found}, not {s.known['k']}")


def _notify_batch(s: Side) -> None:
    tally = s.notifier.run_once().subscriptions["bench"]
    if tally.delivered != s.known["k"]:
        raise RuntimeError(f"{s.label}: the notifier delivered {tally}")


def _cli_audit(s: Side) -> None:
    subprocess.run([sys.executable, "-m", "symfonic_store.cli", "--db", s.url, "audit",
                    "--limit", str(PAGE), "--format", "json"], check=True, capture_output=True)


def has(fn: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(fn).parameters


def reads(k: int) -> tuple[list[Read], list[str]]:
    """Every read measured, and the ones this version cannot be asked (hooks to add)."""
    from symfonic_store.cli.commands.history import audit as cli_audit

    since = "2000-01-01T00:00:00Z"
    until = "2100-01-01T00:00:00Z"
    out = [
        Read("GET /api/interrupts, first page", _api_page({})),
        Read("GET /api/interrupts, page 2 (after=)", _api_page({"after": "$inbox"})),
        Read("GET /api/interrupts?thread=", _api_page({"thread": "inbox-0000005"})),
        Read("GET /api/interrupts?name=", _api_page({"name": "approval_required"})),
        Read("GET /api/interrupts?older_than=60", _api_page({"older_than": 60})),
        Read("GET /api/interrupts, tenant scope, first page", _api_page({}, acme=True)),
        Read("GET /api/interrupts, tenant scope, page 2", _api_page({"after": "$acme"}, acme=True)),
        Read("GET / (the inbox page)", lambda s: s.get("/")),
        Read("GET /api/audit, first page", _audit_page({})),
        Read("GET /api/audit, page 2 (after=)", _audit_page({"after": "$audit"})),
        Read("GET /api/audit?thread= (an open thread)", _audit_page({"thread": "inbox-0000005"})),
        Read("GET /api/audit?thread= (the long thread)", _audit_page({"thread": LONG})),
        Read("GET /api/audit?actor=alice", _audit_page({"actor": "alice"})),
        Read("GET /api/audit?decision=reject", _audit_page({"decision": "reject"})),
        Read("GET /api/audit?since=&until=", _audit_page({"since": since, "until": until})),
        Read("GET /api/audit, tenant scope", _audit_page({}, acme=True)),
        Read("GET /audit (the audit page)", lambda s: s.get("/audit", {"limit": PAGE})),
        Read("GET /api/interrupts/{thread}/{id} (open)",
             lambda s: s.get(f"/api/interrupts/inbox-0000005/{FIRST}")),
        Read("GET /api/interrupts/{thread}/{id} (the long thread)",
             lambda s: s.get(f"/api/interrupts/{LONG}/{FIRST}")),
        Read("POST .../answer (a fresh interrupt each)", _answer, _answer_prepare),
        Read("GET /metrics", lambda s: s.get("/metrics")),
        Read("GET /api/events?after= (near the end)",
             lambda s: s.get("/api/events", {"after": s.known["tail"], "limit": 100})),
        Read("GET /api/events/stream, first page", _stream_first_page),
        Read("list_pending(limit=50)", lambda s: s.store.list_pending(limit=PAGE)),
        Read("list_pending(limit=50, older_than=60)",
             lambda s: s.store.list_pending(limit=PAGE, older_than=60)),
        Read("list_pending(limit=50, tenant=)", lambda s: s.store.list_pending(limit=PAGE, tenant=TENANT)),
        Read("audit(thread_id=) (the long thread)", lambda s: s.store.audit(thread_id=LONG)),
        Read("events(after=, limit=100)", lambda s: s.store.events(after=s.known["tail"], limit=100)),
        Read(f"Notifier.run_once ({k} new events)", _notify_batch,
             lambda s: s.mint("notify", s.known["k"])),
        Read(f"sweep(batch_size={k}), {k} stale", _sweep_batch,
             lambda s: s.mint("stale", s.known["k"], minted_at=time.time() - 2 * STALE_TTL)),
    ]
    missing = []
    if has(InterruptStore.list_pending, "assigned_to"):
        out += [
            Read("GET /api/interrupts?assigned_to=", _api_page({"assigned_to": ASSIGNEE})),
            Read("GET /api/interrupts?assigned_to=, page 2",
                 _api_page({"assigned_to": ASSIGNEE, "after": "$assigned"})),
            Read("list_pending(limit=50, assigned_to=)",
                 lambda s: s.store.list_pending(limit=PAGE, assigned_to=ASSIGNEE)),
        ]
    else:
        missing.append("the inbox's assignment filter (no such filter in this version's API)")
    # Hooks: the reads the Python API and the CLI gain with keyset cursors (SPEC §17).
    if has(InterruptStore.list_pending, "after"):
        out.append(Read("list_pending(limit=50, after=) (page 2)",
                        lambda s: s.store.list_pending(limit=PAGE, after=s.known["pending_after"])))
    else:
        missing.append("list_pending(after=) (no such parameter yet)")
    if has(InterruptStore.audit, "limit"):
        out.append(Read("audit(limit=50)", lambda s: s.store.audit(limit=PAGE)))
        if has(InterruptStore.audit, "after"):
            out.append(Read("audit(limit=50, after=) (page 2)",
                            lambda s: s.store.audit(limit=PAGE, after=s.known["audit_after"])))
    else:
        missing.append("audit(limit=, after=) (no such parameters yet)")
    if has(cli_audit, "limit"):
        out.append(Read("symfonic-store audit --limit 50 (a process)", _cli_audit))
    else:
        missing.append("the CLI's audit --limit (no such option yet)")
    return out, missing


def cursors(s: Side, k: int) -> None:
    """What the reads ask for by name: second-page cursors, a position near the log's end."""
    s.known["k"] = k
    s.known["$inbox"] = s.get("/api/interrupts", {"limit": PAGE}).json()["next"]
    s.known["$acme"] = s.get("/api/interrupts", {"limit": PAGE}, client=s.acme).json()["next"]
    s.known["$audit"] = s.get("/api/audit", {"limit": PAGE}).json()["next"]
    if has(InterruptStore.list_pending, "assigned_to"):
        # Three pages of interrupts assigned to one principal, the same in both stores
        # (among 1,000 or 1,000,000 unassigned): from the 10th inbox thread on, below the
        # ones the answers take (from the top down); fewer in a tiny store.
        inbox = s.size - s.size // 10
        for i in range(10, min(10 + 3 * PAGE, inbox // 2)):
            s.store.assign(f"inbox-{i:07d}", FIRST, to=ASSIGNEE, kind="principal", actor="lead")
        s.known["$assigned"] = s.get("/api/interrupts", {"limit": PAGE, "assigned_to": ASSIGNEE}).json()["next"]
    with s.store.engine.connect() as conn:
        head = conn.execute(sa.text("SELECT MAX(position) FROM symfonic_events")).scalar_one()
    s.known["tail"] = max(0, int(head) - 100)
    if has(InterruptStore.list_pending, "after"):
        s.known["pending_after"] = s.store.list_pending(limit=PAGE)[-1]["cursor"]
    if has(InterruptStore.audit, "after"):
        s.known["audit_after"] = s.store.audit(limit=PAGE)[-1].cursor


def bound(read: Read, s: Side) -> Callable[[], Any]:
    return lambda: read.run(s)


def measure(read: Read, small: Side, large: Side, samples: int) -> tuple[Ratios, float, float]:
    """Paired samples of one read, alternating the stores; (ratios, small median, large median)."""
    seconds: dict[str, list[float]] = {"small": [], "large": []}
    sides = {"small": small, "large": large}
    for i, order in enumerate(orders(["small", "large"], 1 + samples)):
        for name in order:
            s = sides[name]
            if read.prepare is not None:
                read.prepare(s)
            taken, _ = timed(bound(read, s))
            if i >= 1:  # the first pair warms up
                seconds[name].append(taken)
    ratios = Ratios(tuple(b / a for a, b in zip(seconds["small"], seconds["large"], strict=True)))
    return ratios, statistics.median(seconds["small"]), statistics.median(seconds["large"])


def run(label: str, urls: tuple[str, str], args: argparse.Namespace, folder: Path) -> list[str]:
    """Load both stores, measure every read, report each; returns the markdown rows."""
    import httpx

    read_list, missing = reads(args.k)
    rows = []
    with receiver() as hook, \
            side(f"{label} {args.small:,}", args.small, urls[0], folder / "small", hook, args) as small, \
            side(f"{label} {args.large:,}", args.large, urls[1], folder / "large", hook, args) as large:
        for s in (small, large):
            cursors(s, args.k)
        for read in read_list:
            try:
                ratios, a, b = measure(read, small, large, args.samples)
            except httpx.TimeoutException:
                report("12 bounded reads", f"{read.name}, {label}",
                       f"a call took over {args.timeout:.0f} s (--timeout)", goal=f"<= {TARGET}", met=False)
                rows.append(f"| {read.name} | | over {args.timeout:.0f} s | | | **MISS** (timed out) |")
                continue
            result = report("12 bounded reads", f"{read.name}, {label}",
                            f"{a * 1000:.1f} ms at {args.small:,}, {b * 1000:.1f} ms at {args.large:,}",
                            ratio=ratios, at_most=TARGET, goal=f"<= {TARGET}")
            q1, q3 = ratios.quartiles
            rows.append(f"| {read.name} | {a * 1000:.1f} ms | {b * 1000:.1f} ms | {ratios.median:.2f} "
                        f"| {q1:.2f}-{q3:.2f} | {'PASS' if result.met else '**MISS**'} |")
    for what in missing:
        say(f"  (not measured, {label}: {what})")
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", type=int, default=1000, help="open interrupts of the small store")
    p.add_argument("--large", type=int, default=1_000_000, help="open interrupts of the large store")
    p.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="sqlite")
    p.add_argument("--samples", type=int, default=7, help="timed pairs per read (after one warm-up pair)")
    p.add_argument("--thread-events", type=int, default=100_000, help="events of the long thread")
    p.add_argument("--k", type=int, default=50, help="new events per notifier batch, stale per sweep batch")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds an HTTP call may take; a read with a call over it is a MISS")
    args = p.parse_args(argv)
    say(f"[12] bounded reads: {args.small:,} vs {args.large:,} open interrupts, a thread of "
        f"{args.thread_events:,} events, {args.samples} pairs per read, target <= {TARGET}")
    tables: dict[str, list[str]] = {}
    with scratch_dir() as tmp:
        if args.backend in ("sqlite", "both"):
            urls = (f"sqlite:///{tmp / 'small.db'}", f"sqlite:///{tmp / 'large.db'}")
            tables["SQLite"] = run("SQLite", urls, args, tmp / "sqlite")
        if args.backend in ("postgresql", "both"):
            with postgres_schema() as small_url, postgres_schema() as large_url:
                if small_url is not None and large_url is not None:
                    tables["PostgreSQL"] = run("PostgreSQL", (small_url, large_url), args, tmp / "pg")
    for label, rows in tables.items():
        say(f"\n{label}, {args.small:,} vs {args.large:,} open interrupts, {args.samples} pairs:\n")
        say(f"| read | {args.small:,} | {args.large:,} | ratio (median) | IQR | <= {TARGET} |")
        say("|---|---|---|---|---|---|")
        for row in rows:
            say(row)


if __name__ == "__main__":
    main()
