"""The plans of evidence (SPEC §10): signed checkpoints, chains, archives."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from .. import validation
from ..errors import (
    ConcurrencyConflictError,
    DatabaseError,
    EvidenceError,
    InvalidInputError,
    SymfonicStoreError,
)
from ..services import archive as archiving
from ..services import chain as chaining
from ..services import evidence
from ..services.archive import ArchiveResult
from ..services.evidence import Checkpoint, CheckpointProblem, CheckpointReport
from .append import Refusal, utc_now
from .plan import Op, Plan
from .settings import Settings

if TYPE_CHECKING:
    pass


class EvidenceOps(Settings):
    """Checkpoints of the log, their verification, and archives."""

    def checkpoint(
        self,
        private_key: Any,
        *,
        previous: Any = None,
        full: bool = False,
        chain: str | os.PathLike[str] | None = None,
        public_keys: Sequence[Any] = (),
    ) -> Plan[Checkpoint]:
        """Take and sign a checkpoint of the whole log up to its current position.

        ``private_key`` is an Ed25519 private key, its PEM (bytes) or the path of its PEM
        file (``symfonic-store keygen`` makes one). The checkpoint follows the latest one
        the store recorded; ``previous`` (a checkpoint, its file or its JSON) pins which
        one that must be. ``full`` recomputes every thread's head from the log instead of
        the threads changed since the previous checkpoint (a new start after a refusal).
        Keep the returned document outside the database (``checkpoint.to_json()``).

        ``chain`` (a folder; instead of ``previous``) follows the newest checkpoint file
        there that the key signed, whatever the database recorded, and writes the new one
        into it; other files there are passed over with an :class:`IgnoredCheckpointFile`
        warning, except files signed by one of ``public_keys`` (the old key after a
        rotation). ``full`` then recomputes every head, still only once the log is
        proven to extend that file.

        Raises:
            EvidenceError: the log no longer extends the latest checkpoint (with
                ``chain``: the folder's newest, even if the database lost its record),
                the state kept for it was altered, or ``previous`` is not the latest;
                nothing is signed or written.
            InvalidInputError: not an Ed25519 private key, a bad ``previous``, or
                ``chain`` with ``previous`` or not a writable folder, or
                ``public_keys`` without ``chain`` or not public keys.
        """
        key = evidence.load_private_key(private_key)
        pinned = None if previous is None else checkpoint_arg(previous, "previous")
        if not isinstance(full, bool):
            raise InvalidInputError("full", "must be True or False")
        if chain is not None and pinned is not None:
            raise InvalidInputError("chain", "replaces previous: give one of them")
        if isinstance(public_keys, str | bytes) or (public_keys and chain is None):
            raise InvalidInputError("public_keys", "is a list of public keys, and counts only with chain")
        also = evidence.keys_by_id(public_keys)
        found = None if chain is None else chaining.open_chain(chain, key, also=also)
        follow = None if found is None else found.follow
        try:
            taken: Checkpoint = yield Op(
                partial(evidence.take, key=key, previous=pinned, full=full, now=utc_now(), follow=follow),
                write=True,
                appends=False,
            )
            if found is not None:
                found.keep(taken)
        finally:
            if found is not None:
                found.close()
        return taken

    def verify_chain(
        self,
        chain: str | os.PathLike[str],
        *,
        public_keys: Sequence[Any],
        archives: Sequence[Any] = (),
        thread_id: str | None = None,
    ) -> Plan[chaining.ChainReport]:
        """Check a chain folder: every file signed by one of ``public_keys`` and naming the
        one before it, and the log against the newest (and against the file before any
        ``full`` restart, which did not prove the log extended it).

        Raises:
            InvalidInputError: ``chain`` is not a folder; no or bad public keys.
        """
        if isinstance(public_keys, str | bytes) or not public_keys:
            raise InvalidInputError("public_keys", "must list at least one public key")
        found = chaining.read_chain(chaining.chain_folder(chain, writable=False), evidence.keys_by_id(public_keys))
        report = chaining.ChainReport(found.folder, len(found.files), found.ignored, chaining.chain_problems(found))
        newest = found.newest
        for checked in [*chaining.restarts(found), *([] if newest is None else [newest])]:
            result: CheckpointReport = yield from self.verify_checkpoint(
                checked.checkpoint, public_keys=public_keys, archives=archives,
                thread_id=thread_id, chain=list(found.known().values()),
            )
            result.source = f"checkpoint {str(checked.path)!r}"
            report.reports.append(result)
        return report

    def verify_checkpoint(
        self,
        checkpoint: Any,
        *,
        public_keys: Sequence[Any],
        archives: Sequence[Any] = (),
        thread_id: str | None = None,
        chain: Sequence[Any] = (),
    ) -> Plan[CheckpointReport]:
        """Check that the log still holds, unchanged, everything ``checkpoint`` committed to.

        ``public_keys``: the keys that may have signed it (several when keys rotated).
        ``archives``: archive files holding threads removed since the checkpoint was
        taken. ``chain``: earlier checkpoints (or files), used to name what differs when
        the store's own record of them is gone. Events appended after the checkpoint are
        not flagged; one pass reads the events it covers (``thread_id``: that thread's).

        Raises:
            EvidenceError: ``checkpoint`` is not a checkpoint document.
            InvalidInputError: no public key, or one that is not an Ed25519 public key.
        """
        cp = checkpoint_arg(checkpoint, "checkpoint")
        if isinstance(public_keys, str | bytes) or not public_keys:
            raise InvalidInputError("public_keys", "must list at least one public key")
        keys = evidence.keys_by_id(public_keys)
        t = validation.text_id(thread_id, "thread_id", optional=True)
        known = {c.id: c for c in (checkpoint_arg(c, "chain") for c in chain)}
        read: list[archiving.Archive] = []
        failed = CheckpointReport(cp, thread_id=t)
        for source in archives:
            check = archiving.verify_archive(_path(source, "archives"), keys if _signed_by_given(source, keys) else None)
            if check.ok and check.archive is not None:
                read.append(check.archive)
            else:
                failed.problems.extend(CheckpointProblem(None, None, f"archive {str(check.path)!r}: {p}") for p in check.problems)
        if failed.problems:
            return failed
        # A plan step, alike the other ops' in shape only (another function, its own keywords):
        # deliberately spelled out.
        report: CheckpointReport = yield Op(
            partial(
                evidence.verify_checkpoint,
                checkpoint=cp,
                keys=keys,
                archives=read,
                known=known,
                thread_id=t,
            ),
            write=False,
        )
        return report

    def archive(
        self, before: datetime | str, out: str | os.PathLike[str], *, key: Any = None
    ) -> Plan[ArchiveResult]:
        """Move whole finished threads whose last event is before ``before`` into an archive.

        Writes a JSON Lines archive to ``out`` (gzip when it ends in ``.gz``; never over an
        existing file) with a manifest signed by ``key`` (optional), reads it back and
        verifies it, then removes those threads' events in one transaction. Each thread's
        projection head stays, marked archived, so a later event chains on from it;
        ``verify`` keeps passing, and older checkpoints do with ``archives=[out]``.

        Raises:
            InvalidInputError: a bad time, path or key, or ``out`` exists.
            EvidenceError: a thread's chain does not hold, or the written archive does not
                verify; nothing is removed (and the file is deleted).
            ConcurrencyConflictError: a thread changed meanwhile; nothing is removed.
        """
        moment = validation.moment(before, "before")
        if moment is None:
            raise InvalidInputError("before", "is required (an ISO 8601 time)")
        path = _path(out, "out")
        if path.exists():
            raise InvalidInputError("out", f"{str(path)!r} exists: an archive is never overwritten")
        signer = None if key is None else evidence.load_private_key(key)
        now = utc_now()
        found: list[tuple[str, int, str]] = yield Op(partial(archiving.candidates, before=moment), write=False)
        result = ArchiveResult(path=None, before=moment)
        if not found:
            return result
        written: archiving.Archive = yield Op(
            partial(archiving.write, path=path, threads=found, before=moment, now=now, key=signer),
            write=False,
        )
        keys = None if signer is None else {evidence.key_id(signer.public_key()): signer.public_key()}
        check = archiving.verify_archive(path, keys)
        if not check.ok or check.archive is None or check.archive.root != written.root:
            path.unlink(missing_ok=True)
            raise EvidenceError(f"the archive did not verify after writing, so nothing was removed: {check}")
        try:
            removed: int = yield Op(
                partial(_remove_archived, archive=check.archive, now=now), write=True, appends=False
            )
        except SymfonicStoreError as exc:
            if not (isinstance(exc, DatabaseError) and exc.outcome_unknown):
                path.unlink(missing_ok=True)  # nothing was removed: the file archives nothing
            raise
        return ArchiveResult(
            path=path,
            before=moment,
            threads=sorted(check.archive.heads),
            events=check.events,
            removed=removed,
            root=check.archive.root,
            signed=signer is not None,
        )


def checkpoint_arg(value: Any, field: str) -> Checkpoint:
    """A checkpoint given as itself, its JSON object or text, or the path of its file."""
    if isinstance(value, Checkpoint):
        return value
    if isinstance(value, Mapping):
        return evidence.parse_checkpoint(value)
    if isinstance(value, str) and value.lstrip().startswith("{"):
        return evidence.parse_checkpoint(value)
    path = _path(value, field)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(field, f"cannot read {str(path)!r}: {exc.strerror}") from None
    return evidence.parse_checkpoint(text, what=f"checkpoint file {str(path)!r}")


def _path(value: Any, field: str) -> Path:
    if isinstance(value, str | os.PathLike) and str(value):
        return Path(value)
    raise InvalidInputError(field, f"must be a path, got {type(value).__name__}")


def _signed_by_given(source: Any, keys: Mapping[str, Any]) -> bool:
    """Check an archive's signature only when one of the given keys made it: otherwise the
    checkpoint alone vouches for its content (an archive may be made without a key)."""
    try:
        return archiving.read_archive(_path(source, "archives")).key_id in keys
    except EvidenceError:
        return False


def _remove_archived(conn: Connection, *, archive: archiving.Archive, now: datetime) -> int | Refusal:
    try:
        return archiving.remove(conn, archive=archive, now=now)
    except ConcurrencyConflictError as exc:
        # A thread changed since it was written: trying again cannot make the file match.
        return Refusal(exc)
