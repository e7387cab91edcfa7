"""The signed checkpoint document: its fields, its id, reading it back and its signature.

The signature covers every field but ``signature`` and ``heads``; ``heads`` (the leaves
changed since the previous checkpoint) is covered by ``heads_sha256``, so what is signed
and what names a checkpoint stays small whatever the number of heads. docs/evidence.md
has the format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import EvidenceError
from ...events import canonical_json
from .commitment import FORMAT, Leaf, is_hex64, sha256_hex
from .keys import signature_holds

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

READER_KEYS = frozenset({"cursor", "in_flight"})
"""The gap-safe reader's fields (see :data:`~.commitment.FORMAT`): both or neither."""
STATEMENT_KEYS = frozenset(
    {
        "format", "position", "root", "threads", "archives", "previous", "full",
        "taken_at", "key_id", "heads_sha256", "signature",
    }
)
"""What is signed (all but ``signature``) and what names a checkpoint: small, whatever
the number of heads, so taking the next one never reads the previous one's heads."""
DOCUMENT_KEYS = STATEMENT_KEYS | {"heads"}


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

    # One typed view per signed field, alike on purpose: the document stays the JSON as
    # signed, and nothing is copied out of it that could drift from it.
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
        return sha256_hex(canonical_json(self.statement()))

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
    return sha256_hex(canonical_json(list(heads)))


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
    if not all(is_hex64(document[k]) for k in ("root", "key_id", "heads_sha256")):
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
        and is_hex64(previous["root"])
        and is_hex64(previous["id"])
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
