"""The store's savers as parameters of LangGraph's own ``sync_checkpointer`` and
``async_checkpointer`` fixtures.

Copied by ``run.py`` into the LangGraph test tree it prepares (as
``tests/_symfonic_savers.py``) and imported at the end of that tree's
``tests/conftest.py``, where it redefines both fixtures with LangGraph's parameters
followed by ``symfonic_*`` ones: ``store.checkpointer()`` on SQLite and, when
``SYMFONIC_STORE_TEST_POSTGRES_URL`` is set, on PostgreSQL (a fresh schema per test),
and ``store.recording_checkpointer(InMemorySaver())``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import Any

import pytest
import sqlalchemy as sa
from langgraph.checkpoint.memory import InMemorySaver

from symfonic_store import AsyncInterruptStore, InterruptStore

POSTGRES_ENV = "SYMFONIC_STORE_TEST_POSTGRES_URL"


def ours() -> list[str]:
    """The store's savers to run, from ``SYMFONIC_SUITE_SAVERS`` (comma-separated) or all."""
    names = ["symfonic_sqlite", "symfonic_recording"]
    if os.environ.get(POSTGRES_ENV):
        names.insert(1, "symfonic_postgres")
    chosen = os.environ.get("SYMFONIC_SUITE_SAVERS")
    if chosen:
        names = [n for n in names if n in chosen.split(",")]
    return names


def theirs(names: list[str]) -> list[str]:
    """LangGraph's savers to run beside ours, from ``SYMFONIC_SUITE_BASELINE`` or all."""
    chosen = os.environ.get("SYMFONIC_SUITE_BASELINE")
    return names if not chosen else [n for n in names if n in chosen.split(",")]


_TEMPLATE: list[str] = []


def _sqlite_template() -> str:
    """A SQLite file with the store's schema and LangGraph's tables, made once a session:
    each test gets a copy (migrating a file per test would take most of the run)."""
    if not _TEMPLATE:
        folder = tempfile.mkdtemp(prefix="symfonic-suite-")
        path = os.path.join(folder, "template.db")
        store = InterruptStore(f"sqlite:///{path}")
        store.setup()
        store.checkpointer().setup()
        store.close()
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


@contextmanager
def _database() -> Iterator[str]:
    """A URL of a SQLite file of the store's, set up and empty."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(_sqlite_template(), f"{tmp}/store.db")
        yield f"sqlite:///{tmp}/store.db"


_PG_TEMPLATE: list[Any] = []


def _postgres_template() -> Any:
    """The store's schema and LangGraph's tables migrated once a session in a template
    schema, restored into a fresh schema per test (tests/migrated.py, copied beside this
    module by run.py); the template is dropped when the session ends."""
    if not _PG_TEMPLATE:
        from tests import _symfonic_migrated as migrated  # type: ignore[attr-defined]

        base = sa.make_url(os.environ[POSTGRES_ENV]).set(drivername="postgresql+psycopg")
        template = migrated.SchemaTemplate.migrate(base, checkpointer=True)
        atexit.register(template.drop)
        _PG_TEMPLATE.append(template)
    return _PG_TEMPLATE[0]


@contextmanager
def _postgres_schema() -> Iterator[str]:
    """A URL of a fresh schema of the store's, set up and empty, dropped afterwards."""
    template = _postgres_template()
    schema = f"lg_{uuid.uuid4().hex[:12]}"
    url = template.copy(schema)
    try:
        yield url
    finally:
        template.drop_copy(schema)


def _url(name: str) -> AbstractContextManager[str]:
    return _postgres_schema() if name == "symfonic_postgres" else _database()


@contextmanager
def sync_saver(name: str) -> Iterator[Any]:
    """``InterruptStore(url).checkpointer()`` (or its recording checkpointer)."""
    with _url(name) as url:
        store = InterruptStore(url)
        store.setup()
        try:
            if name == "symfonic_recording":
                yield store.recording_checkpointer(InMemorySaver())
            else:
                yield store.checkpointer()
        finally:
            store.close()


@asynccontextmanager
async def async_saver(name: str) -> AsyncIterator[Any]:
    """``AsyncInterruptStore(url).checkpointer()`` (or its recording checkpointer)."""
    with _url(name) as url:
        store = AsyncInterruptStore(url)
        await store.setup()
        try:
            if name == "symfonic_recording":
                yield store.recording_checkpointer(InMemorySaver())
            else:
                yield store.checkpointer()
        finally:
            await store.aclose()


def extend(
    sync_names: list[str],
    theirs_sync: Callable[[str], AbstractContextManager[Any]],
    async_names: list[str],
    theirs_async: Callable[[str], AbstractAsyncContextManager[Any]],
) -> tuple[Any, Any]:
    """The two fixtures, LangGraph's savers (by name, through its own helpers) and ours."""

    @pytest.fixture(scope="function", params=[*theirs(sync_names), *ours()])
    def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[Any]:
        name = request.param
        with sync_saver(name) if name.startswith("symfonic_") else theirs_sync(name) as saver:
            yield saver

    @pytest.fixture(scope="function", params=[*theirs(async_names), *ours()])
    async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        name = request.param
        if name.startswith("symfonic_"):
            async with async_saver(name) as saver:
                yield saver
        else:
            manager: Any = theirs_async(name)
            if not hasattr(manager, "__aenter__"):  # LangGraph's "memory" is a sync one
                with manager as saver:
                    yield saver
                return
            async with manager as saver:
                yield saver

    return sync_checkpointer, async_checkpointer


# --- the selection and the report -----------------------------------------------------

SAVER_FIXTURES = ("sync_checkpointer", "async_checkpointer")


def _saver_of(item: Any) -> str | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return next((str(params[f]) for f in SAVER_FIXTURES if f in params), None)


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Keep only the tests parametrised by a checkpointer fixture."""
    kept = [i for i in items if _saver_of(i) is not None]
    dropped = [i for i in items if _saver_of(i) is None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_runtest_logreport(report: Any) -> None:
    """One JSON line per test phase to ``SYMFONIC_SUITE_REPORT``: the run's comparison input.

    Under pytest-xdist the controller writes again what each worker wrote; ``compare``
    in run.py counts a test once, a failure winning."""
    import json

    path = os.environ.get("SYMFONIC_SUITE_REPORT")
    if not path:
        return
    outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    with open(path, "a", encoding="utf-8") as out:
        row = {"nodeid": report.nodeid, "when": report.when, "outcome": outcome, "seconds": report.duration}
        out.write(json.dumps(row) + "\n")
