"""Test scaffolding: one ``store`` fixture, every backend.

``db_url`` is parametrised over SQLite (a temporary file per test) and PostgreSQL (a
fresh schema per test in the database named by ``SYMFONIC_STORE_TEST_POSTGRES_URL``).
Without that variable the PostgreSQL cases skip and say why.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import freezegun
import pytest
import sqlalchemy as sa
from migrated import SchemaTemplate

from symfonic_store import AsyncInterruptStore, InterruptStore
from symfonic_store.db.engines import create_sync_engine

pytest_plugins = ["pytester"]

# The test modules live in one folder per layer, their basenames unique across folders, and
# keep one import namespace: the shared helpers sit here (tests/, on sys.path as this
# conftest's folder) and every layer folder is on sys.path too, so a module may import
# another's helpers by name (``from test_gateway import gate_for``) wherever either lives.
TESTS = Path(__file__).resolve().parent
LAYERS = ("core", "store", "langgraph", "server", "cli", "faults", "evidence", "notify")
for _layer in LAYERS:
    if str(TESTS / _layer) not in sys.path:
        sys.path.append(str(TESTS / _layer))

# freezegun replaces the time functions in every loaded module but the ones it ignores,
# and pytest's timer reads them through `_pytest.timing`: a test that froze the clock in a
# fixture got a frozen (or epoch-sized) duration. Domain time stays frozen; pytest's is real.
freezegun.configure(extend_ignore_list=["_pytest.timing"])

POSTGRES_ENV = "SYMFONIC_STORE_TEST_POSTGRES_URL"
POSTGRES_SKIP_REASON = f"{POSTGRES_ENV} is not set: PostgreSQL cases skipped"


def postgres_base_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


def with_search_path(url: str, schema: str) -> str:
    """A URL whose connections use ``schema`` first (libpq ``options``)."""
    parsed = sa.make_url(url)
    return parsed.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False
    )


@pytest.fixture
def postgres_schema_url() -> Iterator[str]:
    """A PostgreSQL URL bound to a fresh, empty schema, dropped afterwards."""
    base = postgres_base_url()
    if base is None:
        pytest.skip(POSTGRES_SKIP_REASON)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(sa.make_url(base).set(drivername="postgresql+psycopg"))
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(sa.make_url(base).set(drivername="postgresql+psycopg").render_as_string(hide_password=False), schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
                ids=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend of this case: ``sqlite`` or ``postgresql`` (the one parameter of
    ``db_url``, ``migrated_url``, ``store`` and ``astore``, so they name one database)."""
    return str(request.param)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, backend: str) -> str:
    """An empty database (no schema yet) on each backend: for the tests of migrations and
    ``setup()`` themselves; the others take ``migrated_url`` or ``store``."""
    if "migrated_url" in request.fixturenames:
        pytest.fail("db_url is an empty database, not the store's: take migrated_url for the "
                    "database that store/astore use", pytrace=False)
    name = "sqlite_url" if backend == "sqlite" else "postgres_schema_url"
    return str(request.getfixturevalue(name))


# --- one migration per test run, copied per test -----------------------------------------


@pytest.fixture
def engine(db_url: str) -> Iterator[sa.Engine]:
    """An engine on an empty database of each backend (configured as the store's); to move
    between revisions with :func:`migration_rig.migrate`."""
    e = create_sync_engine(db_url)
    yield e
    e.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per run (its engine closed: no WAL left)."""
    path = tmp_path_factory.mktemp("migrated") / "store.db"
    store = InterruptStore(f"sqlite:///{path}")
    store.setup()
    store.close()
    return path


@pytest.fixture
def migrated_sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A copy of the migrated SQLite file, this test's own."""
    target = tmp_path / "migrated.db"
    shutil.copyfile(sqlite_template, target)
    return f"sqlite:///{target}"


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[SchemaTemplate | None]:
    """A schema migrated to head once per run, captured with pg_dump (tables, sequences,
    functions, triggers, the version row) for a fresh copy per test; None without PostgreSQL."""
    base = postgres_base_url()
    if base is None:
        yield None
        return
    template = SchemaTemplate.migrate(sa.make_url(base).set(drivername="postgresql+psycopg"))
    try:
        yield template
    finally:
        template.drop()


@pytest.fixture
def migrated_postgres_url(postgres_template: SchemaTemplate | None) -> Iterator[str]:
    """A fresh schema restored from the migrated template, dropped afterwards."""
    if postgres_template is None:
        pytest.skip(POSTGRES_SKIP_REASON)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield postgres_template.copy(schema)
    postgres_template.drop_copy(schema)


@pytest.fixture
def migrated_url(request: pytest.FixtureRequest, backend: str) -> str:
    """A database at head, this test's own copy of the run's one migration, on each backend."""
    name = "migrated_sqlite_url" if backend == "sqlite" else "migrated_postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def store(migrated_url: str) -> Iterator[InterruptStore]:
    """A migrated store without a TTL, on each backend (``setup()`` on it changes nothing)."""
    s = InterruptStore(migrated_url)
    yield s
    s.close()


@pytest.fixture
async def astore(migrated_url: str) -> AsyncIterator[AsyncInterruptStore]:
    """A migrated asyncio store, on each backend."""
    s = AsyncInterruptStore(migrated_url)
    yield s
    await s.aclose()


# --- the browser and private PostgreSQL clusters, for the modules that use them ----------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright (its own download is not used)."""
    from service_rig import chromium_path, no_browser

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        no_browser("playwright is not installed (pip install -e '.[test]')")
    path = chromium_path()
    if path is None:
        no_browser("no Chromium found: apt-get install chromium (or set SYMFONIC_STORE_CHROMIUM)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A private PostgreSQL cluster for this module, removed afterwards even on failure."""
    from pgcluster import PrivateCluster, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    private = PrivateCluster()
    try:
        private.init()
        private.start()
        yield private
    finally:
        private.destroy()


@pytest.fixture
def crash_url(cluster: Any) -> Iterator[str]:
    """A fresh database on the private cluster; the cluster is running again afterwards."""
    if not cluster.is_running():
        cluster.start()
    name = f"f_{uuid.uuid4().hex[:10]}"
    # No pool: a pooled admin connection would not survive the crashes these tests cause.
    admin = sa.create_engine(cluster.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield str(sa.make_url(cluster.url).set(database=name))
    finally:
        if not cluster.is_running():
            cluster.start()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
