"""A library prints nothing on its own: in a program that configured no logging, nothing
the store (or a driver under it) logs reaches stderr through logging's last resort.

Each case runs in a fresh interpreter, where no test's logging set-up can hide the
last resort.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_the_packages_loggers_print_nothing_without_logging_configured() -> None:
    """A warning and an error of the package's loggers (the notifier's, the service's, a module's own) print nothing when the application configured no logging, and still reach a handler it adds."""
    done = run_python(
        """
        import logging, sys
        import symfonic_store
        for name in ("symfonic_store", "symfonic_store.notify", "symfonic_store.server",
                     "symfonic_store.langgraph.marker"):
            logging.getLogger(name).warning("warned by %s", name)
            logging.getLogger(name).error("failed in %s", name)
        logging.basicConfig(stream=sys.stdout)
        logging.getLogger("symfonic_store.notify").warning("seen once configured")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "seen once configured" in done.stdout and "warned by" not in done.stdout


@pytest.mark.postgres
def test_a_connection_lost_mid_append_prints_nothing(postgres_schema_url: str) -> None:
    """The database connection ends inside a pipelined write: the store raises its DatabaseError and nothing reaches stderr (psycopg's "error ignored terminating Pipeline" warning was printed by logging's last resort)."""
    done = run_python(
        """
        import sys
        import sqlalchemy as sa
        from symfonic_store import DatabaseError, InterruptStore
        from symfonic_store.db.backends import backend_of
        from symfonic_store.store import execute
        from symfonic_store.store.plan import Op

        url = sys.argv[1]
        store = InterruptStore(url)
        store.setup()
        admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)

        def work(conn):
            pid = conn.connection.dbapi_connection.info.backend_pid
            with admin.connect() as other:
                other.execute(sa.text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid})
            # The append's BEGIN is queued in psycopg's pipeline: this read sends it.
            backend_of(conn).executor_for(conn).fetch(conn, sa.text("SELECT 1"), {})

        with store.engine.connect() as conn:
            try:
                execute.execute(conn, Op(work, write=True, appends=True))
            except DatabaseError as exc:
                print("raised", type(exc).__name__)
        admin.dispose()
        store.close()
        """,
        postgres_schema_url,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "raised DatabaseError"
    assert done.stderr == ""
