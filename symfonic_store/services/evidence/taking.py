"""Taking a checkpoint: read the log since the last one, sign the new root, record it.

The store keeps the latest checkpoint's leaves and bucket hashes
(``symfonic_checkpoint_heads``/``_buckets``). Taking the next one reads only the events
after the previous position (and the threads archived since), recomputes the buckets of
the threads that changed, and hashes the bucket list: work proportional to the threads
changed, not to the log. Before it reuses that state it checks it against the previous
checkpoint's signed root (the buckets) and each changed bucket against its stored hash,
and it re-checks every new event's hash chain: it never signs on top of altered state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from ...db.executor import WritersBusyError
from ...db.statements import evidence as sql
from ...db.statements import log
from ...db.tables import CHECKPOINT_TABLES, missing_tables
from ...errors import EvidenceError, SchemaNotMigratedError
from ...events import StoredEvent
from .commitment import FORMAT, Leaf, Tip, bucket_digest_of, bucket_of, root_of
from .document import Checkpoint, heads_digest, parse_checkpoint, signature_problem
from .keys import key_id, sign

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


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

    _follow_all(log.stream_events(conn, sql.events_upto_query(position)), start, leaves)
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
    _follow_all(log.stream_events(conn, query), tips.__getitem__, leaves)
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
    gone = missing_tables(conn, CHECKPOINT_TABLES)
    if gone:
        # Dropped: nothing to build on or record into. A chain folder holds what the next
        # checkpoint follows, so with one the checkpoint is taken from the log alone.
        if follow is None:
            raise _no_checkpoint_tables(gone)
        return _take_from_folder(conn, key=key, full=full, now=now, follow=follow)
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
    position, archives = _final_position(conn, last)
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
    checkpoint = _signed(
        key, position=position, buckets=buckets, count=count, archives=archives, last=last,
        full=bool(full and last is not None), now=now, changed=changed,
    )
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
            "heads": checkpoint.document["heads"],
        },
    )
    return checkpoint


def _no_checkpoint_tables(gone: Sequence[str]) -> SchemaNotMigratedError:
    return SchemaNotMigratedError(
        f"the checkpoint table(s) {', '.join(gone)} are missing (dropped; the schema is still "
        "at head, so `symfonic-store db upgrade` recreates nothing): `symfonic-store db guards "
        "--restore` recreates them, empty; `symfonic-store checkpoint --chain DIR` needs none, "
        "it follows the folder's newest checkpoint"
    )


def _take_from_folder(
    conn: Connection,
    *,
    key: Ed25519PrivateKey,
    full: bool,
    now: datetime,
    follow: Callable[[Connection, Checkpoint | None, bool], tuple[Checkpoint | None, bool]],
) -> Checkpoint:
    """:func:`take` with the checkpoint tables gone: the log is proven against the chain
    folder's newest file (``follow`` given no recorded checkpoint), every head computed
    from the log, and the checkpoint signed linked to that file; nothing is recorded in
    the database (the folder keeps it)."""
    last, _ = follow(conn, None, full)
    position, archives = _final_position(conn, last)
    leaves = _all_leaves(conn, position)
    buckets = _buckets_of_rows(_head_row(x) for x in leaves.values())
    return _signed(
        key, position=position, buckets=buckets, count=len(leaves), archives=archives,
        last=last, full=False, now=now, changed=leaves,
    )


def _final_position(conn: Connection, last: Checkpoint | None) -> tuple[int, int]:
    """The position the checkpoint covers and the newest archive's id.

    Raises:
        EvidenceError: the log ends before ``last``'s position, or writers stayed busy.
    """
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
    return position, archives


def _signed(
    key: Ed25519PrivateKey,
    *,
    position: int,
    buckets: Mapping[int, tuple[str, int]],
    count: int,
    archives: int,
    last: Checkpoint | None,
    full: bool,
    now: datetime,
    changed: Mapping[str, Leaf],
) -> Checkpoint:
    """The signed document over ``buckets``, listing the ``changed`` heads."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "position": position,
        "root": root_of(buckets),
        "threads": count,
        "archives": archives,
        "previous": None
        if last is None
        else {"position": last.position, "root": last.root, "id": last.id},
        "full": full,
        "taken_at": now.isoformat(),
        "key_id": key_id(key.public_key()),
        # What a gap-safe reader had seen, and the writers still open: none, since
        # final_max_position let them end first, so a later commit lands above ``position``.
        "cursor": position,
        "in_flight": [],
    }
    heads = [leaf.as_list() for leaf in sorted(changed.values(), key=lambda x: x.thread_id)]
    document["heads_sha256"] = heads_digest(heads)
    document["signature"] = sign(document, key)
    document["heads"] = heads
    return Checkpoint(document)


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
