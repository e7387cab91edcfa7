"""``--langgraph-url``'s settings (SPEC §13): the API key's sources, never shown; the URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from symfonic_store import InterruptStore
from symfonic_store.agent_server_client import ServedGraphs, read_api_key
from symfonic_store.errors import InvalidInputError


def test_the_key_file_wins_over_the_environment(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("  from-the-file\n")
    assert read_api_key(key, {"LANGGRAPH_API_KEY": "from-env"}) == "from-the-file"
    assert read_api_key(None, {"LANGGRAPH_API_KEY": " from-env "}) == "from-env"
    assert read_api_key(None, {}) is None


def test_an_unreadable_or_empty_key_file_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(InvalidInputError, match="is empty"):
        read_api_key(empty, {})
    with pytest.raises(InvalidInputError, match="cannot be read"):
        read_api_key(tmp_path / "missing", {})


def test_the_url_must_be_http(store: InterruptStore) -> None:
    with pytest.raises(InvalidInputError, match="--langgraph-url"):
        ServedGraphs(store, "127.0.0.1:2024", client=object())
    assert ServedGraphs(store, "http://127.0.0.1:2024/", client=object()).url == "http://127.0.0.1:2024"
