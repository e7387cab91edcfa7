"""``pytest --durations`` reports real time even where a fixture froze the clock."""

from __future__ import annotations

import re

import pytest

TINY = '''
import hashlib

import pytest
from freezegun import freeze_time


@pytest.fixture
def frozen():
    with freeze_time("2026-01-01 00:00:00"):
        # Work done while the clock is frozen: setup takes real time too.
        digest = b""
        for _ in range(20_000):
            digest = hashlib.sha256(digest).digest()
        yield


def test_work(frozen):
    digest = b""
    for _ in range(200_000):  # measurable work, no sleep
        digest = hashlib.sha256(digest).digest()
    assert digest
'''

DURATION = re.compile(r"^(-?[0-9.]+)s (setup|call|teardown)\s+\S+::test_work$", re.M)


def test_durations_are_real_time_when_a_fixture_freezes_the_clock(pytester: pytest.Pytester) -> None:
    """Each phase of a test whose fixture froze the clock is timed with the real clock."""
    pytester.makepyfile(test_tiny=TINY)
    result = pytester.runpytest_inprocess("--durations=0", "--durations-min=0", "-p", "no:asyncio")
    result.assert_outcomes(passed=1)
    phases = {phase: float(seconds) for seconds, phase in DURATION.findall(result.stdout.str())}
    assert set(phases) == {"setup", "call", "teardown"}, result.stdout.str()
    assert phases["call"] > 0.01  # 200,000 hashes: not the frozen clock's 0.00
    assert all(0 <= seconds < 600 for seconds in phases.values()), phases
