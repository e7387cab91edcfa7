"""The answer id a gateway hands the graph with every answer (SPEC §12).

``config["configurable"]["symfonic_answer_id"]`` is the same on every delivery of an
answer to one interrupt, and on every later answer to it: a tool that records its effect
under this id acts once per interrupt, even when a crash after its effect made the store
ask an operator, and a second approval ran the node again.
"""

from __future__ import annotations

import uuid
from typing import Final

ANSWER_ID_KEY: Final = "symfonic_answer_id"
"""The key of the answer id in ``config["configurable"]``."""

_NAMESPACE: Final = uuid.UUID("5b0f2f3c-6a52-4f5e-9b7c-1c7f0c2a9e41")


def answer_id(thread_id: str, interrupt_id: str) -> str:
    """The answer id of an interrupt: derived from its thread and id, so it never changes."""
    return uuid.uuid5(_NAMESPACE, f"{thread_id}\x1f{interrupt_id}").hex
