"""What a checkpoint commits to, pure: a leaf per thread, buckets of leaves, one root.

A thread's **leaf** is ``[thread_id, version, position, last_hash, digest, base]``: its
last event at or below the checkpoint's position, and ``digest``, a chain over every
event's (version, position, hash) -- the hash recomputed from the content -- so the
content, the per-thread order and each event's global position are all committed;
``base`` is the version up to which the thread had been archived when the checkpoint was
taken (its digest then starts from the archived head instead of version 1). The leaves
go into :data:`BUCKETS` buckets by a hash of the thread id, each bucket a hash of its
sorted leaf hashes, the **root** a hash of the buckets. No I/O here: taking and
verifying a checkpoint feed events to a :class:`Tip` and compare leaves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...events import GENESIS_HASH, StoredEvent, canonical_json, stored_hash_is_valid

FORMAT = "symfonic-store/checkpoint/1"
"""The checkpoint format (the root hashes it too). Since parallel writers (SPEC §11) a
checkpoint also carries the gap-safe reader's ``cursor`` and the write transactions
``in_flight`` when it was taken: it waits for those to end before it reads its
position, so ``cursor`` is the position and ``in_flight`` is empty (files written before
carry neither, and read the same)."""
BUCKETS = 4096
HEX = frozenset("0123456789abcdef")


def sha256_hex(text: str) -> str:
    """SHA-256 (hex) of ``text`` in UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_hex64(value: Any) -> bool:
    """Is ``value`` a SHA-256 in hex (64 lower-case hex digits)?"""
    return isinstance(value, str) and len(value) == 64 and set(value) <= HEX


def bucket_of(thread_id: str) -> int:
    """Which of the :data:`BUCKETS` buckets a thread's leaf goes into (12 bits of SHA-256)."""
    return int.from_bytes(hashlib.sha256(thread_id.encode("utf-8")).digest()[:2], "big") >> 4


def base_digest(version: int, position: int, last_hash: str) -> str:
    """Where a thread's digest starts when versions 1..version were archived."""
    return sha256_hex(f"archived:{version}:{position}:{last_hash}")


def step_digest(digest: str, version: int, position: int, hash_: str) -> str:
    """The digest after one more event (its version, global position and hash)."""
    return sha256_hex(f"{digest}:{version}:{position}:{hash_}")


@dataclass(frozen=True, slots=True)
class Leaf:
    """A thread's head as a checkpoint commits to it (see the module docstring)."""

    thread_id: str
    version: int
    position: int
    last_hash: str
    digest: str
    base: int = 0

    def as_list(self) -> list[Any]:
        return [self.thread_id, self.version, self.position, self.last_hash, self.digest, self.base]

    @property
    def hash(self) -> str:
        return sha256_hex(canonical_json(["leaf", *self.as_list()]))

    @classmethod
    def from_list(cls, value: Any) -> Leaf:
        """A leaf from its JSON list form.

        Raises:
            ValueError: it is not ``[thread_id, version, position, last_hash, digest, base]``.
        """
        if not isinstance(value, list) or len(value) != 6:
            raise ValueError("a head is a list of 6 values")
        thread_id, version, position, last_hash, digest, base = value
        if not isinstance(thread_id, str) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (version, position, base)
        ):
            raise ValueError(f"malformed head {value!r:.120}")
        if not (is_hex64(last_hash) and is_hex64(digest)):
            raise ValueError(f"malformed hash in head for {thread_id!r:.80}")
        return cls(thread_id, version, position, last_hash, digest, base)


def bucket_digest(leaves: Iterable[Leaf]) -> str:
    """The hash of one bucket: its leaf hashes in thread-id order."""
    return bucket_digest_of((leaf.thread_id, leaf.hash) for leaf in leaves)


def bucket_digest_of(hashes: Iterable[tuple[str, str]]) -> str:
    """:func:`bucket_digest` from ``(thread_id, leaf hash)`` pairs."""
    return sha256_hex("bucket:" + ",".join(h for _, h in sorted(hashes)))


def root_of(buckets: Mapping[int, tuple[str, int]]) -> str:
    """The root over ``{bucket: (digest, threads)}`` (empty buckets are left out)."""
    return sha256_hex(canonical_json([FORMAT, [[b, d, n] for b, (d, n) in sorted(buckets.items()) if n]]))


def buckets_of(leaves: Iterable[Leaf]) -> dict[int, tuple[str, int]]:
    """Every non-empty bucket's digest and thread count, from all leaves."""
    grouped: dict[int, list[Leaf]] = {}
    for leaf in leaves:
        grouped.setdefault(bucket_of(leaf.thread_id), []).append(leaf)
    return {b: (bucket_digest(group), len(group)) for b, group in grouped.items()}


@dataclass(slots=True)
class Tip:
    """A thread's chain as far as it has been followed: what its leaf would be now."""

    version: int = 0
    position: int = 0
    last_hash: str = GENESIS_HASH
    digest: str = GENESIS_HASH
    base: int = 0

    @classmethod
    def archived(cls, version: int, position: int, last_hash: str) -> Tip:
        """The tip of a thread whose versions 1..version are in an archive."""
        return cls(version, position, last_hash, base_digest(version, position, last_hash), version)

    @classmethod
    def of(cls, leaf: Leaf) -> Tip:
        return cls(leaf.version, leaf.position, leaf.last_hash, leaf.digest, leaf.base)

    def extend(self, event: StoredEvent) -> str | None:
        """Follow one more event; returns what is wrong with it instead (and stays put)."""
        if event.version != self.version + 1:
            return (
                f"expected version {self.version + 1}, found version {event.version} "
                "(a gap, a duplicate or a reordering)"
            )
        if self.version and event.position <= self.position:
            return (
                f"version {event.version} is at position {event.position}, not after version "
                f"{self.version} at position {self.position} (positions were reordered)"
            )
        # The hash recomputed from the content: only an event whose stored hash is that one
        # is followed, so the stored hash is the recomputed one from here on.
        if not stored_hash_is_valid(event, self.last_hash):
            return "the stored hash does not match the event's content and the previous hash"
        self.version = event.version
        self.position = event.position
        self.last_hash = event.hash
        self.digest = step_digest(self.digest, event.version, event.position, event.hash)
        return None

    def leaf(self, thread_id: str) -> Leaf:
        return Leaf(thread_id, self.version, self.position, self.last_hash, self.digest, self.base)
