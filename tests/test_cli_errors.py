"""The command line's failures: exit codes, one-line messages, no tracebacks, no passwords."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, run_cli, run_process

PASSWORD = "s3cr3tpw"
UNREACHABLE = f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:1/test"


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["pending", "--bogus"], {}, "--bogus"),
        (["sweep", "--batch-size", "0"], {}, "--batch-size"),
        (["audit", "--format", "xml"], {}, "--format"),
        (["--ttl", "soon", "pending"], {}, "--ttl"),
        (["--ttl", "-5", "pending"], {}, "--ttl"),
        (["pending"], {"SYMFONIC_STORE_TTL": "soon"}, "SYMFONIC_STORE_TTL"),
        (["replay", "t", "--until", "last tuesday"], {}, "--until"),
        (["sweep", "--graph", "no_colon_here"], {}, "--graph"),
        (["--db", "mysql://root@localhost/app", "pending"], {}, "database URL"),
        (["--db", "not a url at all", "pending"], {}, "database URL"),
    ],
)
def test_bad_usage_or_configuration_exits_2_with_one_error_line(
    tmp_path: Path, args: list[str], env: dict[str, str], named: str
) -> None:
    """A bad flag, value, URL or environment variable exits 2 and names what is wrong."""
    result = run_cli(*args, env=env, cwd=tmp_path)
    assert named in assert_clean_error(result, 2)
    assert result.stdout == ""


def test_a_bad_flag_adds_the_usage_line(tmp_path: Path) -> None:
    """An unknown option prints the command's usage line before the error."""
    result = run_cli("audit", "--bogus", cwd=tmp_path)
    assert_clean_error(result, 2)
    assert result.stderr.splitlines()[0].startswith("Usage: symfonic-store audit")


def test_unreachable_database_exits_2_without_password_or_traceback(tmp_path: Path) -> None:
    """A database that refuses connections is a configuration error; the password never shows."""
    for args in (["pending"], ["db", "upgrade"], ["sweep", "--format", "json"]):
        result = run_cli("--db", UNREACHABLE, *args, cwd=tmp_path)
        line = assert_clean_error(result, 2)
        assert "127.0.0.1" in line
        assert PASSWORD not in result.stdout + result.stderr

    # A real process too: what a cron job's log would hold, exit code included.
    traced = run_process("--traceback", "--db", UNREACHABLE, "audit", cwd=tmp_path)
    assert traced.returncode == 2
    assert "Traceback (most recent call last)" in traced.stderr
    assert traced.stderr.rstrip().splitlines()[-1].startswith("symfonic-store: error:")
    assert PASSWORD not in traced.stdout + traced.stderr


def test_traceback_flag_shows_the_traceback_of_an_unmigrated_database(sqlite_url: str) -> None:
    """--traceback prints the traceback, then the same one-line error."""
    plain = run_cli("pending", db=sqlite_url)
    line = assert_clean_error(plain, 2)
    traced = run_cli("--traceback", "pending", db=sqlite_url)
    assert traced.returncode == 2
    assert "Traceback (most recent call last)" in traced.stderr
    assert "SchemaNotMigratedError" in traced.stderr
    assert traced.stderr.rstrip().splitlines()[-1] == line


@pytest.mark.postgres
def test_password_never_shows_when_working_with_the_real_server(postgres_schema_url: str) -> None:
    """With a password in the URL every output masks it, on success and on failure."""
    url = sa.make_url(postgres_schema_url).set(password=PASSWORD).render_as_string(hide_password=False)
    outputs = []

    upgraded = run_cli("--db", url, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "postgres:***@127.0.0.1" in upgraded.stdout
    outputs.append(upgraded)

    listed = run_cli("pending", "--format", "json", env={"SYMFONIC_STORE_URL": url})
    assert listed.returncode == 0 and listed.stdout.strip() == "[]"
    outputs.append(listed)

    refused = run_cli("--traceback", "--db", url, "resume", "t", "i-000000000000", "--actor", "eve")
    assert refused.returncode == 1 and "Traceback" in refused.stderr
    outputs.append(refused)

    missing_db = sa.make_url(url).set(database="no_such_database_here").render_as_string(hide_password=False)
    failed = run_cli("--db", missing_db, "verify")
    assert_clean_error(failed, 2)
    outputs.append(failed)

    for result in outputs:
        assert PASSWORD not in result.stdout + result.stderr
