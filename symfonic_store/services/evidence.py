"""Signed checkpoints: a commitment to the whole log up to a position, kept outside it.

The hash chain of each thread catches careless edits, and the projection heads catch a
removed tail, but whoever can write to the database can re-forge both: recompute every
hash with :func:`~symfonic_store.events.event_hash` and fix up the projection rows. A
chain can only be trusted against a head kept *outside* the database. A checkpoint is
that head: a small JSON document signed with an Ed25519 key the database never sees.

What a checkpoint commits to (docs/evidence.md has the format):

- per thread, a **leaf** ``[thread_id, version, position, last_hash, digest, base]``: the
  thread's last event at or below the checkpoint's position, and ``digest``, a chain over
  every event's (version, position, hash) -- the hash recomputed from the content -- so
  the content, the per-thread order and each event's global position are all committed;
  ``base`` is the version up to which the thread had been archived when the checkpoint
  was taken (its digest then starts from the archived head instead of version 1);
- the **root**: the leaves grouped into :data:`BUCKETS` buckets by a hash of the thread
  id, each bucket a hash of its sorted leaf hashes, the root a hash of the buckets. So
  any change, removal, insertion or reordering of an event at or below the position
  changes a leaf, and the root; events appended later change nothing.

Costs. The store keeps the latest checkpoint's leaves and bucket hashes
(``symfonic_checkpoint_heads``/``_buckets``). Taking the next one reads only the events
after the previous position (and the threads archived since), recomputes the buckets of
the threads that changed, and hashes the bucket list: work proportional to the threads
changed, not to the log. Before it reuses that state it checks it against the previous
checkpoint's signed root (the buckets) and each changed bucket against its stored hash,
and it re-checks every new event's hash chain: it never signs on top of altered state.
Verifying is one pass over the events the checkpoint covers (with ``--thread T``, T's).

Naming. Each checkpoint lists the leaves that changed since the previous one
(``heads``; all of them for the first), and names the previous one (``previous``: its
position, root and id). Folding that chain of signed documents gives every committed
leaf, so a failed check names the thread and, where it can tell, the position.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from ..db import statements as sql
from ..db.executor import WritersBusyError
from ..errors import EvidenceError, InvalidInputError
from ..events import GENESIS_HASH, StoredEvent, canonical_json, event_hash

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from .archive import Archive

FORMAT = "symfonic-store/checkpoint/1"
"""The checkpoint format. Since parallel writers (SPEC §11) a checkpoint also carries the
gap-safe reader's ``cursor`` and the write transactions ``in_flight`` when it was taken:
it waits for those to end before it reads its position, so ``cursor`` is the position
and ``in_flight`` is empty (files written before carry neither, and read the same)."""
READER_KEYS = frozenset({"cursor", "in_flight"})
BUCKETS = 4096
STATEMENT_KEYS = frozenset(
    {
        "format", "position", "root", "threads", "archives", "previous", "full",
        "taken_at", "key_id", "heads_sha256", "signature",
    }
)
"""What is signed (all but ``signature``) and what names a checkpoint: small, whatever
the number of heads, so taking the next one never reads the previous one's heads."""
DOCUMENT_KEYS = STATEMENT_KEYS | {"heads"}
HEX = frozenset("0123456789abcdef")

PrivateKeyLike = Any
"""An ``Ed25519PrivateKey``, its PEM (``bytes``), or the path of its PEM file."""
PublicKeyLike = Any
"""An ``Ed25519PublicKey``, its PEM (``bytes``), or the path of its PEM file."""


# --- keys ---------------------------------------------------------------------------


def _read(source: Any, what: str) -> bytes:
    if isinstance(source, bytes):
        return source
    if isinstance(source, str | os.PathLike):
        try:
            return Path(source).read_bytes()
        except OSError as exc:
            raise InvalidInputError(what, f"cannot read {str(source)!r}: {exc.strerror}") from None
    raise InvalidInputError(what, f"must be a key, PEM bytes or a path, got {type(source).__name__}")


def load_private_key(source: PrivateKeyLike) -> Ed25519PrivateKey:
    """The Ed25519 private key ``source`` is, holds (PEM bytes) or names (a path).

    Raises:
        InvalidInputError: it is not readable, not PEM, or not an Ed25519 private key.
    """
    # Imported when a key is used: `import symfonic_store` and `--help` do not pay for it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if isinstance(source, ed25519.Ed25519PrivateKey):
        return source
    data = _read(source, "key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            "key", f"is not an unencrypted PEM private key ({exc}); make one with `symfonic-store keygen`"
        ) from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise InvalidInputError("key", "is not an Ed25519 key; make one with `symfonic-store keygen`")
    return key


def load_public_key(source: PublicKeyLike) -> Ed25519PublicKey:
    """The Ed25519 public key ``source`` is, holds (PEM bytes) or names (a path).

    Raises:
        InvalidInputError: it is not readable, not PEM, or not an Ed25519 public key.
    """
    # Imported when a key is used: `import symfonic_store` and `--help` do not pay for it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if isinstance(source, ed25519.Ed25519PublicKey):
        return source
    data = _read(source, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            "public key", f"is not a PEM public key ({exc}); use the KEY.pub that keygen wrote"
        ) from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise InvalidInputError("public key", "is not an Ed25519 public key")
    return key


def key_id(public_key: Ed25519PublicKey) -> str:
    """SHA-256 (hex) of the raw 32-byte Ed25519 public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(
        encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw
    )
    return hashlib.sha256(raw).hexdigest()


def generate_key(out: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: ``out`` (private, PEM, mode 0600) and ``out.pub``.

    Never overwrites: both files are created exclusively.

    Raises:
        InvalidInputError: either file exists, or the folder is not writable.
    """
    # Imported when a key is used: `import symfonic_store` and `--help` do not pay for it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    private_path = Path(out)
    public_path = private_path.with_name(private_path.name + ".pub")
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise InvalidInputError(
                "--out", f"{str(path)!r} exists: keygen never overwrites a key; choose another name"
            )
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PublicFormat.SubjectPublicKeyInfo,
    )
    written: list[Path] = []
    try:
        for path, data, mode in ((private_path, private_pem, 0o600), (public_path, public_pem, 0o644)):
            # O_EXCL: a file that appeared since the check above is not overwritten either.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            written.append(path)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(path, mode)  # the umask may have narrowed it; never widen the private key
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        raise InvalidInputError("--out", f"cannot write {str(exc.filename)!r}: {exc.strerror}") from None
    return private_path, public_path


def sign(document: Mapping[str, Any], key: Ed25519PrivateKey) -> str:
    """Base64 Ed25519 signature of the canonical JSON of ``document``."""
    return base64.b64encode(key.sign(canonical_json(dict(document)).encode("utf-8"))).decode("ascii")


def signature_holds(document: Mapping[str, Any], signature: str, key: Ed25519PublicKey) -> bool:
    """Does ``signature`` sign the canonical JSON of ``document`` under ``key``?"""
    from cryptography.exceptions import InvalidSignature

    try:
        raw = base64.b64decode(signature, validate=True)
        key.verify(raw, canonical_json(dict(document)).encode("utf-8"))
    except (InvalidSignature, ValueError):
        return False
    return True


def keys_by_id(public_keys: Iterable[PublicKeyLike]) -> dict[str, Ed25519PublicKey]:
    """The given public keys (several when keys rotated) by their key id."""
    loaded = [load_public_key(k) for k in public_keys]
    return {key_id(k): k for k in loaded}


# --- the commitment (pure) ------------------------------------------------------------


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def bucket_of(thread_id: str) -> int:
    """Which of the :data:`BUCKETS` buckets a thread's leaf goes into (12 bits of SHA-256)."""
    return int.from_bytes(hashlib.sha256(thread_id.encode("utf-8")).digest()[:2], "big") >> 4


def base_digest(version: int, position: int, last_hash: str) -> str:
    """Where a thread's digest starts when versions 1..version were archived."""
    return _sha(f"archived:{version}:{position}:{last_hash}")


def step_digest(digest: str, version: int, position: int, hash_: str) -> str:
    """The digest after one more event (its version, global position and hash)."""
    return _sha(f"{digest}:{version}:{position}:{hash_}")


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
        return _sha(canonical_json(["leaf", *self.as_list()]))

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
        if not (_is_hex64(last_hash) and _is_hex64(digest)):
            raise ValueError(f"malformed hash in head for {thread_id!r:.80}")
        return cls(thread_id, version, position, last_hash, digest, base)


def _is_hex64(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= HEX


def bucket_digest(leaves: Iterable[Leaf]) -> str:
    """The hash of one bucket: its leaf hashes in thread-id order."""
    return bucket_digest_of((leaf.thread_id, leaf.hash) for leaf in leaves)


def bucket_digest_of(hashes: Iterable[tuple[str, str]]) -> str:
    """:func:`bucket_digest` from ``(thread_id, leaf hash)`` pairs."""
    return _sha("bucket:" + ",".join(h for _, h in sorted(hashes)))


def root_of(buckets: Mapping[int, tuple[str, int]]) -> str:
    """The root over ``{bucket: (digest, threads)}`` (empty buckets are left out)."""
    return _sha(canonical_json([FORMAT, [[b, d, n] for b, (d, n) in sorted(buckets.items()) if n]]))


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
        computed = event_hash(
            self.last_hash,
            thread_id=event.thread_id,
            version=event.version,
            type=event.type,
            interrupt_id=event.interrupt_id,
            run_id=event.run_id,
            actor=event.actor,
            data=event.data,
            occurred_at=event.occurred_at,
        )
        if computed != event.hash:
            return "the stored hash does not match the event's content and the previous hash"
        self.version = event.version
        self.position = event.position
        self.last_hash = computed
        self.digest = step_digest(self.digest, event.version, event.position, computed)
        return None

    def leaf(self, thread_id: str) -> Leaf:
        return Leaf(thread_id, self.version, self.position, self.last_hash, self.digest, self.base)


# --- checkpoint documents ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Previous:
    """The checkpoint a checkpoint follows."""

    position: int
    root: str
    id: str


@dataclass(frozen=True)
class Checkpoint:
    """A signed checkpoint document (see docs/evidence.md for the format).

    ``document`` is the JSON object as written to the file. The signature covers every
    field but ``signature`` and ``heads``; ``heads`` is covered by ``heads_sha256``. The
    ``id`` (what the next checkpoint's ``previous`` names) is the SHA-256 of the signed
    fields with the signature. A checkpoint read back from the store for the next one
    may lack ``heads``.
    """

    document: dict[str, Any]

    @property
    def position(self) -> int:
        return int(self.document["position"])

    @property
    def root(self) -> str:
        return str(self.document["root"])

    @property
    def key_id(self) -> str:
        return str(self.document["key_id"])

    @property
    def archives(self) -> int:
        return int(self.document["archives"])

    @property
    def full(self) -> bool:
        return bool(self.document["full"])

    @property
    def taken_at(self) -> str:
        return str(self.document["taken_at"])

    @property
    def previous(self) -> Previous | None:
        p = self.document["previous"]
        return None if p is None else Previous(int(p["position"]), str(p["root"]), str(p["id"]))

    @property
    def id(self) -> str:
        return _sha(canonical_json(self.statement()))

    def has_heads(self) -> bool:
        return "heads" in self.document

    def head_ids(self) -> Iterator[str]:
        return (str(h[0]) for h in self.document["heads"])

    def heads(self) -> list[Leaf]:
        """The leaves this checkpoint lists: those changed since the previous one."""
        return [Leaf.from_list(h) for h in self.document["heads"]]

    def statement(self) -> dict[str, Any]:
        """The signed fields and the signature (everything but ``heads``)."""
        return {k: v for k, v in self.document.items() if k != "heads"}

    def unsigned(self) -> dict[str, Any]:
        return {k: v for k, v in self.document.items() if k not in ("signature", "heads")}

    def to_json(self) -> str:
        """The document as the checkpoint file holds it (one JSON object and a newline)."""
        return json.dumps(self.document, ensure_ascii=False, sort_keys=True, indent=1) + "\n"

    def __str__(self) -> str:
        return (
            f"checkpoint at position {self.position}: root {self.root[:16]}..., "
            f"{self.document['threads']} thread(s), key {self.key_id[:16]}..."
        )


def heads_digest(heads: Sequence[Sequence[Any]]) -> str:
    return _sha(canonical_json(list(heads)))


def parse_checkpoint(
    source: str | bytes | Mapping[str, Any], *, what: str = "checkpoint", heads: bool = True
) -> Checkpoint:
    """A checkpoint from its JSON text (or object), its structure checked; ``heads=False``
    accepts the signed statement alone (as the store keeps it apart from its heads).

    Raises:
        EvidenceError: not a checkpoint of this format (edited, truncated, or newer).
    """
    if isinstance(source, Mapping):
        document: Any = dict(source)
    else:
        try:
            document = json.loads(source)
        except (ValueError, RecursionError) as exc:
            raise EvidenceError(f"the {what} is not JSON ({exc})") from None
    problem = _document_problem(document, heads=heads)
    if problem is not None:
        raise EvidenceError(f"the {what} is not a valid checkpoint: {problem}")
    return Checkpoint(document)


def _document_problem(document: Any, *, heads: bool) -> str | None:
    if not isinstance(document, dict):
        return "not a JSON object"
    if document.get("format") != FORMAT:
        return f"its format is {document.get('format')!r:.80}, this release reads {FORMAT!r}"
    keys = set(document)
    expected = DOCUMENT_KEYS if heads else STATEMENT_KEYS
    if keys & READER_KEYS:
        expected = expected | READER_KEYS  # both or neither (older files: neither)
    if keys != expected:
        missing, extra = expected - keys, keys - expected
        return f"missing {sorted(missing)}" if missing else f"unknown fields {sorted(extra)}"
    for name in ("position", "threads", "archives"):
        value = document[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{name} must be a whole number >= 0"
    if not all(_is_hex64(document[k]) for k in ("root", "key_id", "heads_sha256")):
        return "root, key_id and heads_sha256 must be 64 hex digits"
    if "cursor" in document and (
        document["cursor"] != document["position"] or document["in_flight"] != []
    ):
        # This release waits for the writers in flight before it reads the position.
        return "cursor must equal position and in_flight be empty"
    if not isinstance(document["full"], bool) or not isinstance(document["taken_at"], str):
        return "full must be true/false and taken_at a time"
    if not isinstance(document["signature"], str):
        return "the signature is missing"
    previous = document["previous"]
    if previous is not None and not (
        isinstance(previous, dict)
        and set(previous) == {"position", "root", "id"}
        and isinstance(previous["position"], int)
        and _is_hex64(previous["root"])
        and _is_hex64(previous["id"])
    ):
        return "previous must be null or {position, root, id}"
    if not heads:
        return None
    if not isinstance(document["heads"], list):
        return "heads must be a list"
    try:
        for head in document["heads"]:
            Leaf.from_list(head)
    except ValueError as exc:
        return str(exc)
    if heads_digest(document["heads"]) != document["heads_sha256"]:
        return "its heads do not match heads_sha256: the file was edited"
    return None


def signature_problem(checkpoint: Checkpoint, keys: Mapping[str, Ed25519PublicKey]) -> str | None:
    """Why ``checkpoint`` is not signed by one of ``keys`` (None: it is)."""
    key = keys.get(checkpoint.key_id)
    if key is None:
        return (
            f"it is signed by key {checkpoint.key_id[:16]}..., which is not among the given "
            f"public keys ({', '.join(k[:16] + '...' for k in sorted(keys)) or 'none'})"
        )
    if not signature_holds(checkpoint.unsigned(), str(checkpoint.document["signature"]), key):
        return "its signature does not hold: the file was edited after it was signed"
    return None


# --- taking a checkpoint -------------------------------------------------------------


def _stored_checkpoint(row: Sequence[Any] | None) -> Checkpoint | None:
    if row is None:
        return None
    return parse_checkpoint(row[1], what="latest checkpoint kept in the database", heads=False)


def _refuse(thread_id: str, position: int | None, problem: str) -> EvidenceError:
    where = "" if position is None else f" at position {position}"
    return EvidenceError(
        f"refusing to sign: thread {thread_id!r}{where}: {problem}. The log no longer "
        "extends the previous checkpoint; run `symfonic-store verify --checkpoint FILE "
        "--public-key KEY.pub` with your latest checkpoint file to see what changed",
        thread_id=thread_id,
        position=position,
    )


def _follow_all(
    events: Iterable[StoredEvent], start: Callable[[str], Tip], leaves: dict[str, Leaf]
) -> None:
    """Follow events given in (thread, version) order, one at a time (a thread of a
    million events is never held in memory), each thread from ``start(thread_id)``;
    its leaf goes into ``leaves``."""
    thread: str | None = None
    tip = Tip()
    for event in events:
        if event.thread_id != thread:
            if thread is not None:
                leaves[thread] = tip.leaf(thread)
            thread, tip = event.thread_id, start(event.thread_id)
        problem = tip.extend(event)
        if problem is not None:
            raise _refuse(event.thread_id, event.position, problem)
    if thread is not None:
        leaves[thread] = tip.leaf(thread)


def _all_leaves(conn: Connection, position: int) -> dict[str, Leaf]:
    """Every thread's leaf at ``position``, from the events and the archived heads."""
    bases = {b.thread_id: b for b in sql.latest_archived_heads(conn)}
    leaves: dict[str, Leaf] = {}

    def start(thread_id: str) -> Tip:
        base = bases.get(thread_id)
        return Tip() if base is None else Tip.archived(base.version, base.position, base.last_hash)

    _follow_all(sql.stream_events(conn, sql.events_upto_query(position)), start, leaves)
    for thread_id, base in bases.items():
        if thread_id not in leaves:
            leaves[thread_id] = Tip.archived(base.version, base.position, base.last_hash).leaf(thread_id)
    return leaves


def _changed_threads(
    conn: Connection, last: Checkpoint, position: int, archives: int
) -> tuple[list[str], dict[str, sql.ArchivedBase]]:
    """The threads changed since ``last``: with new events, or archived since."""
    appended = sql.threads_with_events_between(conn, last.position, position)
    archived = {b.thread_id: b for b in sql.archived_heads_since(conn, last.archives, archives)}
    return sorted(set(appended) | set(archived)), archived


def _changed_leaves(
    conn: Connection,
    last: Checkpoint,
    position: int,
    ids: Sequence[str],
    archived: Mapping[str, sql.ArchivedBase],
    old: Mapping[str, Leaf],
) -> dict[str, Leaf]:
    """The new leaves of the changed threads, from their previous leaves (``old``)."""
    tips: dict[str, Tip] = {}
    for thread_id in ids:
        base = archived.get(thread_id)
        prior = old.get(thread_id)
        if base is not None:
            if prior is not None and (
                prior.version > base.version
                or (prior.version == base.version and prior.last_hash != base.last_hash)
            ):
                raise _refuse(
                    thread_id, base.position,
                    f"the archive record of its head (version {base.version}) does not extend "
                    f"the last checkpoint's head (version {prior.version})",
                )
            tips[thread_id] = Tip.archived(base.version, base.position, base.last_hash)
        else:
            tips[thread_id] = Tip() if prior is None else Tip.of(prior)
    leaves = {t: tip.leaf(t) for t, tip in tips.items()}
    query = sql.events_between_query(last.position, position)
    _follow_all(sql.stream_events(conn, query), tips.__getitem__, leaves)
    return leaves


def _altered_state(detail: str) -> EvidenceError:
    return EvidenceError(
        f"refusing to sign: the checkpoint state kept in the database is not that of the "
        f"latest checkpoint ({detail}): it was altered. Verify the log against your latest "
        "checkpoint file (`symfonic-store verify --checkpoint FILE --public-key KEY.pub`), "
        "then start a new chain from the log as it is with `symfonic-store checkpoint --full`"
    )


def take(
    conn: Connection,
    *,
    key: Ed25519PrivateKey,
    previous: Checkpoint | None,
    full: bool,
    now: datetime,
    follow: Callable[[Connection, Checkpoint | None, bool], tuple[Checkpoint | None, bool]] | None = None,
) -> Checkpoint:
    """Take, sign and record a checkpoint of the whole log as it is now (see module doc).
    ``follow(conn, last recorded, full)`` (a chain folder, services/chain.py) may name
    what it follows instead, and whether to recompute every head after proving the log
    extends it (then ``full`` stays false: the chain does not restart).

    Runs in one write transaction that inserts no events (``appends=False``);
    concurrent takes are serialised by the evidence lock (PostgreSQL) or the write lock
    (SQLite), and ``seq`` keeps them from forking. On PostgreSQL it reads its position
    with the writers shut out (:func:`~symfonic_store.db.statements.final_max_position`):
    it waits for the write transactions in flight, and new appends wait that long too.

    Raises:
        EvidenceError: the log no longer extends the latest checkpoint, the kept state
            was altered, or ``previous`` is not the latest checkpoint.
    """
    sql.lock_evidence(conn)
    public = key.public_key()
    kid = key_id(public)
    latest_row = sql.latest_checkpoint(conn)
    last = _stored_checkpoint(latest_row)
    seq = 1 if latest_row is None else int(latest_row[0]) + 1
    if previous is not None and (last is None or last.id != previous.id):
        latest = "none" if last is None else f"position {last.position}, id {last.id[:16]}..."
        raise EvidenceError(
            f"refusing to sign: the latest checkpoint in the database ({latest}) is not the "
            f"previous checkpoint given (position {previous.position}, id {previous.id[:16]}...): "
            "checkpoints were removed or replaced in the database"
        )
    recompute = full
    if follow is not None:
        last, recompute = follow(conn, last, full)
        full = False
    if last is not None and last.key_id == kid:
        problem = signature_problem(last, {kid: public})
        if problem is not None:
            raise _altered_state(f"the latest checkpoint recorded there: {problem}")
    # With parallel writers (PostgreSQL), a transaction in flight may still commit an
    # event below the last position: read it with the writers shut out, so the position
    # covers exactly what a gap-safe reader can see and a later commit lands above it.
    try:
        position = sql.final_max_position(conn)
    except WritersBusyError as exc:
        raise EvidenceError(f"refusing to sign: {exc}") from None
    archives = sql.max_archive_id(conn)
    if last is not None and position < last.position:
        raise EvidenceError(
            f"refusing to sign: the log ends at position {position}, before the latest "
            f"checkpoint's position {last.position}: events at its end were removed"
        )
    if recompute or last is None:
        leaves = _all_leaves(conn, position)
        rows = [_head_row(x) for x in leaves.values()]
        buckets = _buckets_of_rows(rows)
        changed = leaves
        sql.replace_checkpoint_state(conn, rows, buckets)
        count = len(leaves)
    else:
        buckets = sql.checkpoint_buckets_all(conn)
        if root_of(buckets) != last.root:
            raise _altered_state("the bucket hashes do not give its root")
        ids, archived = _changed_threads(conn, last, position, archives)
        touched = sorted({bucket_of(t) for t in ids})
        # The kept leaf hashes of the touched buckets: only those whose bucket still gives
        # its (signed) hash are built on, and only the changed threads' heads are read.
        hashes = sql.checkpoint_leaf_hashes_in(conn, touched)
        for b in touched:
            group = hashes.get(b, {})
            stored = buckets.get(b, (None, 0))
            if (bucket_digest_of(group.items()) if group else None) != stored[0]:
                raise _altered_state(f"the heads of bucket {b} do not give its hash")
        old: dict[str, Leaf] = {}
        for head, leaf_hash in sql.checkpoint_heads_of(conn, ids):
            leaf = Leaf(*head)
            if leaf.hash != leaf_hash or hashes.get(bucket_of(leaf.thread_id), {}).get(leaf.thread_id) != leaf_hash:
                raise _altered_state(f"the kept head of thread {leaf.thread_id!r} does not give its hash")
            old[leaf.thread_id] = leaf
        if any(t in hashes.get(bucket_of(t), {}) and t not in old for t in ids):
            raise _altered_state("a kept head is missing")
        changed = _changed_leaves(conn, last, position, ids, archived, old)
        rows = [_head_row(x) for x in changed.values()]
        for head_row in rows:
            hashes.setdefault(head_row["bucket"], {})[head_row["thread_id"]] = head_row["leaf_hash"]
        for b in touched:
            buckets[b] = (bucket_digest_of(hashes[b].items()), len(hashes[b]))
        sql.update_checkpoint_state(conn, rows, {b: buckets[b] for b in touched})
        count = sum(n for _, n in buckets.values())
    document: dict[str, Any] = {
        "format": FORMAT,
        "position": position,
        "root": root_of(buckets),
        "threads": count,
        "archives": archives,
        "previous": None
        if last is None
        else {"position": last.position, "root": last.root, "id": last.id},
        "full": bool(full and last is not None),
        "taken_at": now.isoformat(),
        "key_id": kid,
        # What a gap-safe reader had seen, and the writers still open: none, since
        # final_max_position let them end first, so a later commit lands above ``position``.
        "cursor": position,
        "in_flight": [],
    }
    heads = [leaf.as_list() for leaf in sorted(changed.values(), key=lambda x: x.thread_id)]
    document["heads_sha256"] = heads_digest(heads)
    document["signature"] = sign(document, key)
    document["heads"] = heads
    checkpoint = Checkpoint(document)
    sql.insert_checkpoint(
        conn,
        {
            "seq": seq,
            "id": checkpoint.id,
            "position": position,
            "root": checkpoint.root,
            "previous_id": None if last is None else last.id,
            "key_id": kid,
            "taken_at": now,
            "archives": archives,
            "statement": checkpoint.statement(),
            "heads": heads,
        },
    )
    return checkpoint


def _buckets_of_rows(rows: Iterable[dict[str, Any]]) -> dict[int, tuple[str, int]]:
    grouped: dict[int, list[tuple[str, str]]] = {}
    for row in rows:
        grouped.setdefault(row["bucket"], []).append((row["thread_id"], row["leaf_hash"]))
    return {b: (bucket_digest_of(pairs), len(pairs)) for b, pairs in grouped.items()}


def _head_row(leaf: Leaf) -> dict[str, Any]:
    return {
        "thread_id": leaf.thread_id,
        "bucket": bucket_of(leaf.thread_id),
        "version": leaf.version,
        "position": leaf.position,
        "last_hash": leaf.last_hash,
        "digest": leaf.digest,
        "base": leaf.base,
        "leaf_hash": leaf.hash,
    }


# --- verifying a checkpoint ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckpointProblem:
    """Where the log differs from a checkpoint: the thread (None: the checkpoint itself)
    and, where it can tell, the position of the first event that differs."""

    thread_id: str | None
    position: int | None
    problem: str

    def __str__(self) -> str:
        if self.thread_id is None:
            return self.problem
        where = "" if self.position is None else f" at position {self.position}"
        return f"thread {self.thread_id!r}{where}: {self.problem}"


@dataclass
class CheckpointReport:
    """The outcome of checking the log against one checkpoint; ``ok`` when it holds."""

    checkpoint: Checkpoint | None
    source: str = "checkpoint"
    threads_checked: int = 0
    events_checked: int = 0
    problems: list[CheckpointProblem] = field(default_factory=list)
    thread_id: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    @property
    def first(self) -> CheckpointProblem | None:
        return self.problems[0] if self.problems else None

    def __str__(self) -> str:
        cp = self.checkpoint
        what = self.source if cp is None else f"{self.source} (position {cp.position}, taken {cp.taken_at})"
        scope = "" if self.thread_id is None else f" for thread {self.thread_id!r}"
        if self.ok:
            head = (
                f"{what}: the log holds everything it committed to{scope} "
                f"({self.events_checked} event(s) on {self.threads_checked} thread(s))"
            )
        else:
            head = f"{what}: the log does not hold what it committed to{scope}"
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


@dataclass(slots=True)
class _Committed:
    """What the chain of signed checkpoints says the leaves were."""

    leaves: dict[str, Leaf]
    history: dict[str, list[Leaf]]
    complete: bool
    missing: str | None = None


def _committed(
    conn: Connection,
    checkpoint: Checkpoint,
    keys: Mapping[str, Ed25519PublicKey],
    known: Mapping[str, Checkpoint],
    thread_id: str | None,
) -> _Committed:
    """Fold the chain of signed checkpoints ending at ``checkpoint`` into its leaves.

    The chain comes from the given checkpoint files first, then from the documents the
    database keeps (each counts only if its id and signature hold under ``keys``). With
    ``thread_id``, stops at the newest checkpoint that lists that thread -- or, when the
    store's kept state is that of ``checkpoint`` (its buckets give its root), takes the
    thread's head from there, proven by its bucket: no document need be read.
    """
    if thread_id is not None:
        proven = _committed_by_state(conn, checkpoint, thread_id)
        if proven is not None:
            return proven
    chain: list[Checkpoint] = []
    doc: Checkpoint | None = checkpoint
    stored: Generator[tuple[str, Any, Any], None, None] | None = None
    missing: str | None = None
    try:
        while doc is not None:
            chain.append(doc)
            if thread_id is not None and any(t == thread_id for t in doc.head_ids()):
                break
            prev = doc.previous
            if doc.full or prev is None:
                break
            found = known.get(prev.id)
            if found is None:
                if stored is None:
                    # Newest first: one pass over the kept documents finds the whole chain.
                    stored = sql.stored_checkpoints_newest_first(conn, upto_position=doc.position)
                found = _find_stored(stored, prev.id, keys)
            if found is None:
                missing = f"the checkpoint at position {prev.position}, id {prev.id[:16]}..., is not available"
            doc = found
    finally:
        if stored is not None:
            stored.close()
    history: dict[str, list[Leaf]] = {}
    leaves: dict[str, Leaf] = {}
    for doc in reversed(chain):
        if doc.full:
            leaves = {}
            history = {}
        for leaf in doc.heads():
            if thread_id is not None and leaf.thread_id != thread_id:
                continue
            leaves[leaf.thread_id] = leaf
            history.setdefault(leaf.thread_id, []).append(leaf)
    complete = missing is None
    if complete and thread_id is None and root_of(buckets_of(leaves.values())) != checkpoint.root:
        complete, missing = False, "the chain's heads do not give the checkpoint's root"
    return _Committed(leaves, history, complete, missing)


def _committed_by_state(conn: Connection, checkpoint: Checkpoint, thread_id: str) -> _Committed | None:
    """``thread_id``'s committed leaf from the kept heads, if they are ``checkpoint``'s."""
    buckets = sql.checkpoint_buckets_all(conn)
    if root_of(buckets) != checkpoint.root:
        return None  # another checkpoint's state (or altered): walk the chain instead
    bucket = bucket_of(thread_id)
    group = sql.checkpoint_leaf_hashes_in(conn, [bucket]).get(bucket, {})
    if (bucket_digest_of(group.items()) if group else None) != buckets.get(bucket, (None, 0))[0]:
        return None
    leaves: dict[str, Leaf] = {}
    if thread_id in group:
        rows = sql.checkpoint_heads_of(conn, [thread_id])
        leaf = Leaf(*rows[0][0]) if rows else None
        if leaf is None or leaf.hash != group[thread_id]:
            return None
        leaves[thread_id] = leaf
    return _Committed(leaves, {t: [x] for t, x in leaves.items()}, complete=True)


def _find_stored(
    stored: Iterator[tuple[str, Any, Any]], wanted: str, keys: Mapping[str, Ed25519PublicKey]
) -> Checkpoint | None:
    """The kept checkpoint with id ``wanted``, if its id, signature and heads hold."""
    for doc_id, statement, heads in stored:
        if doc_id != wanted:
            continue
        try:
            document = {**statement, "heads": heads} if isinstance(statement, dict) else statement
            candidate = parse_checkpoint(document, what="checkpoint kept in the database")
        except EvidenceError:
            return None
        if candidate.id == wanted and signature_problem(candidate, keys) is None:
            return candidate
        return None
    return None


@dataclass(slots=True)
class _Follow:
    """One thread being recomputed from the log."""

    tip: Tip | None
    problem: CheckpointProblem | None = None
    first_open: int | None = None
    """Position of the first event after the last committed head it still matches."""
    proven: int = 0
    events: int = 0


def verify_checkpoint(
    conn: Connection,
    checkpoint: Checkpoint,
    *,
    keys: Mapping[str, Ed25519PublicKey],
    archives: Sequence[Archive] = (),
    known: Mapping[str, Checkpoint] | None = None,
    thread_id: str | None = None,
    source: str = "checkpoint",
) -> CheckpointReport:
    """Check that the log (and the given archives) still hold what ``checkpoint`` committed
    to: one pass over the events at or below its position (with ``thread_id``, that
    thread's events); events appended later are not looked at.
    """
    report = CheckpointReport(checkpoint, source=source, thread_id=thread_id)
    problem = signature_problem(checkpoint, keys)
    if problem is not None:
        report.problems.append(CheckpointProblem(None, None, f"the {source} is not valid: {problem}"))
        return report
    position = checkpoint.position
    committed = _committed(conn, checkpoint, keys, dict(known or {}), thread_id)
    if thread_id is not None and not committed.complete and thread_id not in committed.leaves:
        report.problems.append(
            CheckpointProblem(
                thread_id, None,
                "cannot tell what this checkpoint committed for this thread alone: the chain "
                f"of checkpoints back to the first is incomplete ({committed.missing}); give "
                "the earlier checkpoint files as more --checkpoint, or verify the whole store",
            )
        )
        return report
    bases = _bases(conn, checkpoint, committed, thread_id)
    records = _archived_records(conn, archives, thread_id)
    follows: dict[str, _Follow] = {}

    def follow(t: str) -> _Follow:
        f = follows.get(t)
        if f is None:
            k = bases.get(t, 0)
            tip: Tip | None = Tip()
            if k:
                record = records.get((t, k))
                tip = None if record is None else Tip.archived(k, record[0], record[1])
            f = follows[t] = _Follow(tip)
            if tip is None:
                f.problem = CheckpointProblem(
                    t, None,
                    f"its versions 1..{k} were archived before this checkpoint, and no archive "
                    "record of that head is left (in the database or the given archives)",
                )
        return f

    def feed(event: StoredEvent, *, live: bool) -> None:
        if event.position > position or (thread_id is not None and event.thread_id != thread_id):
            return
        f = follow(event.thread_id)
        f.events += 1
        if f.problem is not None or f.tip is None:
            return
        if event.version <= f.tip.base:
            if live:  # the checkpoint holds these versions as archived: none may be in the table
                f.problem = CheckpointProblem(
                    event.thread_id, event.position,
                    f"version {event.version} is in the event table, but the checkpoint holds "
                    f"versions 1..{f.tip.base} of this thread as archived: it was inserted",
                )
            return
        if f.first_open is None:
            f.first_open = event.position
        wrong = f.tip.extend(event)
        if wrong is not None:
            f.problem = CheckpointProblem(event.thread_id, event.position, wrong)
            return
        for leaf in committed.history.get(event.thread_id, ()):
            if leaf.version == f.tip.version:
                if leaf == f.tip.leaf(event.thread_id):
                    f.first_open = None
                    f.proven = leaf.version
                break

    for archive in sorted(archives, key=lambda a: a.created_at):
        for event in archive.events():
            feed(event, live=False)
    query = sql.events_upto_query(position, thread_id=thread_id)
    for event in sql.stream_events(conn, query):
        feed(event, live=True)

    threads = set(follows) | set(committed.leaves) | {t for t, k in bases.items() if k}
    if thread_id is not None:
        threads = {thread_id}
    computed: dict[str, Leaf] = {}
    differing: list[tuple[str, Leaf | None, Leaf | None, _Follow | None]] = []
    for t in sorted(threads):
        f = follow(t) if (t in follows or bases.get(t)) else None
        leaf = None if f is None or f.tip is None or f.tip.version == 0 else f.tip.leaf(t)
        if leaf is not None:
            computed[t] = leaf
        if f is not None and f.problem is not None:
            report.problems.append(f.problem)
            continue
        if not committed.complete and thread_id is None:
            continue  # decided on the root below
        expected = committed.leaves.get(t)
        if expected != leaf:
            differing.append((t, expected, leaf, f))
    # Only to say why a thread differs: was it archived since the checkpoint?
    archived_now = sql.archived_versions(conn, [d[0] for d in differing]) if differing else {}
    for t, expected, leaf, f in differing:
        report.problems.append(_difference(t, expected, leaf, f, archived_now.get(t)))
    report.threads_checked = len(threads)
    report.events_checked = sum(f.events for f in follows.values())
    if not committed.complete and thread_id is None:
        if root_of(buckets_of(computed.values())) != checkpoint.root and not report.problems:
            report.problems.append(
                CheckpointProblem(
                    None, None,
                    "the log differs from what the checkpoint committed to (its root does not "
                    "match), and the thread cannot be named: the chain of checkpoints is "
                    f"incomplete ({committed.missing}); give the earlier checkpoint files as "
                    "more --checkpoint to name it",
                )
            )
    report.problems.sort(key=lambda p: (p.position is None, p.position or 0, p.thread_id or ""))
    return report


def _difference(
    thread_id: str,
    expected: Leaf | None,
    leaf: Leaf | None,
    follow: _Follow | None,
    archived_version: int | None,
) -> CheckpointProblem:
    """Describe how a thread's recomputed leaf differs from the committed one."""
    first_open = None if follow is None else follow.first_open
    if expected is None:
        assert leaf is not None
        return CheckpointProblem(
            thread_id, first_open,
            f"the log holds events of this thread at or below position {leaf.position} that the "
            "checkpoint does not: they were inserted behind the store's back",
        )
    committed = f"the checkpoint holds version {expected.version} at position {expected.position}"
    proven = 0 if follow is None else follow.proven
    if archived_version is not None and archived_version > expected.base and (
        leaf is None or leaf.version < min(expected.version, archived_version)
    ):
        return CheckpointProblem(
            thread_id, None,
            f"versions {expected.base + 1}..{archived_version} were moved into an archive after "
            f"this checkpoint ({committed}): give that archive with --archive FILE",
        )
    if leaf is None:
        return CheckpointProblem(
            thread_id, None,
            f"nothing of this thread is left at or below the checkpoint's position ({committed}): "
            "the whole thread was removed",
        )
    after = f" (the events hold up to version {proven})" if proven else ""
    if leaf.version == expected.version and leaf.position != expected.position:
        return CheckpointProblem(
            thread_id, min(leaf.position, expected.position),
            f"{committed}, but that event is now at position {leaf.position}: positions were moved",
        )
    if leaf.version < expected.version:
        what = f"the log ends at version {leaf.version}: events after it were removed"
    elif leaf.version > expected.version:
        what = f"the log goes on to version {leaf.version}: events were inserted"
    else:
        what = "the events differ from what it committed (changed, reordered or replaced with recomputed hashes)"
    return CheckpointProblem(thread_id, first_open, f"{committed}, but {what}{after}")


def _bases(
    conn: Connection, checkpoint: Checkpoint, committed: _Committed, thread_id: str | None
) -> dict[str, int]:
    """The archived version each thread's leaf starts from, as the checkpoint took it."""
    if committed.complete or (thread_id is not None and thread_id in committed.leaves):
        return {t: leaf.base for t, leaf in committed.leaves.items() if leaf.base}
    # Without the chain, from the archive records: the latest archive before the checkpoint.
    return sql.archived_bases_as_of(conn, checkpoint.archives, thread_id=thread_id)


def _archived_records(
    conn: Connection, archives: Sequence[Archive], thread_id: str | None
) -> dict[tuple[str, int], tuple[int, str]]:
    """``(thread, archived version) -> (position, last hash)`` of every archived head known,
    the given archives' own (signed or committed) over the database's."""
    records = sql.archived_head_records(conn, thread_id=thread_id)
    for archive in archives:
        for head in archive.heads.values():
            if thread_id is None or head.thread_id == thread_id:
                records[(head.thread_id, head.version)] = (head.position, head.last_hash)
                if head.base_version:
                    records[(head.thread_id, head.base_version)] = (head.base_position, head.base_hash)
    return records

