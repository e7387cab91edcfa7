"""Run every benchmark, each in its own process, and print a table of the results.

    python -m bench                 # full sizes (several minutes on 2 cores)
    python -m bench --quick         # small sizes, a smoke check
    python -m bench append sweep    # some of them
    python -m bench --markdown out.md

PostgreSQL parts run when ``SYMFONIC_STORE_BENCH_POSTGRES_URL`` (or
``SYMFONIC_STORE_TEST_POSTGRES_URL``) names a server; each uses a fresh schema.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import CACHE_ENV, RESULTS_ENV

BENCHMARKS = {
    "append": "bench.append",
    "agent": "bench.agent_overhead",
    "lookups": "bench.lookups",
    "sweep": "bench.sweep",
    "rebuild": "bench.rebuild",
    "audit": "bench.audit",
    "streams": "bench.streams",
    "postgres": "bench.pg_writers",
    "checkpoints": "bench.checkpoints",
    "checkpoint": "bench.checkpoint",
    "service": "bench.service_load",
}


def table(results: list[dict[str, object]]) -> str:
    lines = [
        "| benchmark | target | figure | ratio (median) | spread of paired ratios | goal | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        met = {True: "yes", False: "**no**", None: "reported"}[r["met"]]  # type: ignore[index]
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
        spread = ""
        if r.get("pairs"):
            spread = (f"IQR {r['q1']:.2f}-{r['q3']:.2f}, range {r['lo']:.2f}-{r['hi']:.2f}, "
                      f"{r['pairs']} pair{'s' if r['pairs'] != 1 else ''}")
        elif r["ratio"] is not None:
            spread = "one measurement"
        lines.append(f"| {r['bench']} | {r['target']} | {r['figure']} | {ratio} | {spread} "
                     f"| {r['goal']} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run the symfonic-store benchmarks.")
    p.add_argument("names", nargs="*", help=f"which (default: all): {', '.join(BENCHMARKS)}")
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke check")
    p.add_argument("--markdown", type=Path, help="also write the results table to this file")
    args = p.parse_args(argv)
    names = args.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="symfonic-bench-") as tmp:
        results_path = Path(tmp) / "results.jsonl"
        env = {**os.environ, RESULTS_ENV: str(results_path), CACHE_ENV: tmp}
        failed = []
        for name in names:
            cmd = [sys.executable, "-m", BENCHMARKS[name], *(["--quick"] if args.quick else [])]
            if subprocess.run(cmd, env=env).returncode != 0:
                failed.append(name)
        results = (
            [json.loads(line) for line in results_path.read_text().splitlines()]
            if results_path.exists()
            else []
        )
    header = (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{'--quick' if args.quick else 'full sizes'}, {time.perf_counter() - started:.0f} s"
    )
    out = f"{header}\n\n{table(results)}\n"
    print("\n" + out)
    if args.markdown:
        args.markdown.write_text(out)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
