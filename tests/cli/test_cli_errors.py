"""The command line's failures: exit codes, one-line messages, no tracebacks, no passwords."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_helpers import assert_clean_error, mint_stale, run_cli, run_process

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
    Path(sa.make_url(sqlite_url).database or "").touch()  # an empty SQLite database
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


# --- one voice for bad values ---------------------------------------------------------

ERROR = "symfonic-store: error: "
LIBRARY_WORDS = ("Value error", "Input should", "Invalid value", "is not a valid", "Traceback")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["pending", "--format", "xml"], "invalid --format: 'xml' is not one of table, json"),
        (["sweep", "--format", "xml"], "invalid --format: 'xml' is not one of table, json"),
        (["replay", "t", "--format", "xml"], "invalid --format: 'xml' is not one of table, json"),
        (["audit", "--format", "xml"], "invalid --format: 'xml' is not one of table, json, csv"),
        (["--ttl", "soon", "pending"], "invalid --ttl: must be a number of seconds, got 'soon'"),
        (["--ttl", "-5", "pending"], "invalid --ttl: must be a finite number of seconds >= 0, got '-5'"),
        (["--ttl", "nan", "pending"], "invalid --ttl: must be a finite number of seconds >= 0, got 'nan'"),
        (["sweep", "--ttl", "1e400"], "invalid --ttl: must be a finite number of seconds >= 0, got '1e400'"),
        (["pending", "--older-than", "x"], "invalid --older-than: must be a number of seconds, got 'x'"),
        (["pending", "--older-than", "-1"], "invalid --older-than: must be a finite number of seconds >= 0, got '-1'"),
        (["sweep", "--batch-size", "0"], "invalid --batch-size: must be a whole number from 1 to 9223372036854775807, got '0'"),
        (["sweep", "--batch-size", "ten"], "invalid --batch-size: must be a whole number from 1 to 9223372036854775807, got 'ten'"),
        (["audit", "--since", "x"], "invalid --since: is not an ISO 8601 date or time (e.g. 2026-11-29T12:00:00Z): 'x'"),
        (["audit", "--until", "x"], "invalid --until: is not an ISO 8601 date or time (e.g. 2026-11-29T12:00:00Z): 'x'"),
        (["replay", "t", "--until", "99999999999999999999"], "invalid --until: must be an event position (0 to 9223372036854775807) or a datetime; got 99999999999999999999"),
        (["resume", "t", "i", "--actor", "a", "--response", "NaN"], "invalid --response: is not JSON (NaN is not a JSON value)"),
        (["resume", "t", "i", "--actor", "a", "--response", "{nope"], "invalid --response: is not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        (["resume", "t", "i"], "missing --actor"),
        (["resume"], "missing THREAD"),
        (["pending", "--bogus"], "unknown option --bogus"),
        (["pending", "--forma", "json"], "unknown option --forma (did you mean --format?)"),
    ],
)
def test_bad_flags_are_told_in_the_stores_words_after_the_usage_line(
    tmp_path: Path, args: list[str], line: str
) -> None:
    """A bad choice or value reads `invalid <flag>: <problem>`, after the command's usage line."""
    result = run_cli(*args, cwd=tmp_path)
    assert assert_clean_error(result, 2) == ERROR + line
    assert result.stderr.splitlines()[0].startswith(f"Usage: symfonic-store {args[0] if not args[0].startswith('-') else ''}".rstrip())
    assert not any(words in result.stderr for words in LIBRARY_WORDS), result.stderr
    assert not (tmp_path / "symfonic_store.db").exists()


def _options_taking_values() -> list[tuple[str, str]]:
    """(command path, option) for every option of every command that takes a value."""
    import typer

    from symfonic_store.cli.main import app

    found: list[tuple[str, str]] = []

    def walk(command: object, path: str) -> None:
        for param in getattr(command, "params", []):
            if getattr(param, "param_type_name", "") == "option" and not getattr(param, "is_flag", False):
                found.append((path, max(param.opts, key=len)))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


# What each command needs besides the option under test, to get as far as parsing it.
BASE_ARGS = {
    "resume": ["t", "i-000000000000", "--actor", "a"],
    "settle": ["t", "i-000000000000", "--as", "taken", "--actor", "a"],
    "vote": ["t", "i-000000000000", "approve", "--actor", "a"],
    "replay": ["t"],
    "sweep": ["--dry-run"],
    "archive": ["--before", "2026-01-01", "--out", "/nonexistent/archive.jsonl"],
    "checkpoint": ["--key", "/nonexistent/key"],
    "verify-archive": ["/nonexistent/archive.jsonl"],
    "notify enable": ["erp"],
    "notify retry": ["erp"],
}
TYPED = {"--ttl", "--older-than", "--format", "--batch-size", "--since", "--until", "--response", "--lease-seconds", "--poll-seconds"}


@pytest.mark.parametrize(("command", "option"), _options_taking_values())
def test_every_option_rejects_a_bad_value_in_one_voice(
    command: str, option: str, sqlite_url: str, tmp_path: Path
) -> None:
    """Every option taking a value, given nonsense, works or fails as `invalid <name>: ...` -- never in a library's words.

    (Parsing flags is the same on every backend: SQLite only.)
    """
    if command.startswith("db") or command == "demo":
        pytest.skip("db and demo take no options besides the global ones")
    from symfonic_store import InterruptStore

    with InterruptStore(sqlite_url) as store:
        store.setup()
    words = command.split() if command else ["pending"]
    base = BASE_ARGS.get(command, BASE_ARGS.get(words[0], []))
    argv = [*words, *base, option, "nonsense["] if command else [option, "nonsense[", "pending"]
    # In a folder of its own: `keygen --out nonsense[` writes a key pair where it runs.
    result = run_cli(*argv, db=None if option == "--db" else sqlite_url, cwd=tmp_path)
    assert not any(w in result.stderr + result.stdout for w in LIBRARY_WORDS), (argv, result.stderr)
    if option in TYPED:
        assert assert_clean_error(result, 2).startswith(f"{ERROR}invalid {option}: "), argv
    elif result.returncode == 2:
        assert assert_clean_error(result, 2).startswith(f"{ERROR}invalid "), argv


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ("[" * 5000 + "]" * 5000, "is nested too deeply to be read as JSON"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, "is nested too deeply to be read as JSON"),
        ("[" + "1" * 5000 + "]", "has a number with more than 4300 digits"),
        ('{"amount": Infinity}', "is not JSON (Infinity is not a JSON value)"),
    ],
)
def test_json_too_deep_or_too_odd_to_read_is_bad_input(migrated_url: str, response: str, problem: str) -> None:
    """--response JSON nested 5,000 deep (or otherwise unreadable) exits 2 with one line; nothing is written."""
    from symfonic_store import InterruptStore

    with InterruptStore(migrated_url) as store:
        store.setup()
        interrupt_id = mint_stale(store, "t", age=5)
    result = run_cli("resume", "t", interrupt_id, "--actor", "a", "--response", response, db=migrated_url)
    line = assert_clean_error(result, 2)
    assert line.startswith(f"{ERROR}invalid --response: {problem}")
    assert len(line) < 200 and result.stdout == ""
    assert result.stderr.startswith("Usage: symfonic-store resume")
    with InterruptStore(migrated_url) as store:
        assert [e.type for e in store.history("t")] == ["interrupt.minted"]


def test_version_prints_the_package_version() -> None:
    """--version prints `symfonic-store <version>` from the package and exits 0."""
    from importlib.metadata import version

    import symfonic_store

    result = run_cli("--version")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"symfonic-store {symfonic_store.__version__}\n"
    assert symfonic_store.__version__ == version("symfonic-store")


# --- which database -------------------------------------------------------------------

ONE_DATABASE_COMMANDS = [
    ["pending"], ["audit"], ["replay", "t"], ["verify"], ["sweep"], ["projection", "rebuild"],
    ["resume", "t", "i-000000000000", "--actor", "a"], ["db", "current"], ["db", "downgrade", "base"],
]


@pytest.mark.parametrize("args", ONE_DATABASE_COMMANDS, ids=" ".join)
def test_a_missing_sqlite_file_is_not_created_except_by_db_upgrade(tmp_path: Path, args: list[str]) -> None:
    """Any command but `db upgrade` on a SQLite file that does not exist exits 2 and creates nothing."""
    target = tmp_path / "missing" / "nope.db"
    for kw in ({"db": f"sqlite:///{target}"}, {"env": {"SYMFONIC_STORE_URL": f"sqlite:///{target}"}}):
        result = run_cli(*args, cwd=tmp_path, **kw)  # type: ignore[arg-type]
        line = assert_clean_error(result, 2)
        assert "does not exist" in line and "run `symfonic-store db upgrade`" in line, line
        assert "check the path" in line
        assert not target.parent.exists()

    relative = run_cli(*args, cwd=tmp_path)  # the default: symfonic_store.db here
    assert "does not exist" in assert_clean_error(relative, 2)
    assert list(tmp_path.iterdir()) == []


def test_db_upgrade_creates_the_missing_sqlite_file(tmp_path: Path) -> None:
    """`db upgrade` creates the SQLite file (and its folder); the other commands then work."""
    target = tmp_path / "data" / "store.db"
    url = f"sqlite:///{target}"
    upgraded = run_cli("db", "upgrade", db=url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert target.exists()
    listed = run_cli("pending", "--format", "json", db=url)
    assert (listed.returncode, listed.stdout) == (0, "[]\n")


def test_a_postgres_url_gets_a_hint_naming_the_scheme_to_use(tmp_path: Path) -> None:
    """postgres:// (which SQLAlchemy no longer reads) is refused with the postgresql+psycopg:// to write instead."""
    for args in (["pending"], ["db", "upgrade"], ["demo"]):
        result = run_cli("--db", f"postgres://postgres:{PASSWORD}@127.0.0.1:5432/test", *args, cwd=tmp_path)
        line = assert_clean_error(result, 2)
        assert "postgres://" in line and "write postgresql+psycopg://" in line, line
        assert PASSWORD not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.postgres
def test_a_postgresql_url_without_a_driver_uses_psycopg(postgres_schema_url: str) -> None:
    """postgresql:// without a driver works: the store always talks psycopg 3, psycopg2 is not needed."""
    url = postgres_schema_url.replace("postgresql+psycopg://", "postgresql://", 1)
    assert url.startswith("postgresql://")
    upgraded = run_cli("db", "upgrade", db=url)
    assert upgraded.returncode == 0, upgraded.stderr
    listed = run_cli("pending", "--format", "json", db=url)
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "[]\n", "")
