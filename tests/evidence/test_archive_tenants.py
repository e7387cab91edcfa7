"""An archive keeps whose interrupt it was (SPEC §10, §15): a mint's tenant is on its line.

The tenant lives in a column beside the mint, outside its hashed data, so the archive
writes it beside the event's columns; only the manifest's content hash (and so its
signature) covers it. ``t-acme`` is minted for tenant ``acme``, ``t-plain`` without one;
both are answered in January and archived with the clock in March.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import assert_clean_error, run_cli
from factories import marker
from freezegun import freeze_time
from langgraph.types import Command  # noqa: F401 - before any frozen clock: pydantic v1 breaks on a fake date

from symfonic_store import EvidenceError, InterruptStore
from symfonic_store.events import canonical_json
from symfonic_store.services import archive as archiving
from symfonic_store.services.evidence import generate_key, keys_by_id

JANUARY = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
FEBRUARY = datetime(2026, 2, 1, tzinfo=UTC)
MARCH = datetime(2026, 3, 5, 9, 0, tzinfo=UTC)


def answered(store: InterruptStore, thread_id: str, *, tenant: str | None = None) -> None:
    store.record_route(thread_id, "continue", run_id="r1")
    store.mint(thread_id, marker("i-1", run_id="r1", amount=420), tenant=tenant)
    store.resume(thread_id, "i-1", {"approved": True}, actor="alice")


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private, public = generate_key(tmp_path / "signing")
    return private, public


@pytest.fixture
def finished(store: InterruptStore) -> Iterator[InterruptStore]:
    """``t-acme`` (tenant acme) and ``t-plain`` (no tenant), both answered in January."""
    with freeze_time(JANUARY) as clock:
        answered(store, "t-acme", tenant="acme")
        answered(store, "t-plain")
        clock.move_to(MARCH)
        yield store


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:-1]]


def test_an_archived_mint_carries_its_tenant_and_every_other_line_is_the_event_alone(
    finished: InterruptStore, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """The acme mint's line is its columns plus ``"tenant": "acme"``; every other line, the untenanted mint's too, is byte for byte the event's columns as before tenants."""
    store = finished
    before = {t: store.history(t) for t in ("t-acme", "t-plain")}
    out = tmp_path / "2026-01.jsonl"
    result = store.archive(FEBRUARY, out, key=keys[0])
    assert result.threads == ["t-acme", "t-plain"] and result.removed == 6
    assert store.history("t-acme") == []  # the table no longer says whose it was: the file must

    raw = out.read_bytes().splitlines(keepends=True)[1:-1]
    expected = [
        {**e.as_dict(), "tenant": "acme"} if (e.thread_id, e.type) == ("t-acme", "interrupt.minted") else e.as_dict()
        for t in ("t-acme", "t-plain")
        for e in before[t]
    ]
    assert [json.loads(line) for line in raw] == expected
    assert [canonical_json(e) + "\n" for e in expected] == [line.decode() for line in raw]
    assert [line.get("tenant") for line in lines_of(out)] == [None, "acme", None, None, None, None]
    assert sum("tenant" in line for line in lines_of(out)) == 1

    check = archiving.verify_archive(out, keys_by_id([keys[1]]))
    assert check.ok and check.events == 6 and check.signed_by is not None, str(check)
    archive = archiving.read_archive(out)
    assert archive.tenants() == {("t-acme", "i-1"): "acme"}
    assert list(archive.events()) == before["t-acme"] + before["t-plain"]


def test_a_thread_without_a_tenant_archives_exactly_as_before(
    store: InterruptStore, tmp_path: Path
) -> None:
    """Only untenanted threads: no line has a tenant key, each line is the canonical JSON of the event's columns, and the archive lists no tenants."""
    with freeze_time(JANUARY) as clock:
        answered(store, "t-plain")
        history = store.history("t-plain")
        clock.move_to(MARCH)
        out = tmp_path / "plain.jsonl"
        store.archive(FEBRUARY, out)
    raw = out.read_text().splitlines(keepends=True)[1:-1]
    assert raw == [canonical_json(e.as_dict()) + "\n" for e in history]
    assert all("tenant" not in json.loads(line) for line in raw)
    assert archiving.verify_archive(out).ok
    assert archiving.read_archive(out).tenants() == {}


def _with_content_hash_recomputed(path: Path) -> None:
    """Make the manifest's ``content`` match the edited lines again, keeping its signature:
    only the signature can then tell."""
    lines = path.read_bytes().splitlines(keepends=True)
    tail = json.loads(lines[-1])
    tail["manifest"]["content"] = hashlib.sha256(b"".join(lines[:-1])).hexdigest()
    path.write_bytes(b"".join(lines[:-1]) + canonical_json(tail).encode() + b"\n")


def test_an_edited_tenant_fails_verify_archive(
    finished: InterruptStore, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """A tenant changed, removed, added or of the wrong type breaks the content hash; with the content hash forged to match, the signature still fails."""
    store = finished
    out = tmp_path / "a.jsonl"
    store.archive(FEBRUARY, out, key=keys[0])
    text = out.read_text()
    public = keys_by_id([keys[1]])
    assert archiving.verify_archive(out, public).ok

    edits = {
        "changed": text.replace('"tenant":"acme"', '"tenant":"globex"'),
        "removed": text.replace(',"tenant":"acme"', ""),
        "added": text.replace('"thread_id":"t-plain"', '"tenant":"acme","thread_id":"t-plain"', 1),
    }
    for name, edited in edits.items():
        assert edited != text, name
        path = tmp_path / f"{name}.jsonl"
        path.write_text(edited)
        for given in (None, public):
            check = archiving.verify_archive(path, given)
            assert not check.ok, name
            assert any("does not match the manifest's hash" in p for p in check.problems), (name, str(check))
        _with_content_hash_recomputed(path)
        assert archiving.verify_archive(path).ok, name  # the chain does not cover the tenant...
        forged = archiving.verify_archive(path, public)  # ...the signed manifest does
        assert not forged.ok and any("signature does not hold" in p for p in forged.problems), (name, str(forged))

    wrong_type = tmp_path / "wrong-type.jsonl"
    wrong_type.write_text(text.replace('"tenant":"acme"', '"tenant":7'))
    check = archiving.verify_archive(wrong_type)
    assert not check.ok and any("tenant is not a non-empty string" in p for p in check.problems), str(check)
    with pytest.raises(EvidenceError, match="tenant"):
        archiving.read_archive(wrong_type).tenants()

    # On the command line too: the changed tenant, its content hash forged, exits 1.
    line = assert_clean_error(
        run_cli("verify-archive", str(tmp_path / "changed.jsonl"), "--public-key", str(keys[1])), 1
    )
    assert "signature does not hold" in line
