"""Signed checkpoints: a commitment to the whole log up to a position, kept outside it.

The hash chain of each thread catches careless edits, and the projection heads catch a
removed tail, but whoever can write to the database can re-forge both: recompute every
hash with :func:`~symfonic_store.events.event_hash` and fix up the projection rows. A
chain can only be trusted against a head kept *outside* the database. A checkpoint is
that head: a small JSON document signed with an Ed25519 key the database never sees.

One concept per module (docs/evidence.md has the format):

- :mod:`.keys`: load, make and use the Ed25519 keys (``key_id``, ``sign``, ...);
- :mod:`.commitment`: what a checkpoint commits to, pure -- per thread a leaf, the leaves
  in :data:`BUCKETS` buckets, one root -- so any change, removal, insertion or reordering
  of an event at or below the position changes a leaf, and the root; events appended
  later change nothing;
- :mod:`.document`: the signed document (:class:`Checkpoint`), read back and checked;
- :mod:`.taking`: :func:`take`, work proportional to the threads changed since the last
  checkpoint, never signing on top of altered state;
- :mod:`.verifying`: :func:`verify_checkpoint`, one pass over the events it covers,
  naming the thread and, where it can tell, the position of what changed.

Each checkpoint lists the leaves that changed since the previous one (``heads``; all of
them for the first), and names the previous one (``previous``: its position, root and
id). Folding that chain of signed documents gives every committed leaf.

This package re-exports those names, so ``from symfonic_store.services import evidence``
keeps working; new code imports from the module that holds the concept.
"""

from __future__ import annotations

from .commitment import (
    BUCKETS,
    FORMAT,
    HEX,
    Leaf,
    Tip,
    base_digest,
    bucket_digest,
    bucket_digest_of,
    bucket_of,
    buckets_of,
    root_of,
    step_digest,
)
from .document import (
    DOCUMENT_KEYS,
    READER_KEYS,
    STATEMENT_KEYS,
    Checkpoint,
    Previous,
    heads_digest,
    parse_checkpoint,
    signature_problem,
)
from .keys import (
    PrivateKeyLike,
    PublicKeyLike,
    generate_key,
    key_id,
    keys_by_id,
    load_private_key,
    load_public_key,
    sign,
    signature_holds,
)
from .taking import take
from .verifying import CheckpointProblem, CheckpointReport, verify_checkpoint

__all__ = [
    "BUCKETS",
    "DOCUMENT_KEYS",
    "FORMAT",
    "HEX",
    "READER_KEYS",
    "STATEMENT_KEYS",
    "Checkpoint",
    "CheckpointProblem",
    "CheckpointReport",
    "Leaf",
    "Previous",
    "PrivateKeyLike",
    "PublicKeyLike",
    "Tip",
    "base_digest",
    "bucket_digest",
    "bucket_digest_of",
    "bucket_of",
    "buckets_of",
    "generate_key",
    "heads_digest",
    "key_id",
    "keys_by_id",
    "load_private_key",
    "load_public_key",
    "parse_checkpoint",
    "root_of",
    "sign",
    "signature_holds",
    "signature_problem",
    "step_digest",
    "take",
    "verify_checkpoint",
]
