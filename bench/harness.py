"""What every benchmark shares: sizes, timing, memory, databases, and reporting.

Each benchmark is a module with a ``main(argv)`` that prints its figures and calls
:func:`report` once per target. Absolute figures drift on shared machines, so every
target is a ratio against a peer measured in the same run (or a floor that says so).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

RESULTS_ENV = "SYMFONIC_BENCH_RESULTS"
"""A JSON-lines file each :func:`report` appends to (set by ``python -m bench``)."""

POSTGRES_ENVS = ("SYMFONIC_STORE_BENCH_POSTGRES_URL", "SYMFONIC_STORE_TEST_POSTGRES_URL")


@dataclass(frozen=True)
class Result:
    bench: str
    target: str
    figure: str
    ratio: float | None
    goal: str
    met: bool | None


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke check")
    return p


def report(
    bench: str, target: str, figure: str, *, ratio: float | None, goal: str, met: bool | None
) -> Result:
    """Print one target's outcome and append it to the results file, if any."""
    result = Result(bench, target, figure, None if ratio is None else round(ratio, 3), goal, met)
    verdict = {True: "MET", False: "MISSED", None: "reported"}[met]
    shown = "" if ratio is None else f"  ratio {ratio:.2f}"
    print(f"  => [{verdict}] {target}: {figure}{shown}  (target {goal})", flush=True)
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(result)) + "\n")
    return result


def say(text: str) -> None:
    print(text, flush=True)


# --- timing ------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds taken by ``fn()`` (GC collected first, so one run does not pay for another)."""
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s"


# --- memory ------------------------------------------------------------------------


def rss_mb() -> float:
    import psutil

    return float(psutil.Process().memory_info().rss) / 2**20


def peak_rss_mb() -> float:
    """The process's peak resident set size so far (Linux reports kilobytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20


# --- databases ---------------------------------------------------------------------


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A temporary folder on the same disk the store would use (fsync costs are real)."""
    path = Path(tempfile.mkdtemp(prefix="symfonic-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def postgres_url() -> str | None:
    for name in POSTGRES_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    return None


@contextlib.contextmanager
def postgres_schema() -> Iterator[str | None]:
    """A URL bound to a fresh PostgreSQL schema (dropped afterwards), or None without one."""
    base = postgres_url()
    if base is None:
        say(f"  (PostgreSQL skipped: set {POSTGRES_ENVS[0]} or {POSTGRES_ENVS[1]})")
        yield None
        return
    url = sa.make_url(base).set(drivername="postgresql+psycopg")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


# --- datasets ----------------------------------------------------------------------

CACHE_ENV = "SYMFONIC_BENCH_CACHE"
"""A folder where generated SQLite datasets are kept between benchmarks of one run."""


def load_in_child(url: str, specs: list[Any], *, rebuild: bool = True) -> None:
    """Load a generated dataset in a child process, so this one's memory stays clean."""
    import subprocess

    spec = json.dumps([asdict(s) for s in specs])
    cmd = [sys.executable, "-m", "bench.bulk_load", url, "--spec", spec]
    if not rebuild:
        cmd.append("--no-rebuild")
    subprocess.run(cmd, check=True)


@contextlib.contextmanager
def sqlite_dataset(specs: list[Any]) -> Iterator[Path]:
    """An SQLite file holding ``specs``; shared through :data:`CACHE_ENV` when set."""
    import hashlib

    key = hashlib.sha256(json.dumps([asdict(s) for s in specs]).encode()).hexdigest()[:12]
    cache = os.environ.get(CACHE_ENV)
    if cache:
        path = Path(cache) / f"dataset-{key}.db"
        if not path.exists():
            say(f"  generating dataset {path.name} ...")
            load_in_child(f"sqlite:///{path}", specs)
        yield path
        return
    with scratch_dir() as tmp:
        path = tmp / f"dataset-{key}.db"
        say("  generating dataset ...")
        load_in_child(f"sqlite:///{path}", specs)
        yield path


class PeakRSS:
    """Samples the resident set size every few milliseconds while the block runs."""

    def __init__(self, interval: float = 0.005) -> None:
        import threading

        self.interval = interval
        self.before = 0.0
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        gc.collect()
        self.before = self.peak = rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())

    @property
    def growth(self) -> float:
        return self.peak - self.before


def interleaved(
    contenders: dict[str, Callable[[], Any]], *, batches: int, per_batch: int
) -> dict[str, float]:
    """Seconds per call of each contender: the best of many alternating short batches.

    Alternating batches (ABBA order) expose every contender to the same background
    noise of a shared machine, and the best batch (as ``timeit`` reports) is the one
    least disturbed by it: on 2 busy cores a median still swings by 2-3x.
    """
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    gc.collect()
    order = list(contenders.items())
    for b in range(batches):
        for name, fn in order if b % 2 == 0 else reversed(order):
            start = time.perf_counter()
            for _ in range(per_batch):
                fn()
            samples[name].append((time.perf_counter() - start) / per_batch)
    return {name: min(s) for name, s in samples.items()}
