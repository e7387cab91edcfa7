"""The bounded-reads benchmark (bench/bounded_reads.py) runs end to end at a tiny size.

Not a measurement: 50 vs 100 open interrupts, one pair, SQLite only; it checks that every
read the benchmark knows is run on both stores and reported on a line of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.bounded_reads import reads

ROOT = Path(__file__).resolve().parents[2]


def test_every_read_is_reported_once_at_a_tiny_size() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.bounded_reads", "--small", "50", "--large", "100",
         "--samples", "1", "--thread-events", "30", "--k", "3", "--backend", "sqlite"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    verdicts = [line for line in done.stdout.splitlines() if line.startswith("  => [")]
    names, _missing = reads(3)
    assert len(verdicts) == len(names), "\n".join(verdicts)
    for read in names:
        assert sum(f"] {read.name}, SQLite:" in line for line in verdicts) == 1, read.name
    assert "| read | 50 | 100 |" in done.stdout
