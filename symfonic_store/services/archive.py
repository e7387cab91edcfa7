"""Retention that keeps the evidence: whole finished threads moved into a signed archive.

An archive is a JSON Lines file (gzip when its name ends in ``.gz``):

- line 1, the header: ``{"format": "symfonic-store/archive/1", "before": ..., "created_at": ...}``;
- one line per event, the event's columns (``StoredEvent.as_dict()``), each thread's events
  together and in version order; the line of a mint that had a tenant (SPEC §15) adds
  ``"tenant": <name>`` (the column beside the event, outside its hashed data: the content
  hash and the signature cover it, the event's hash does not). Lines without a tenant
  are exactly the event's columns, as before tenants existed;
- the last line, the signed manifest: ``{"manifest": {...}, "signature": ...}``. The
  manifest holds the SHA-256 of every byte before it (``content``), the number of
  events, and per thread its archived head ``[thread_id, base_version, base_position,
  base_hash, version, position, last_hash, run_id]`` (``base_*``: where an earlier archive
  of the same thread ended; 0, 0 and the genesis hash for the first).

:func:`archive` writes the file, reads it back and verifies it, and only then removes
the threads' events, in one transaction that also records the archive
(``symfonic_archives``, ``symfonic_archived_threads``) and marks each thread's
projection head as archived. Nothing is removed that is not in a verified archive.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from ..db import guards
from ..db.statements import counts
from ..db.statements import evidence as sql
from ..errors import ConcurrencyConflictError, EvidenceError, InvalidInputError
from ..events import GENESIS_HASH, MINTED, StoredEvent, canonical_json
from .evidence.commitment import Tip
from .evidence.keys import key_id, sign, signature_holds

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

ARCHIVE_FORMAT = "symfonic-store/archive/1"
# A constant and a frozen report, alike others in shape only.
CHUNK = 500
"""Thread ids per statement while writing (one bound parameter each)."""


@dataclass(frozen=True, slots=True)
class ArchivedHead:
    """One thread's part of an archive: versions ``base_version + 1 .. version``."""

    thread_id: str
    base_version: int
    base_position: int
    base_hash: str
    version: int
    position: int
    last_hash: str
    run_id: str | None

    def as_list(self) -> list[Any]:
        return [
            self.thread_id, self.base_version, self.base_position, self.base_hash,
            self.version, self.position, self.last_hash, self.run_id,
        ]

    @classmethod
    def from_list(cls, value: Any) -> ArchivedHead:
        """Raises: ValueError when ``value`` is not the list form."""
        if not isinstance(value, list) or len(value) != 8:
            raise ValueError("an archived head is a list of 8 values")
        t, bv, bp, bh, v, p, h, r = value
        ints = (bv, bp, v, p)
        if (
            not isinstance(t, str)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in ints)
            or not isinstance(bh, str)
            or not isinstance(h, str)
            or not (r is None or isinstance(r, str))
            or v <= bv
        ):
            raise ValueError(f"malformed archived head {value!r:.120}")
        return cls(t, bv, bp, bh, v, p, h, r)


def _open(path: Path, mode: str) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return gzip.open(path, mode + "b")  # type: ignore[return-value]
    return open(path, mode + "b")


def event_from_dict(row: Mapping[str, Any]) -> StoredEvent:
    """An event from its archived line (its ``tenant``, when it has one, is checked and
    left out: see :func:`tenant_from_dict`).

    Raises:
        ValueError: a column is missing or of the wrong type.
    """
    try:
        event = StoredEvent(
            position=row["position"],
            thread_id=row["thread_id"],
            version=row["version"],
            type=row["type"],
            interrupt_id=row["interrupt_id"],
            run_id=row["run_id"],
            actor=row["actor"],
            data=row["data"],
            occurred_at=datetime.fromisoformat(row["occurred_at"]),
            hash=row["hash"],
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not an event line ({exc})") from None
    if not (
        isinstance(event.position, int)
        and isinstance(event.version, int)
        and isinstance(event.thread_id, str)
        and isinstance(event.data, dict)
        and isinstance(event.hash, str)
        and event.occurred_at.tzinfo is not None
    ):
        raise ValueError("an event line with a column of the wrong type")
    tenant_from_dict(row)
    return event


def tenant_from_dict(row: Mapping[str, Any]) -> str | None:
    """The tenant an archived line carries (a mint's, SPEC §15), or None (no ``tenant`` key).

    Raises:
        ValueError: the ``tenant`` is not a non-empty string.
    """
    if "tenant" not in row:
        return None
    tenant = row["tenant"]
    if not isinstance(tenant, str) or not tenant:
        raise ValueError("an event line whose tenant is not a non-empty string")
    return tenant


@dataclass
class Archive:
    """An archive file as read back: its manifest, and its events on demand."""

    path: Path
    manifest: dict[str, Any]
    signature: str | None
    heads: dict[str, ArchivedHead]

    @property
    def root(self) -> str:
        """SHA-256 of the manifest's canonical JSON: the archive's name in the database."""
        return hashlib.sha256(canonical_json(self.manifest).encode("utf-8")).hexdigest()

    @property
    def created_at(self) -> str:
        return str(self.manifest.get("created_at", ""))

    @property
    def key_id(self) -> str | None:
        value = self.manifest.get("key_id")
        return None if value is None else str(value)

    def events(self) -> Iterator[StoredEvent]:
        """Every archived event, in file order (re-reading the file).

        Raises:
            EvidenceError: the file changed since it was read, or a line is not an event.
        """
        for event, _ in self._lines():
            yield event

    def tenants(self) -> dict[tuple[str, str], str]:
        """The tenant of every archived mint that had one (SPEC §15), by ``(thread_id,
        interrupt_id)`` (re-reading the file; mints without a tenant are not listed).

        Raises:
            EvidenceError: the file changed since it was read, or a line is not an event.
        """
        return {
            (event.thread_id, event.interrupt_id): tenant
            for event, tenant in self._lines()
            if tenant is not None and event.type == MINTED and event.interrupt_id is not None
        }

    def _lines(self) -> Iterator[tuple[StoredEvent, str | None]]:
        with _open(self.path, "r") as handle:
            lines = iter(handle)
            next(lines, None)  # the header
            previous: bytes | None = None
            for line in lines:
                if previous is not None:
                    yield self._line(previous)
                previous = line
            # the last line is the manifest

    def _line(self, line: bytes) -> tuple[StoredEvent, str | None]:
        """An event line's event and tenant."""
        try:
            row = json.loads(line)
            return event_from_dict(row), tenant_from_dict(row)
        except ValueError as exc:
            raise EvidenceError(f"the archive {str(self.path)!r} holds a line that is not an event ({exc})") from None


def read_archive(path: str | Path) -> Archive:
    """Read an archive's header and manifest (not yet checked: see :func:`verify_archive`).

    Raises:
        EvidenceError: not readable as an archive (not one, truncated, or not gzip).
    """
    p = Path(path)
    first: bytes | None = None
    last: bytes | None = None
    try:
        with _open(p, "r") as handle:
            for line in handle:
                if first is None:
                    first = line
                last = line
    except (OSError, EOFError) as exc:
        raise EvidenceError(f"cannot read the archive {str(p)!r}: {exc}") from None
    if first is None or last is None or first is last:
        raise EvidenceError(f"the archive {str(p)!r} is empty or truncated (no manifest)")
    try:
        header = json.loads(first)
        tail = json.loads(last)
    except ValueError:
        raise EvidenceError(f"the archive {str(p)!r} is not JSON Lines") from None
    if not isinstance(header, dict) or header.get("format") != ARCHIVE_FORMAT:
        raise EvidenceError(f"{str(p)!r} is not a symfonic-store archive ({ARCHIVE_FORMAT})")
    if not isinstance(tail, dict) or not isinstance(tail.get("manifest"), dict):
        raise EvidenceError(f"the archive {str(p)!r} is truncated: its last line is not the manifest")
    manifest = tail["manifest"]
    signature = tail.get("signature")
    try:
        heads = [ArchivedHead.from_list(h) for h in manifest.get("threads", [])]
    except (ValueError, TypeError) as exc:
        raise EvidenceError(f"the archive {str(p)!r} has a malformed manifest ({exc})") from None
    return Archive(p, manifest, signature if isinstance(signature, str) else None, {h.thread_id: h for h in heads})


@dataclass
class ArchiveCheck:
    """The outcome of :func:`verify_archive`: ``ok`` when the file is whole and consistent
    (and signed by one of the given keys, when keys were given)."""

    path: Path
    archive: Archive | None = None
    problems: list[str] = field(default_factory=list)
    events: int = 0
    signed_by: str | None = None
    """The key id whose signature was checked, or None (unsigned, or no keys given)."""

    # ok, and true when ok, as every report of a check (CheckpointReport, ArchiveCheck,
    # ChainReport): two one-line members, shorter than the base class they would need.
    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if not self.ok:
            return "\n".join([f"archive {str(self.path)!r} does not verify:", *(f"  {p}" for p in self.problems)])
        threads = 0 if self.archive is None else len(self.archive.heads)
        signed = (
            f"signed by key {self.signed_by[:16]}..."
            if self.signed_by
            else "signature not checked (no public key given)"
        )
        return (
            f"archive {str(self.path)!r}: {self.events} event(s) of {threads} thread(s), every "
            f"hash chain holds, the manifest matches the content; {signed}"
        )


def verify_archive(
    path: str | Path,
    keys: Mapping[str, Ed25519PublicKey] | None = None,
) -> ArchiveCheck:
    """Check an archive offline: every line, each thread's hash chain from its base, the
    manifest's content hash and heads, and (with ``keys``) the manifest's signature."""
    check = ArchiveCheck(Path(path))
    try:
        archive = read_archive(path)
    except EvidenceError as exc:
        check.problems.append(str(exc))
        return check
    check.archive = archive
    if keys:
        kid = archive.key_id
        key = None if kid is None else keys.get(kid)
        if archive.signature is None or kid is None:
            check.problems.append("the manifest is not signed (the archive was made without --key)")
        elif key is None:
            check.problems.append(f"the manifest is signed by key {kid[:16]}..., not one of the given public keys")
        elif not signature_holds(archive.manifest, archive.signature, key):
            check.problems.append("the manifest's signature does not hold: the file was edited after it was signed")
        else:
            check.signed_by = kid
    digest = hashlib.sha256()
    seen: dict[str, Tip | None] = {}
    order: list[str] = []
    try:
        with _open(archive.path, "r") as handle:
            lines = iter(handle)
            header = next(lines)
            digest.update(header)
            previous: bytes | None = None
            for line in lines:
                if previous is not None:
                    digest.update(previous)
                    _check_event(archive, archive._line(previous)[0], seen, order, check)
                previous = line
    except (OSError, EOFError) as exc:
        check.problems.append(f"cannot read it: {exc}")
        return check
    except EvidenceError as exc:
        check.problems.append(str(exc))
        return check
    manifest = archive.manifest
    if manifest.get("content") != digest.hexdigest():
        check.problems.append("the content does not match the manifest's hash: lines were changed, added or removed")
    if manifest.get("events") != check.events:
        check.problems.append(f"the manifest counts {manifest.get('events')} event(s), the file holds {check.events}")
    for thread_id, head in archive.heads.items():
        tip = seen.get(thread_id)
        if thread_id not in seen:
            check.problems.append(f"thread {thread_id!r}: listed in the manifest, but no event of it is in the file")
        elif tip is None:
            continue  # its broken link is reported already
        elif (tip.version, tip.position, tip.last_hash) != (head.version, head.position, head.last_hash):
            check.problems.append(
                f"thread {thread_id!r}: its events end at version {tip.version} (position "
                f"{tip.position}), the manifest says version {head.version} (position {head.position})"
            )
    for thread_id in dict.fromkeys(order):
        if thread_id not in archive.heads:
            check.problems.append(f"thread {thread_id!r}: in the file but not in the manifest")
    return check


def _check_event(
    archive: Archive,
    event: StoredEvent,
    seen: dict[str, Tip | None],
    order: list[str],
    check: ArchiveCheck,
) -> None:
    """Follow one archived event on its thread's chain (None in ``seen``: already broken)."""
    check.events += 1
    if event.thread_id in seen:
        if order[-1] != event.thread_id:
            check.problems.append(f"thread {event.thread_id!r}: its events are not together in the file")
            seen[event.thread_id] = None
            order.append(event.thread_id)
            return
        tip = seen[event.thread_id]
        if tip is None:
            return
    else:
        head = archive.heads.get(event.thread_id)
        base = (0, 0, GENESIS_HASH) if head is None else (head.base_version, head.base_position, head.base_hash)
        tip = seen[event.thread_id] = Tip(base[0], base[1], base[2])
        order.append(event.thread_id)
    problem = tip.extend(event)
    if problem is not None:
        check.problems.append(f"thread {event.thread_id!r} at position {event.position}: {problem}")
        seen[event.thread_id] = None


# --- archiving from a store ----------------------------------------------------------------


@dataclass
class ArchiveResult:
    """What :meth:`~symfonic_store.InterruptStore.archive` did."""

    path: Path | None
    before: datetime
    threads: list[str] = field(default_factory=list)
    events: int = 0
    removed: int = 0
    root: str | None = None
    signed: bool = False

    def __str__(self) -> str:
        if not self.threads:
            return f"no finished thread whose last event is before {self.before.isoformat()}: nothing archived"
        signed = "signed" if self.signed else "unsigned (no --key)"
        return (
            f"archived {len(self.threads)} thread(s), {self.events} event(s), into "
            f"{str(self.path)!r} ({signed}, manifest {str(self.root)[:16]}...); removed "
            f"{self.removed} event(s) from the event table"
        )


def candidates(conn: Connection, *, before: datetime) -> list[tuple[str, int, str]]:
    """``(thread_id, version, last_hash)`` of every whole finished thread to archive."""
    return sql.archivable_threads(conn, before=before)


def write(
    conn: Connection,
    *,
    path: Path,
    threads: Sequence[tuple[str, int, str]],
    before: datetime,
    now: datetime,
    key: Ed25519PrivateKey | None,
) -> Archive:
    """Write the archive of ``threads`` (their events after any earlier archive of them).

    Raises:
        EvidenceError: a thread's chain does not hold, or its events no longer end at the
            head it was chosen with; the partly written file is removed.
    """
    with _new_file(path) as handle:
        digest = hashlib.sha256()

        def out(value: Any) -> None:
            line = canonical_json(value).encode("utf-8") + b"\n"
            digest.update(line)
            handle.write(line)

        out({"format": ARCHIVE_FORMAT, "before": before.isoformat(), "created_at": now.isoformat()})
        expected = {t: (v, h) for t, v, h in threads}
        ids = sorted(expected)
        bases = sql.archived_head_records(conn, thread_ids=ids)
        archived_versions = sql.archived_versions(conn, ids)
        run_ids = sql.thread_run_ids(conn, ids)
        heads: list[ArchivedHead] = []
        count = 0
        for i in range(0, len(ids), CHUNK):
            chunk = ids[i : i + CHUNK]
            current: str | None = None
            tip = Tip()
            first = (0, 0, GENESIS_HASH)

            def close(thread_id: str, tip: Tip, first: tuple[int, int, str]) -> None:
                if tip.version > expected[thread_id][0]:
                    raise ConcurrencyConflictError(
                        f"thread {thread_id!r} got a new event while it was being archived: "
                        "nothing was archived; run the archive again"
                    )
                if (tip.version, tip.last_hash) != expected[thread_id]:
                    raise EvidenceError(
                        f"thread {thread_id!r}: its events end at version {tip.version}, not at its "
                        f"projection head (version {expected[thread_id][0]}): run `symfonic-store "
                        "verify`; nothing was archived",
                        thread_id=thread_id,
                    )
                heads.append(ArchivedHead(thread_id, *first, tip.version, tip.position, tip.last_hash, run_ids.get(thread_id)))

            for event, tenant in sql.events_of_threads(conn, chunk):
                if event.thread_id != current:
                    if current is not None:
                        close(current, tip, first)
                    current = event.thread_id
                    k = archived_versions.get(current) or 0
                    if k:
                        record = bases.get((current, k))
                        if record is None:
                            raise EvidenceError(
                                f"thread {current!r}: its versions 1..{k} are marked archived but no "
                                "archive record of that head exists: run `symfonic-store verify`; "
                                "nothing was archived",
                                thread_id=current,
                            )
                        first = (k, record[0], record[1])
                    else:
                        first = (0, 0, GENESIS_HASH)
                    tip = Tip(*first)
                problem = tip.extend(event)
                if problem is not None:
                    raise EvidenceError(
                        f"thread {event.thread_id!r} at position {event.position}: {problem}; run "
                        "`symfonic-store verify`; nothing was archived",
                        thread_id=event.thread_id, position=event.position,
                    )
                # A mint's tenant is beside its columns; every other line is the event alone.
                out(event.as_dict() if tenant is None else {**event.as_dict(), "tenant": tenant})
                count += 1
            if current is not None:
                close(current, tip, first)
        heads.sort(key=lambda h: h.thread_id)
        manifest: dict[str, Any] = {
            "format": ARCHIVE_FORMAT,
            "before": before.isoformat(),
            "created_at": now.isoformat(),
            "events": count,
            "threads": [h.as_list() for h in heads],
            "content": digest.hexdigest(),
            "key_id": None if key is None else key_id(key.public_key()),
        }
        signature = None if key is None else sign(manifest, key)
        handle.write(canonical_json({"manifest": manifest, "signature": signature}).encode("utf-8") + b"\n")
        return Archive(path, manifest, signature, {h.thread_id: h for h in heads})


@contextlib.contextmanager
def _new_file(path: Path) -> Iterator[IO[bytes]]:
    """The new archive file, removed again if writing it fails.

    It is opened before the ``try``: a file that appeared under that name since the
    caller looked (``open(..., "xb")`` refuses it) is someone else's and is never removed.
    """
    handle = _open_new(path)
    try:
        with handle:
            yield handle
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _open_new(path: Path) -> IO[bytes]:
    try:
        raw = open(path, "xb")
    except FileExistsError:
        raise InvalidInputError("--out", f"{str(path)!r} exists: an archive is never overwritten") from None
    except OSError as exc:
        raise InvalidInputError("--out", f"cannot create {str(path)!r}: {exc.strerror}") from None
    if path.name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="wb", filename="")  # type: ignore[return-value]
    return raw

def remove(conn: Connection, *, archive: Archive, now: datetime) -> int:
    """Record ``archive`` and remove its threads' events, in the caller's one transaction.

    Raises:
        ConcurrencyConflictError: a thread changed since it was written (nothing removed).
        EvidenceError: the removal did not remove exactly the archived events.
    """
    sql.lock_evidence(conn)
    heads = sorted(archive.heads.values(), key=lambda h: h.thread_id)
    ids = [h.thread_id for h in heads]
    still = {t: (v, h) for t, v, h in sql.archivable_threads(conn, before=None, thread_ids=ids)}
    for head in heads:
        if still.get(head.thread_id) != (head.version, head.last_hash):
            raise ConcurrencyConflictError(
                f"thread {head.thread_id!r} changed while it was being archived: nothing was "
                f"removed; run the archive again (the file {str(archive.path)!r} is not needed)"
            )
    archive_id = sql.insert_archive(
        conn,
        {
            "root": archive.root,
            "before": datetime.fromisoformat(str(archive.manifest["before"])),
            "created_at": now,
            "threads": len(heads),
            "events": int(archive.manifest["events"]),
            "key_id": archive.key_id,
            "manifest": {"manifest": archive.manifest, "signature": archive.signature},
        },
    )
    sql.insert_archived_threads(
        conn,
        [
            {
                "thread_id": h.thread_id,
                "version": h.version,
                "archive_id": archive_id,
                "first_version": h.base_version + 1,
                "position": h.position,
                "last_hash": h.last_hash,
                "run_id": h.run_id,
            }
            for h in heads
        ],
    )
    sql.keep_read_keys(conn, [(h.thread_id, h.version) for h in heads])
    # The open counts' deltas name their tenant through the mint: take them in while the
    # mints are still in the table.
    counts.fold_position(conn, lock=True)
    while counts.compact(conn) == counts.COMPACTED:
        pass
    removed = guards.remove_archived(
        conn, [{"thread_id": h.thread_id, "version": h.version, "last_hash": h.last_hash} for h in heads]
    )
    expected = int(archive.manifest["events"])
    if removed != expected:
        raise EvidenceError(
            f"the removal would take {removed} event(s) out of the table, but the archive holds "
            f"{expected}: nothing was removed; run `symfonic-store verify`"
        )
    sql.mark_archived(conn, [(h.thread_id, h.version) for h in heads])
    return removed
