"""The text of a file the server is configured with: read by :mod:`symfonic_store.config_file`
(the policy file is also the sweep's, a layer below the server)."""

from __future__ import annotations

from ..config_file import read_config_text as read_config_text

__all__ = ["read_config_text"]
