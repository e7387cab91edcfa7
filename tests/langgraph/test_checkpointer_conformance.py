"""``store.checkpointer()`` passes LangGraph's own checkpointer conformance suite.

``langgraph-checkpoint-conformance`` (LangGraph's suite for third-party savers) runs
every base capability (put, put_writes, get_tuple, list, delete_thread) and the
extended ones it detects (copy_thread, delete_for_runs, prune) through the async API.
Both twins run it, each on its store's own database: the asyncio store's checkpointer
natively, the sync store's through its worker-thread async methods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from symfonic_store import AsyncInterruptStore, InterruptStore


def failures(report: Any) -> dict[str, list[str]]:
    return {name: r.failures for name, r in report.results.items() if not r.passed}


@pytest.mark.parametrize("twin", ["async", "sync"])
async def test_the_store_checkpointer_passes_every_capability_of_the_suite(migrated_url: str, twin: str) -> None:
    """All eight capabilities, base and extended, are detected and pass on this database."""

    @checkpointer_test(name=f"store.checkpointer() ({twin})")
    async def saver() -> AsyncIterator[Any]:
        if twin == "async":
            astore = AsyncInterruptStore(migrated_url)
            await astore.setup()
            yield astore.checkpointer()
            await astore.aclose()
        else:
            store = InterruptStore(migrated_url)
            store.setup()
            yield store.checkpointer()
            store.close()

    report = await validate(saver)
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    assert all(r.detected for r in report.results.values()), report.results
    assert failures(report) == {}
    assert report.passed_all_base()
    assert sum(r.tests_passed for r in report.results.values()) >= 60
