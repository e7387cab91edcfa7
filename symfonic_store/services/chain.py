"""Checkpoint chains kept in a folder outside the database (SPEC §12).

The store records every checkpoint it takes, and the next one builds on that record. An
attacker with database rights can delete the record (every checkpoint table), re-forge
the log, and let the next plain ``checkpoint`` sign it as a fresh chain. A chain folder
holds the files themselves, where the database administrator cannot rewrite them, so the
next checkpoint follows the newest file there instead of the database's word:

- :func:`read_chain` reads the folder: the files whose signature holds under the given
  keys, oldest first, and the files it ignored (with why);
- :func:`follow_newest` decides, inside the checkpoint's transaction, what the new one
  follows: when the database still holds the newest file's state (same id, same root) the
  checkpoint extends it cheaply; otherwise it first proves the log still holds what that
  file committed to (one pass over the events it covers), refusing and naming the first
  thread that does not, and then recomputes every head from the log;
- :func:`chain_problems` checks the links between the files (each names the one before
  it), which ``verify --chain`` reports beside the log's check against the newest.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection

from ..db.statements import evidence as sql
from ..errors import EvidenceError, InvalidInputError
from .evidence.commitment import root_of
from .evidence.document import Checkpoint, parse_checkpoint, signature_problem
from .evidence.keys import key_id
from .evidence.verifying import CheckpointReport, verify_checkpoint

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PATTERN = "*.json"
"""The files of a chain folder that are read: other files (a README, ``.git``) are not."""


class IgnoredCheckpointFile(UserWarning):
    """A file in a chain folder that is not a checkpoint signed by the given key: the new
    checkpoint does not follow it (``symfonic-store checkpoint`` prints it on stderr)."""


@dataclass(frozen=True, slots=True)
class ChainFile:
    """A checkpoint file of a chain folder whose signature holds."""

    path: Path
    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class Ignored:
    """A file of a chain folder that does not count, and why."""

    path: Path
    why: str

    def __str__(self) -> str:
        return f"{str(self.path)!r}: {self.why}"


@dataclass(slots=True)
class Chain:
    """A chain folder as read: its valid files oldest first, the files ignored, and the
    keys a file had to be signed by."""

    folder: Path
    keys: Mapping[str, Ed25519PublicKey]
    files: list[ChainFile] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)
    lock: int | None = None
    """The folder's descriptor, locked while a checkpoint goes into it (:func:`open_chain`)."""

    def close(self) -> None:
        """Let the next checkpoint into the folder."""
        if self.lock is not None:
            os.close(self.lock)  # closing the descriptor releases its flock
            self.lock = None

    @property
    def newest(self) -> ChainFile | None:
        return self.files[-1] if self.files else None

    def follow(self, conn: Connection, last: Checkpoint | None, full: bool) -> tuple[Checkpoint | None, bool]:
        """:func:`follow_newest` of this chain, under the keys that signed its files."""
        return follow_newest(conn, last, full, chain=self)

    def keep(self, checkpoint: Checkpoint) -> Path:
        """Write ``checkpoint`` into the folder (never over a file).

        Raises:
            EvidenceError: it cannot be written; the database recorded it already, and the
                next run proves the log against the folder's newest file and goes on.
        """
        target = self.folder / file_name(checkpoint)
        try:
            write_new(target, checkpoint.to_json(), option="chain")
        except InvalidInputError as exc:
            raise EvidenceError(
                f"the checkpoint at position {checkpoint.position} was recorded, but {exc}; the "
                "next run proves the log against the folder's newest file and goes on"
            ) from None
        return target

    def known(self) -> dict[str, Checkpoint]:
        """Every valid checkpoint by id: what names a changed thread when the database
        lost its own record of the chain."""
        return {f.checkpoint.id: f.checkpoint for f in self.files}


def chain_folder(value: str | os.PathLike[str], *, writable: bool) -> Path:
    """The chain folder ``value`` names.

    Raises:
        InvalidInputError: it is not an existing folder (or, ``writable``, not writable).
    """
    folder = Path(value)
    if not folder.is_dir():
        raise InvalidInputError("chain", f"{str(folder)!r} is not a folder; create it to start a chain")
    if writable and not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidInputError("chain", f"cannot write into {str(folder)!r}")
    return folder


def open_chain(
    folder: str | os.PathLike[str],
    key: Ed25519PrivateKey,
    *,
    also: Mapping[str, Ed25519PublicKey] | None = None,
) -> Chain:
    """The chain in ``folder`` that a checkpoint signed by ``key`` goes into: its files
    signed by ``key`` (or by a key of ``also``: the old one after a rotation); each other
    file is an :class:`IgnoredCheckpointFile` warning.

    Raises:
        InvalidInputError: ``folder`` is not a writable folder.
    """
    public = key.public_key()
    path = chain_folder(folder, writable=True)
    # Two runs into one folder (an overlapping cron) take turns from reading the folder to
    # writing their file: the second follows the first's file instead of forking the chain.
    lock = _lock(path)
    try:
        chain = read_chain(path, {**(also or {}), key_id(public): public})
    except BaseException:
        if lock is not None:
            os.close(lock)
        raise
    chain.lock = lock
    for ignored in chain.ignored:
        warnings.warn(f"ignored {ignored}", IgnoredCheckpointFile, stacklevel=3)
    return chain


def _lock(folder: Path) -> int | None:
    """An exclusive lock on ``folder`` (waits for the holder); None where the platform
    has no ``flock``."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        raise
    return fd


def read_chain(folder: Path, keys: Mapping[str, Ed25519PublicKey]) -> Chain:
    """The checkpoints in ``folder`` (its ``*.json`` files) signed by one of ``keys``,
    ordered by position (then time taken); the other files are in ``ignored``."""
    chain = Chain(folder, keys)
    for path in sorted(folder.glob(PATTERN)):
        if not path.is_file():
            continue
        try:
            checkpoint = parse_checkpoint(path.read_bytes(), what=f"file {path.name!r}")
        except OSError as exc:
            chain.ignored.append(Ignored(path, f"cannot be read ({exc.strerror})"))
            continue
        except EvidenceError as exc:
            chain.ignored.append(Ignored(path, str(exc)))
            continue
        problem = signature_problem(checkpoint, keys)
        if problem is not None:
            chain.ignored.append(Ignored(path, f"not a checkpoint of this chain: {problem}"))
            continue
        chain.files.append(ChainFile(path, checkpoint))
    chain.files.sort(key=lambda f: (f.checkpoint.position, f.checkpoint.taken_at, f.checkpoint.id))
    return chain


def file_name(checkpoint: Checkpoint) -> str:
    """The name a checkpoint gets in a folder: by time taken and position, so the names
    sort as the chain does."""
    taken = datetime.fromisoformat(checkpoint.taken_at)
    return f"checkpoint-{taken:%Y%m%dT%H%M%S%fZ}-{checkpoint.position}.json"


def write_new(path: Path, text: str, *, option: str) -> None:
    """Create ``path`` holding ``text``; never over an existing file.

    Raises:
        InvalidInputError: the file exists or cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise InvalidInputError(option, f"{str(path)!r} exists: a checkpoint file is never overwritten") from None
    except OSError as exc:
        raise InvalidInputError(option, f"cannot create {str(path)!r}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def follow_newest(
    conn: Connection, last: Checkpoint | None, full: bool, *, chain: Chain
) -> tuple[Checkpoint | None, bool]:
    """What a checkpoint taken into ``chain`` follows, and whether it recomputes every
    head: called by :func:`~symfonic_store.services.evidence.taking.take` with the latest
    checkpoint the database recorded (``last``) under the evidence lock.

    Raises:
        EvidenceError: the log no longer holds what the chain's newest file committed to
            (naming the first thread that differs); nothing is signed.
    """
    newest = chain.newest
    if newest is None:
        # An empty folder starts a new chain that lists every head, so the folder alone
        # names what changed later, whatever happens to the database's record.
        return None, True
    anchor = newest.checkpoint
    held = (
        last is not None
        and last.id == anchor.id
        and root_of(sql.checkpoint_buckets_all(conn)) == anchor.root
    )
    if held and not full:
        return anchor, False  # the kept state is the newest file's: extend it
    # The database does not hold the newest file's state (deleted, restored from a backup,
    # or a run that stopped between its commit and its file): its record cannot be
    # trusted to name what the log held, the file can.
    report = verify_checkpoint(conn, anchor, keys=chain.keys, known=chain.known(), source=f"checkpoint {newest.path.name!r}")
    if not report.ok:
        raise _refusal(newest, report)
    return anchor, True


def _refusal(newest: ChainFile, report: CheckpointReport) -> EvidenceError:
    first = report.first
    assert first is not None
    return EvidenceError(
        f"refusing to sign: the log no longer extends the newest checkpoint in the chain "
        f"({str(newest.path)!r}, position {newest.checkpoint.position}): {first}. Nothing "
        "was written; run `symfonic-store verify --chain DIR --public-key KEY.pub` to see "
        "what changed",
        thread_id=first.thread_id,
        position=first.position,
    )


def chain_problems(chain: Chain) -> list[str]:
    """What is wrong with the links between the files of ``chain`` (empty: none).

    Each file must name the one before it as its ``previous`` (the oldest may follow a
    checkpoint kept elsewhere), so a file removed from the middle, a fork (two files
    following the same one) and a second start all show.
    """
    problems: list[str] = []
    for before, after in zip(chain.files, chain.files[1:], strict=False):
        cp, prev = after.checkpoint, after.checkpoint.previous
        if prev is None:
            problems.append(
                f"{str(after.path)!r} starts a new chain (it follows no checkpoint) after "
                f"{str(before.path)!r}"
            )
        elif prev.id != before.checkpoint.id:
            named = next((f for f in chain.files if f.checkpoint.id == prev.id), None)
            where = (
                f"the checkpoint at position {prev.position}, which is not in the folder"
                if named is None
                else f"{str(named.path)!r}, not the file before it ({str(before.path)!r}): the chain forks"
            )
            problems.append(f"{str(after.path)!r} (position {cp.position}) follows {where}")
        elif prev.position != before.checkpoint.position or prev.root != before.checkpoint.root:
            problems.append(f"{str(after.path)!r} names {str(before.path)!r} with another position or root")
    return problems


def restarts(chain: Chain) -> Sequence[ChainFile]:
    """The files just before a ``full: true`` file: such a file recomputed every head
    without proving that the log extends them, so each must be checked against the log
    in its own right."""
    return [before for before, after in zip(chain.files, chain.files[1:], strict=False) if after.checkpoint.full]


@dataclass
class ChainReport:
    """The outcome of ``verify --chain``: the links, and the log against the newest file
    (and against the file before each restart)."""

    folder: Path
    files: int = 0
    ignored: list[Ignored] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    reports: list[CheckpointReport] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        found = [f"{i} (every file of the chain must be a checkpoint signed by a given key)" for i in self.ignored]
        found += self.links
        for report in self.reports:
            found += [f"{report.source}: {p}" for p in report.problems]
        if not self.files and not self.ignored:
            found.append(f"no checkpoint in {str(self.folder)!r}")
        return found

    # ok, and true when ok, as every report of a check (CheckpointReport, ArchiveCheck,
    # ChainReport): two one-line members, shorter than the base class they would need.
    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"chain {str(self.folder)!r}: {self.files} checkpoint file(s)"
        head += ", linked" if not (self.links or self.ignored) else ", not linked"
        lines = [head, *(f"  {i}" for i in self.ignored), *(f"  {p}" for p in self.links)]
        lines += [str(r) for r in self.reports]
        return "\n".join(lines)
