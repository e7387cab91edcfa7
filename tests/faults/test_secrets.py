"""A database password never leaks: not in errors, logs, reprs or reports.

The password is put in the URL three ways (userinfo, userinfo with characters that need
percent-encoding, and libpq's ``?password=`` query parameter). The shared PostgreSQL
server uses trust auth, so it ignores the password and the store connects; the same URL
at a port nobody listens on fails. Every store operation, and every failure we can
provoke, is run with every logger at DEBUG. Then the password (raw and percent-encoded)
must not appear in the ``str``/``repr`` of any exception raised -- following
``__cause__`` and ``__context__`` all the way down -- nor in any log record (message,
arguments, formatted traceback), nor in the ``repr``/``str`` of the stores, their
engines and their URLs, nor in any report the store returns -- nor in anything the
command line prints or logs, run in this process so its logs are captured too.
"""

from __future__ import annotations

import logging
import sys
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import factories
import pytest
import sqlalchemy as sa
from cli_helpers import run_cli
from pgcluster import free_port

from symfonic_store import (
    AsyncInterruptStore,
    DatabaseError,
    InterruptStore,
    SchemaNotMigratedError,
    SymfonicStoreError,
)

PLAIN = "s3cr3tpw"
SPECIAL = "p@ss:w/rd s3cr3t%X"
STYLES = ("userinfo", "userinfo-special", "query")


def password_of(style: str) -> str:
    return SPECIAL if style == "userinfo-special" else PLAIN


def forms(password: str) -> set[str]:
    """The password as it could show up: raw, percent-encoded, and as SQLAlchemy renders a URL."""
    rendered = sa.make_url("postgresql://u@h/d").set(password=password).render_as_string(hide_password=False)
    as_rendered = rendered.split("://u:", 1)[1].rsplit("@h/", 1)[0]
    return {password, urllib.parse.quote(password, safe=""), urllib.parse.quote_plus(password), as_rendered}


def url_with_password(url: str, style: str, *, port: int | None = None) -> str:
    parsed = sa.make_url(url)
    if port is not None:
        parsed = parsed.set(port=port)
    if style == "query":
        parsed = parsed.update_query_dict({"password": PLAIN})
    else:
        parsed = parsed.set(password=password_of(style))
    return parsed.render_as_string(hide_password=False)


class Witness:
    """Collects every text the store produced and checks none holds the password."""

    def __init__(self, password: str) -> None:
        self.forms = forms(password)
        self.texts: list[tuple[str, str]] = []
        self.errors: list[BaseException] = []

    def see(self, label: str, value: Any) -> None:
        self.texts.append((f"str({label})", str(value)))
        self.texts.append((f"repr({label})", repr(value)))

    def error(self, label: str, exc: BaseException) -> None:
        self.errors.append(exc)
        pending, seen = [exc], set()
        while pending:
            e = pending.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            self.see(f"{label}: {type(e).__name__}", e)
            self.see(f"{label}: {type(e).__name__}.args", e.args)
            pending.extend(x for x in (e.__cause__, e.__context__) if x is not None)

    def call(self, label: str, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except SymfonicStoreError as exc:
            self.error(label, exc)
            return None
        self.see(label, result)
        return result

    async def acall(self, label: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        try:
            result = await fn()
        except SymfonicStoreError as exc:
            self.error(label, exc)
            return None
        self.see(label, result)
        return result

    def logs(self, records: list[logging.LogRecord]) -> None:
        formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
        for record in records:
            self.texts.append((f"log {record.name}", formatter.format(record)))
            self.texts.append((f"log args {record.name}", repr(record.args)))

    def assert_clean(self) -> None:
        leaks = [(label, text) for label, text in self.texts if any(f in text for f in self.forms)]
        assert not leaks, f"the password leaked in {len(leaks)} place(s): {leaks[:3]}"


@pytest.fixture
def every_logger_at_debug(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every logger (root, SQLAlchemy, Alembic, psycopg, the store ...) at DEBUG, captured."""
    caplog.set_level(logging.DEBUG)
    names = ["sqlalchemy", "alembic", "psycopg", "symfonic_store", "langgraph", "asyncio"]
    for name in [*names, *logging.Logger.manager.loggerDict]:
        caplog.set_level(logging.DEBUG, logger=name)
    yield caplog


marker = partial(factories.plain_marker, name="approval", age=None)


def exercise(store: InterruptStore, w: Witness) -> None:
    """Every operation of the sync store, and the failures it can meet."""
    w.call("setup", store.setup)
    w.call("mint", lambda: store.mint("t", marker("i-1"), actor="agent"))
    w.call("resume", lambda: store.resume("t", "i-1", {"ok": True}, actor="alice"))
    w.call("resume again", lambda: store.resume("t", "i-1", {"ok": False}, actor="bob"))
    w.call("unknown", lambda: store.resume("t", "nope", None, actor="bob"))
    w.call("bad input", lambda: store.mint("", marker("i-2")))
    w.call("mint 2", lambda: store.mint("u", marker("i-2") | {"minted_at": 1.0}))
    w.call("route", lambda: store.record_route("u", "interrupt", run_id="r"))
    w.call("expire unknown", lambda: store.expire("u", "nope"))
    w.call("sweep", lambda: store.sweep(ttl_seconds=60, batch_size=1))
    w.call("sweep dry", lambda: store.sweep(ttl_seconds=60, dry_run=True))
    w.call("pending", lambda: store.pending("t"))
    w.call("state", lambda: store.state("t"))
    w.call("list_pending", store.list_pending)
    w.call("history", lambda: store.history("t"))
    w.call("events", store.events)
    w.call("replay", lambda: list(store.replay("t")))
    w.call("audit", store.audit)
    w.call("audit as dicts", lambda: [vars(r) if hasattr(r, "__dict__") else r for r in store.audit()])
    w.call("verify", store.verify)
    w.call("rebuild", store.rebuild_projection)


def test_no_password_leaks_from_a_working_store(
    postgres_schema_url: str, every_logger_at_debug: pytest.LogCaptureFixture
) -> None:
    """Operations and failures against a reachable server never show the password anywhere."""
    for style in STYLES:
        w = Witness(password_of(style))
        url = url_with_password(postgres_schema_url, style)
        every_logger_at_debug.clear()
        store = InterruptStore(url)
        for label, value in [("store", store), ("engine", store.engine), ("url", store.engine.url)]:
            w.see(label, value)
        if style == "userinfo":  # first pass only: the schema is still empty
            with pytest.raises(SchemaNotMigratedError) as info:
                store.state("t")
            w.error("not migrated", info.value)
        exercise(store, w)
        store.close()
        w.logs(every_logger_at_debug.records)
        assert every_logger_at_debug.records, "no log records captured: the check would be vacuous"
        assert len(w.errors) >= 4, "the failures were not provoked"
        w.assert_clean()


@pytest.mark.parametrize("style", STYLES)
def test_no_password_leaks_from_an_unreachable_server(
    style: str, every_logger_at_debug: pytest.LogCaptureFixture
) -> None:
    """Every operation against a port nobody listens on fails with DatabaseError and no password."""
    w = Witness(password_of(style))
    url = url_with_password(
        "postgresql+psycopg://postgres@127.0.0.1/test", style, port=free_port()
    )
    store = InterruptStore(url)
    w.see("store", store)
    w.see("engine", store.engine)
    exercise(store, w)
    store.close()
    # Input is checked before connecting (the empty thread id); everything else meets the
    # dead port and says so with the store's own error.
    assert [type(e).__name__ for e in w.errors if not isinstance(e, DatabaseError)] == [
        "InvalidInputError"
    ]
    assert len(w.errors) > 10
    assert any("check that it is running" in str(e) for e in w.errors)
    w.logs(every_logger_at_debug.records)
    w.assert_clean()


async def aexercise(store: AsyncInterruptStore, w: Witness) -> None:
    """The asyncio store's operations, and one failure (a second, different resume)."""
    await w.acall("setup", store.setup)
    await w.acall("mint", lambda: store.mint("t", marker("i-1")))
    await w.acall("resume", lambda: store.resume("t", "i-1", None, actor="alice"))
    await w.acall("resume again", lambda: store.resume("t", "i-1", {"x": 1}, actor="bob"))
    await w.acall("sweep", lambda: store.sweep(ttl_seconds=1))
    await w.acall("audit", store.audit)
    await w.acall("verify", store.verify)
    await w.acall("replay", lambda: store.replay("t"))


@pytest.mark.parametrize("reachable", [True, False], ids=["reachable", "unreachable"])
async def test_no_password_leaks_from_the_async_store(
    reachable: bool, postgres_schema_url: str, every_logger_at_debug: pytest.LogCaptureFixture
) -> None:
    """The asyncio store keeps the password out of its reprs, errors and logs too."""
    for style in STYLES:
        w = Witness(password_of(style))
        port = None if reachable else free_port()
        url = url_with_password(postgres_schema_url, style, port=port)
        every_logger_at_debug.clear()
        store = AsyncInterruptStore(url)
        for label, value in [
            ("store", store),
            ("engine", store.engine),
            ("sync engine", store.engine.sync_engine),
            ("url", store.engine.url),
        ]:
            w.see(label, value)
        await aexercise(store, w)
        await store.aclose()
        if reachable:
            assert len(w.errors) == 1  # the second resume
        else:
            assert w.errors and all(isinstance(e, DatabaseError) for e in w.errors)
        w.logs(every_logger_at_debug.records)
        w.assert_clean()


@pytest.mark.parametrize("style", STYLES)
def test_no_password_in_errors_about_the_url_itself(style: str) -> None:
    """A URL refused before connecting (bad option, bad port, wrong database) hides the password."""
    w = Witness(password_of(style))
    base = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    bad = [
        sa.make_url(url_with_password(base, style))
        .update_query_dict({"connect_timeout": "abc"})
        .render_as_string(hide_password=False),
        url_with_password(base, style, port=99_999_999),
        url_with_password(base, style).replace("postgresql+psycopg", "mysql", 1),
        url_with_password(base, style).replace("127.0.0.1:5432", "127.0.0.1:port", 1),
    ]
    for n, url in enumerate(bad):
        try:
            store = InterruptStore(url)
        except SymfonicStoreError as exc:
            w.error(f"url {n}", exc)
            continue
        w.see(f"store {n}", store)
        w.call(f"state {n}", lambda: store.state("t"))  # noqa: B023 - called right here
        store.close()
    assert len(w.errors) == len(bad)
    w.assert_clean()


# --- the command line ----------------------------------------------------------------

CLI_COMMANDS = [
    ["db", "upgrade"],
    ["db", "current"],
    ["pending"],
    ["pending", "--format", "json"],
    ["resume", "t-cli", "i-cli", "--actor", "alice", "--response", '{"ok": true}'],
    ["resume", "t-cli", "i-cli", "--actor", "bob"],  # refused: already resolved
    ["audit"],
    ["audit", "--format", "csv"],
    ["replay", "t-cli"],
    ["sweep", "--ttl", "0", "--format", "json"],
    ["verify"],
    ["projection", "rebuild"],
    ["db", "downgrade", "base", "--yes"],
]


@pytest.mark.parametrize("reachable", [True, False], ids=["reachable", "unreachable"])
@pytest.mark.parametrize("style", STYLES)
def test_no_password_in_the_command_lines_output_or_logs(
    style: str, reachable: bool, postgres_schema_url: str, every_logger_at_debug: pytest.LogCaptureFixture
) -> None:
    """Every command, in this process, given the URL by --db or $SYMFONIC_STORE_URL, with or without --traceback, never shows the password."""
    w = Witness(password_of(style))
    url = url_with_password(postgres_schema_url, style, port=None if reachable else free_port())
    codes = []
    for how in ("--db", "env", "--traceback"):
        every_logger_at_debug.clear()
        for args in CLI_COMMANDS:
            if args[0] == "pending" and reachable:
                with InterruptStore(url) as store:  # something for the later commands to show
                    if store.pending("t-cli") is None and not store.history("t-cli"):
                        store.mint("t-cli", marker("i-cli"))
            if how == "env":
                result = run_cli(*args, env={"SYMFONIC_STORE_URL": url})
            else:
                result = run_cli(*(["--traceback"] if how == "--traceback" else []), *args, db=url)
            codes.append(result.returncode)
            w.texts.append((f"{how} {' '.join(args)}: stdout", result.stdout))
            w.texts.append((f"{how} {' '.join(args)}: stderr", result.stderr))
        w.logs(every_logger_at_debug.records)
    if reachable:
        assert codes.count(0) >= 3 * (len(CLI_COMMANDS) - 1) and 1 in codes, codes
        assert any("***" in text for _, text in w.texts), "no masked URL was printed: the check would be vacuous"
    else:
        assert set(codes) == {2}, codes
        assert any("Traceback (most recent call last)" in text for _, text in w.texts)
    w.assert_clean()


@pytest.mark.parametrize("style", STYLES)
def test_the_command_line_masks_a_password_that_a_users_graph_puts_in_its_errors(
    style: str, postgres_schema_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --graph whose import or wake-up fails with the URL in its message: the CLI's own masking hides the password."""
    w = Witness(password_of(style))
    url = url_with_password(postgres_schema_url, style)
    with InterruptStore(url) as store:
        store.setup()
        store.mint("t-wake", marker("i-wake") | {"minted_at": 1.0})

    class LeakyGraph:
        def get_state(self, config: Any) -> Any:
            # What LangGraph shows for the seed node's interrupt (rule N1), under its own id.
            n1 = {"type": "interrupt", "name": "approval", "interrupt_id": "i-wake", "payload": {}}
            # A snapshot of a saved checkpoint (the sweep wakes only a thread the graph holds).
            return SimpleNamespace(
                interrupts=[SimpleNamespace(id="lg-1", value=n1)], tasks=(),
                created_at="2030-01-01T00:00:00+00:00", metadata={"source": "loop", "step": 1},
            )

        def invoke(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"the checkpointer at {url} went away (password {password_of(style)})")

    module = ModuleType("leaky_graph")
    module.graph = LeakyGraph()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "leaky_graph", module)
    woke = run_cli("sweep", "--ttl", "60", "--graph", "leaky_graph:graph", env={"SYMFONIC_STORE_URL": url})
    assert woke.returncode == 1 and "wake-up failed" in woke.stderr, woke.stderr

    (tmp_path / "leaky_import.py").write_text(f"raise RuntimeError('cannot reach {url}')\n")
    imported = run_cli("--traceback", "sweep", "--graph", "leaky_import:graph", db=url, cwd=tmp_path)
    assert imported.returncode == 2 and "Traceback (most recent call last)" in imported.stderr

    for label, result in (("wake-up", woke), ("import", imported)):
        w.texts.append((f"{label} stdout", result.stdout))
        w.texts.append((f"{label} stderr", result.stderr))
    w.assert_clean()
    assert "***" in woke.stderr and "***" in imported.stderr, "nothing masked: the check would be vacuous"
