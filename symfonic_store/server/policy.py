"""The policy file of ``serve --policy FILE`` (SPEC §9): read by :mod:`symfonic_store.policy`,
a layer below the server, because the sweep reads its reminders and escalations too."""

from __future__ import annotations

from ..policy import DEFAULT as DEFAULT
from ..policy import Chase as Chase
from ..policy import Policy as Policy
from ..policy import Rule as Rule

__all__ = ["DEFAULT", "Chase", "Policy", "Rule"]
