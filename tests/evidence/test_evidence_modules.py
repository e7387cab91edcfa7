"""The evidence package: one concept per module, every name still reachable from the package."""

from __future__ import annotations

import importlib

import pytest

from symfonic_store.services import evidence

# Where each name lives now; ``symfonic_store.services.evidence`` keeps re-exporting it.
HOMES = {
    "keys": [
        "PrivateKeyLike", "PublicKeyLike", "generate_key", "key_id", "keys_by_id",
        "load_private_key", "load_public_key", "sign", "signature_holds",
    ],
    "commitment": [
        "BUCKETS", "FORMAT", "HEX", "Leaf", "Tip", "base_digest", "bucket_digest",
        "bucket_digest_of", "bucket_of", "buckets_of", "root_of", "step_digest",
    ],
    "document": [
        "DOCUMENT_KEYS", "READER_KEYS", "STATEMENT_KEYS", "Checkpoint", "Previous",
        "heads_digest", "parse_checkpoint", "signature_problem",
    ],
    "taking": ["take"],
    "verifying": ["CheckpointProblem", "CheckpointReport", "verify_checkpoint"],
}


@pytest.mark.parametrize("module", sorted(HOMES))
def test_each_name_is_its_home_modules_own(module: str) -> None:
    """Each name the package exports is the very object its concept module defines."""
    home = importlib.import_module(f"symfonic_store.services.evidence.{module}")
    for name in HOMES[module]:
        assert getattr(evidence, name) is getattr(home, name), name


def test_the_package_exports_every_name_and_no_other() -> None:
    """The package's ``__all__`` is exactly the names of its modules listed above."""
    assert sorted(evidence.__all__) == sorted(n for names in HOMES.values() for n in names)


def test_what_the_store_calls_is_reachable_from_the_package() -> None:
    """store/ops.py's ``evidence.<function>`` calls and imports resolve on the package."""
    for name in (
        "parse_checkpoint", "key_id", "load_private_key", "verify_checkpoint", "keys_by_id",
        "take", "Checkpoint", "CheckpointProblem", "CheckpointReport",
    ):
        assert callable(getattr(evidence, name)), name
