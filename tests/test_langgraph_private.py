"""LangGraph's private names the integration relies on are still where it reads them.

The interrupt node reads the per-task scratchpad, and the gateway and the recording
checkpointer read and rewrite a task's resume write. These names are private to
LangGraph; a release that moves one must fail here, loudly, not misbehave quietly.
"""

from __future__ import annotations

import importlib.metadata

from packaging.version import Version


def test_langgraph_is_below_its_next_major_version() -> None:
    """The pin in pyproject.toml holds: the private names below are those of langgraph 1.x."""
    version = Version(importlib.metadata.version("langgraph"))
    assert Version("1.0") <= version < Version("2.0")


def test_the_channel_and_config_names_are_where_the_integration_reads_them() -> None:
    """RESUME, INTERRUPT, ERROR and the scratchpad key exist with the values relied on."""
    from langgraph._internal import _constants

    assert _constants.RESUME == "__resume__"
    assert _constants.INTERRUPT == "__interrupt__"
    assert _constants.ERROR == "__error__"
    assert _constants.CONFIG_KEY_SCRATCHPAD == "__pregel_scratchpad"


def test_the_scratchpad_still_has_what_the_node_reads() -> None:
    """The per-task scratchpad keeps ``resume`` and ``get_null_resume``."""
    from langgraph._internal._scratchpad import PregelScratchpad

    fields = getattr(PregelScratchpad, "__dataclass_fields__", {})
    assert "resume" in fields and "get_null_resume" in fields


def test_the_integration_modules_import_the_private_names_not_their_fallbacks() -> None:
    """The gateway and recording checkpointer found LangGraph's own constants."""
    from langgraph._internal._constants import ERROR, INTERRUPT, RESUME

    from symfonic_store.langgraph import gateway, marker, recording

    assert gateway._RESUME_CHANNEL is RESUME
    assert (recording._RESUME, recording._INTERRUPT, recording._ERROR) == (RESUME, INTERRUPT, ERROR)
    assert marker._SCRATCHPAD_KEY == "__pregel_scratchpad"
