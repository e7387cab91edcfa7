"""Verifying a checkpoint: does the log (and the given archives) still hold what it signed?

One pass over the events the checkpoint covers (with ``thread_id``, that thread's).
Each checkpoint lists only the leaves changed since the previous one and names that
one, so folding the chain of signed documents gives every committed leaf: a failed
check names the thread and, where it can tell, the position.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from ...db.statements import evidence as sql
from ...db.statements import log
from ...db.tables import CHECKPOINT_TABLES, missing_tables
from ...errors import EvidenceError
from ...events import StoredEvent
from .commitment import Leaf, Tip, bucket_digest_of, bucket_of, buckets_of, root_of
from .document import Checkpoint, parse_checkpoint, signature_problem

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ..archive import Archive


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

    # ok, and true when ok, as every report of a check (CheckpointReport, ArchiveCheck,
    # ChainReport): two one-line members, shorter than the base class they would need.
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
    *,
    kept: bool = True,
) -> _Committed:
    """Fold the chain of signed checkpoints ending at ``checkpoint`` into its leaves.

    The chain comes from the given checkpoint files first, then from the documents the
    database keeps (each counts only if its id and signature hold under ``keys``; not
    read when the checkpoint tables are gone, ``kept`` false). With ``thread_id``, stops
    at the newest checkpoint that lists that thread -- or, when the store's kept state is
    that of ``checkpoint`` (its buckets give its root), takes the thread's head from
    there, proven by its bucket: no document need be read.
    """
    if thread_id is not None and kept:
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
            if found is None and kept:
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
    # The checkpoint tables only help: without them (dropped) the files alone are read.
    kept = not missing_tables(conn, CHECKPOINT_TABLES)
    committed = _committed(conn, checkpoint, keys, dict(known or {}), thread_id, kept=kept)
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
    for event in log.stream_events(conn, query):
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
