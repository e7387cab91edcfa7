"""What every benchmark shares: sizes, timing, memory, databases, and reporting.

Each benchmark is a module with a ``main(argv)`` that prints its figures and calls
:func:`report` once per target. Absolute figures drift on shared machines, so every
target is a ratio against a peer measured in the same run (or a floor that says so).

Comparisons against a peer go through :func:`paired`: the contenders run in short
batches, interleaved (ABBA, or every order of three), so neighbouring batches share the
machine's background load; each round gives one ratio between batches of that round,
and the target is decided on the **median** of those per-round ratios, reported with
their spread (:class:`Ratios`). Taking each contender's best batch instead would compare
batches from different moments of the load (and favours whichever side has more short
batches), which on 2 shared cores can turn a 1.2 into a 0.9.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import shutil
import statistics
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
class Ratios:
    """Paired per-round ratios of two contenders; the median is the figure."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def quartiles(self) -> tuple[float, float]:
        if self.n < 2:
            return self.values[0], self.values[0]
        q1, _, q3 = statistics.quantiles(self.values, n=4, method="inclusive")
        return q1, q3

    @property
    def lo(self) -> float:
        return min(self.values)

    @property
    def hi(self) -> float:
        return max(self.values)

    def spread(self) -> str:
        q1, q3 = self.quartiles
        return f"IQR {q1:.2f}-{q3:.2f}, range {self.lo:.2f}-{self.hi:.2f}, {self.n} pair{'s' if self.n != 1 else ''}"


@dataclass(frozen=True)
class Result:
    bench: str
    target: str
    figure: str
    ratio: float | None
    goal: str
    met: bool | None
    q1: float | None = None
    q3: float | None = None
    lo: float | None = None
    hi: float | None = None
    pairs: int | None = None


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke check")
    return p


def report(
    bench: str,
    target: str,
    figure: str,
    *,
    goal: str,
    ratio: Ratios | float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
    met: bool | None = None,
) -> Result:
    """Print one target's outcome and append it to the results file, if any.

    With ``at_least`` or ``at_most`` the verdict is decided here, on the ratio (for
    :class:`Ratios`, on their median); otherwise ``met`` is the caller's verdict (or
    None: reported only).
    """
    value = ratio.median if isinstance(ratio, Ratios) else ratio
    if at_least is not None or at_most is not None:
        assert value is not None, "a goal on the ratio needs a ratio"
        met = (at_least is None or value >= at_least) and (at_most is None or value <= at_most)
    spread: dict[str, Any] = {}
    if isinstance(ratio, Ratios):
        q1, q3 = ratio.quartiles
        spread = {"q1": q1, "q3": q3, "lo": ratio.lo, "hi": ratio.hi, "pairs": ratio.n}
    # Unrounded, so the results table shows the same digits as the line printed here.
    result = Result(bench, target, figure, value, goal, met, **spread)
    verdict = {True: "MET", False: "MISSED", None: "reported"}[met]
    shown = ""
    if isinstance(ratio, Ratios):
        shown = f"  ratio {ratio.median:.2f} (median; {ratio.spread()})"
    elif value is not None:
        shown = f"  ratio {value:.2f} (one measurement)"
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


def orders(names: list[str], rounds: int) -> list[list[str]]:
    """The running order of each round: ABBA for two, every order in turn for three.

    Round ``r`` runs the names rotated by ``r // 2``, reversed on odd rounds, so each
    contender goes first and last equally often and no one always follows the same other.
    """
    out = []
    for r in range(rounds):
        k = (r // 2) % len(names)
        order = names[k:] + names[:k]
        out.append(order[::-1] if r % 2 else order)
    return out


@dataclass
class Batches:
    """Seconds per batch of each contender, round by round (wall and process CPU time)."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]

    def ratios(self, top: str, bottom: str, *, clock: str = "wall") -> Ratios:
        """``top``'s batch time over ``bottom``'s, one ratio per round.

        With equal work per batch, ``ratios(peer, ours)`` is our speed as a fraction of
        the peer's, and ``ratios(ours, peer)`` our cost as a multiple of the peer's.
        """
        times = self.cpu if clock == "cpu" else self.wall
        return Ratios(tuple(t / b for t, b in zip(times[top], times[bottom], strict=True)))

    def median(self, name: str, *, clock: str = "wall") -> float:
        """The median seconds of ``name``'s batches."""
        return statistics.median((self.cpu if clock == "cpu" else self.wall)[name])

    def total(self, name: str) -> float:
        return sum(self.wall[name])


def paired(
    contenders: dict[str, Callable[[int], Any]], *, rounds: int, warmup: int = 1
) -> Batches:
    """Run each contender's batches in interleaved rounds and time every batch.

    ``contenders[name](i)`` runs batch ``i`` (the same amount of work for every
    contender and every ``i``, or at least the same for all contenders at one ``i``);
    batches ``0 .. warmup-1`` run first, in the same interleaved way, and are not timed,
    then ``rounds`` rounds are. A garbage collection precedes every batch, outside its
    time, so no batch pays for another's garbage.
    """
    names = list(contenders)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i, order in enumerate(orders(names, warmup + rounds)):
        for name in order:
            gc.collect()
            c0, w0 = time.process_time(), time.perf_counter()
            contenders[name](i)
            w1, c1 = time.perf_counter(), time.process_time()
            if i >= warmup:
                wall[name].append(w1 - w0)
                cpu[name].append(c1 - c0)
    return Batches(wall, cpu)
