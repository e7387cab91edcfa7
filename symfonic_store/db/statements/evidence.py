"""Evidence (SPEC §10): what checkpoints sign (positions, heads, buckets), what archives
record and keep, and the locks and final reads both need from the backend.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...events import ENDINGS, MINTED, StoredEvent
from ..backends import backend_of
from ..rows import (
    EVENT_COLUMNS,
    to_event,
)
from ..schema import (
    archived_read_keys,
    archived_threads,
    archives,
    checkpoint_buckets,
    checkpoint_heads,
    checkpoints,
    claims,
    events,
    open_interrupts,
    threads,
    wakeups,
)

ID_CHUNK = 500
"""Ids per statement when a statement names many threads (one bound parameter each)."""
ROW_CHUNK = 5000


class ArchivedBase(NamedTuple):
    """A thread's archived head: versions up to ``version`` are in an archive."""

    thread_id: str
    version: int
    position: int
    last_hash: str


def _chunks(items: Sequence[Any], size: int = ID_CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def lock_evidence(conn: Connection) -> None:
    """Serialise checkpoints and archive removals until commit (see the backend)."""
    backend_of(conn).lock_evidence(conn)


def lock_thread_steps(conn: Connection, thread_id: str) -> None:
    """Until commit, no other step transaction of ``thread_id`` (the store's
    checkpointer) takes its deferred records, whether or not the thread exists yet (a
    transaction lock on PostgreSQL; SQLite's write transaction already shuts out the
    other writers)."""
    backend_of(conn).lock_thread_steps(conn, thread_id)


def final_max_position(conn: Connection) -> int:
    """The log's last position, read while no write transaction is in flight (see
    :meth:`~symfonic_store.db.backends.base.Backend.writers_shut_out`): no event can commit
    at or below it later.

    Raises:
        WritersBusyError: on PostgreSQL, a write transaction stayed open past the wait.
    """
    with backend_of(conn).writers_shut_out(conn):
        return max_position(conn)


def max_position(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(events.c.position), 0))).scalar_one())


def max_archive_id(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(archives.c.id), 0))).scalar_one())


def events_upto_query(position: int, *, thread_id: str | None = None) -> sa.Select[Any]:
    """Events at or below ``position``, by thread and version (one thread's, if given)."""
    query = sa.select(*EVENT_COLUMNS).where(events.c.position <= position)
    if thread_id is not None:
        query = query.where(events.c.thread_id == thread_id)
    return query.order_by(events.c.thread_id, events.c.version)


def events_between_query(after: int, upto: int) -> sa.Select[Any]:
    """Events in ``(after, upto]``, by thread and version."""
    return (
        sa.select(*EVENT_COLUMNS)
        .where(events.c.position > after, events.c.position <= upto)
        .order_by(events.c.thread_id, events.c.version)
    )


def events_of_threads(
    conn: Connection, thread_ids: Sequence[str], *, batch: int = 1000
) -> Iterator[tuple[StoredEvent, str | None]]:
    """The events of ``thread_ids`` by thread and version, each with its ``tenant`` column
    (a mint's tenant, SPEC §15; None elsewhere), in bounded memory (a server-side cursor
    on PostgreSQL).

    The tenant is selected beside the event's columns, not in :class:`StoredEvent`: it is
    outside the hashed data, and only the archive needs it with the events.
    """
    query = (
        sa.select(*EVENT_COLUMNS, events.c.tenant)
        .where(events.c.thread_id.in_(list(thread_ids)))
        .order_by(events.c.thread_id, events.c.version)
    )
    result = conn.execute(query, execution_options={"yield_per": batch})
    try:
        for row in result:
            *columns, tenant = tuple(row)
            yield to_event(columns), tenant
    finally:
        result.close()


def threads_with_events_between(conn: Connection, after: int, upto: int) -> list[str]:
    query = (
        sa.select(events.c.thread_id)
        .where(events.c.position > after, events.c.position <= upto)
        .distinct()
    )
    return [str(t) for (t,) in conn.execute(query)]


def _latest_archived(where: Sequence[sa.ColumnElement[bool]] = ()) -> sa.Select[Any]:
    """Per thread, its newest archived head among the rows ``where`` selects."""
    a = archived_threads
    newest = (
        sa.select(a.c.thread_id.label("thread_id"), sa.func.max(a.c.version).label("version"))
        .where(*where)
        .group_by(a.c.thread_id)
        .subquery("newest")
    )
    return sa.select(a.c.thread_id, a.c.version, a.c.position, a.c.last_hash).select_from(
        a.join(newest, sa.and_(a.c.thread_id == newest.c.thread_id, a.c.version == newest.c.version))
    )


def latest_archived_heads(conn: Connection) -> list[ArchivedBase]:
    """Every archived thread's newest archived head."""
    return [ArchivedBase(str(t), int(v), int(p), str(h)) for t, v, p, h in conn.execute(_latest_archived())]


def archived_heads_since(conn: Connection, after_archive: int, upto_archive: int) -> list[ArchivedBase]:
    """The newest archived head of each thread archived by archives ``(after, upto]``."""
    a = archived_threads
    query = _latest_archived([a.c.archive_id > after_archive, a.c.archive_id <= upto_archive])
    return [ArchivedBase(str(t), int(v), int(p), str(h)) for t, v, p, h in conn.execute(query)]


def archived_bases_as_of(conn: Connection, archives_upto: int, *, thread_id: str | None) -> dict[str, int]:
    """``thread -> archived version`` as archives ``1..archives_upto`` left them."""
    a = archived_threads
    where = [a.c.archive_id <= archives_upto]
    if thread_id is not None:
        where.append(a.c.thread_id == thread_id)
    return {str(t): int(v) for t, v, _, _ in conn.execute(_latest_archived(where))}


def archived_head_records(
    conn: Connection, *, thread_id: str | None = None, thread_ids: Sequence[str] | None = None
) -> dict[tuple[str, int], tuple[int, str]]:
    """``(thread, archived version) -> (position, last hash)`` of the archive records."""
    a = archived_threads
    columns = (a.c.thread_id, a.c.version, a.c.position, a.c.last_hash)
    queries: list[sa.Select[Any]] = []
    if thread_ids is not None:
        queries = [sa.select(*columns).where(a.c.thread_id.in_(list(c))) for c in _chunks(thread_ids)]
    elif thread_id is not None:
        queries = [sa.select(*columns).where(a.c.thread_id == thread_id)]
    else:
        queries = [sa.select(*columns)]
    out: dict[tuple[str, int], tuple[int, str]] = {}
    for query in queries:
        for t, v, p, h in conn.execute(query):
            out[(str(t), int(v))] = (int(p), str(h))
    return out


def archived_versions(conn: Connection, thread_ids: Sequence[str]) -> dict[str, int]:
    """``thread -> archived_version`` of those projection rows that have one."""
    out: dict[str, int] = {}
    for chunk in _chunks(list(thread_ids)):
        query = sa.select(threads.c.thread_id, threads.c.archived_version).where(
            threads.c.thread_id.in_(list(chunk)), threads.c.archived_version.is_not(None)
        )
        out.update({str(t): int(v) for t, v in conn.execute(query)})
    return out


def thread_run_ids(conn: Connection, thread_ids: Sequence[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for chunk in _chunks(list(thread_ids)):
        query = sa.select(threads.c.thread_id, threads.c.run_id).where(threads.c.thread_id.in_(list(chunk)))
        out.update({str(t): r for t, r in conn.execute(query)})
    return out


def archived_bases_for_live_events(conn: Connection, thread_id: str | None) -> dict[str, tuple[int, str]]:
    """``thread -> (archived version, hash)`` of archived threads with later events: where
    their chain starts again. The projection row names the version; the record its hash."""
    a = archived_threads
    query = (
        sa.select(threads.c.thread_id, a.c.version, a.c.last_hash)
        .select_from(
            threads.join(a, sa.and_(a.c.thread_id == threads.c.thread_id, a.c.version == threads.c.archived_version))
        )
        .where(threads.c.version > threads.c.archived_version)
    )
    if thread_id is not None:
        query = query.where(threads.c.thread_id == thread_id)
    return {str(t): (int(v), str(h)) for t, v, h in conn.execute(query)}


# checkpoint state: the latest checkpoint's leaves and bucket hashes

HeadRow = tuple[str, int, int, str, str, int]
"""``(thread_id, version, position, last_hash, digest, base)`` of a checkpoint head."""
_HEAD_COLUMNS = (
    checkpoint_heads.c.thread_id,
    checkpoint_heads.c.version,
    checkpoint_heads.c.position,
    checkpoint_heads.c.last_hash,
    checkpoint_heads.c.digest,
    checkpoint_heads.c.base,
)


def latest_checkpoint(conn: Connection) -> tuple[int, Any] | None:
    """``(seq, statement)`` of the newest checkpoint recorded (not its heads), or None."""
    row = conn.execute(
        sa.select(checkpoints.c.seq, checkpoints.c.statement).order_by(checkpoints.c.seq.desc()).limit(1)
    ).first()
    return None if row is None else (int(row[0]), row[1])


def stored_checkpoints_newest_first(
    conn: Connection, *, upto_position: int
) -> Generator[tuple[str, Any, Any], None, None]:
    """``(id, statement, heads)`` of the recorded checkpoints at or below a position,
    newest first."""
    query = (
        sa.select(checkpoints.c.id, checkpoints.c.statement, checkpoints.c.heads)
        .where(checkpoints.c.position <= upto_position)
        .order_by(checkpoints.c.seq.desc())
    )
    result = conn.execute(query, execution_options={"yield_per": 100})
    try:
        for doc_id, statement, heads in result:
            yield str(doc_id), statement, heads
    finally:
        result.close()


def checkpoint_buckets_all(conn: Connection) -> dict[int, tuple[str, int]]:
    rows = conn.execute(sa.select(checkpoint_buckets.c.bucket, checkpoint_buckets.c.digest, checkpoint_buckets.c.threads))
    return {int(b): (str(d), int(n)) for b, d, n in rows}


def checkpoint_heads_of(conn: Connection, thread_ids: Sequence[str]) -> list[tuple[HeadRow, str]]:
    """The kept heads of these threads, each with its stored leaf hash."""
    out: list[tuple[HeadRow, str]] = []
    for chunk in _chunks(list(thread_ids)):
        query = sa.select(*_HEAD_COLUMNS, checkpoint_heads.c.leaf_hash).where(
            checkpoint_heads.c.thread_id.in_(list(chunk))
        )
        out.extend(
            ((str(t), int(v), int(p), str(h), str(d), int(b)), str(lh))
            for t, v, p, h, d, b, lh in conn.execute(query)
        )
    return out


def checkpoint_leaf_hashes_in(conn: Connection, buckets: Sequence[int]) -> dict[int, dict[str, str]]:
    """``bucket -> {thread_id: leaf hash}`` of the kept heads in those buckets."""
    out: dict[int, dict[str, str]] = {}
    for chunk in _chunks(list(buckets)):
        query = sa.select(
            checkpoint_heads.c.bucket, checkpoint_heads.c.thread_id, checkpoint_heads.c.leaf_hash
        ).where(checkpoint_heads.c.bucket.in_(list(chunk)))
        for bucket, t, h in conn.execute(query):
            out.setdefault(int(bucket), {})[str(t)] = str(h)
    return out


def _insert_heads(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    for chunk in _chunks(list(rows), ROW_CHUNK):
        conn.execute(checkpoint_heads.insert(), list(chunk))


def _insert_buckets(conn: Connection, buckets: dict[int, tuple[str, int]]) -> None:
    rows = [{"bucket": b, "digest": d, "threads": n} for b, (d, n) in sorted(buckets.items()) if n]
    for chunk in _chunks(rows, ROW_CHUNK):
        conn.execute(checkpoint_buckets.insert(), list(chunk))


def replace_checkpoint_state(
    conn: Connection, heads: Sequence[dict[str, Any]], buckets: dict[int, tuple[str, int]]
) -> None:
    """The kept state becomes exactly ``heads`` (rows of the heads table) and ``buckets``."""
    conn.execute(checkpoint_heads.delete())
    conn.execute(checkpoint_buckets.delete())
    _insert_heads(conn, heads)
    _insert_buckets(conn, buckets)


def update_checkpoint_state(
    conn: Connection, heads: Sequence[dict[str, Any]], buckets: dict[int, tuple[str, int]]
) -> None:
    """Replace the given threads' heads and the given buckets' hashes."""
    ids = [h["thread_id"] for h in heads]
    for chunk in _chunks(ids):
        conn.execute(checkpoint_heads.delete().where(checkpoint_heads.c.thread_id.in_(list(chunk))))
    _insert_heads(conn, heads)
    for chunk in _chunks(sorted(buckets)):
        conn.execute(checkpoint_buckets.delete().where(checkpoint_buckets.c.bucket.in_(list(chunk))))
    _insert_buckets(conn, buckets)


def insert_checkpoint(conn: Connection, row: dict[str, Any]) -> None:
    conn.execute(checkpoints.insert(), row)


# archives


def archivable_threads(
    conn: Connection, *, before: datetime | None, thread_ids: Sequence[str] | None = None
) -> list[tuple[str, int, str]]:
    """``(thread_id, version, last_hash)`` of each whole finished thread: events in the table
    since any earlier archive, every interrupt ended, nothing open, claimed or owed, and
    (with ``before``) no event at or after that time."""
    mint = events.alias("mint_event")
    ending = events.alias("ending_event")
    late = events.alias("late_event")
    unended = (
        sa.exists()
        .where(mint.c.thread_id == threads.c.thread_id, mint.c.type == MINTED)
        .where(
            ~sa.exists().where(
                ending.c.thread_id == mint.c.thread_id,
                ending.c.interrupt_id == mint.c.interrupt_id,
                ending.c.type.in_(ENDINGS),
            )
        )
    )
    query = (
        sa.select(threads.c.thread_id, threads.c.version, threads.c.last_hash)
        .where(threads.c.pending_interrupt_id.is_(None))
        .where(sa.or_(threads.c.archived_version.is_(None), threads.c.version > threads.c.archived_version))
        .where(~sa.exists().where(open_interrupts.c.thread_id == threads.c.thread_id))
        .where(~sa.exists().where(claims.c.thread_id == threads.c.thread_id))
        .where(~sa.exists().where(wakeups.c.thread_id == threads.c.thread_id))
        .where(~unended)
        .order_by(threads.c.thread_id)
    )
    if before is not None:
        query = query.where(
            ~sa.exists().where(late.c.thread_id == threads.c.thread_id, late.c.occurred_at >= before)
        )
    queries = [query] if thread_ids is None else [query.where(threads.c.thread_id.in_(list(c))) for c in _chunks(thread_ids)]
    out: list[tuple[str, int, str]] = []
    for q in queries:
        out.extend((str(t), int(v), str(h)) for t, v, h in conn.execute(q))
    return out


def insert_archive(conn: Connection, row: dict[str, Any]) -> int:
    result = conn.execute(archives.insert(), row)
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


_KEEP_READ_KEYS = archived_read_keys.insert().from_select(
    ["position", "tx_id"],
    sa.select(events.c.position, events.c.tx_id).where(
        events.c.thread_id == sa.bindparam("t"),
        events.c.version <= sa.bindparam("v"),
        events.c.tx_id.is_not(None),
    ),
)


def keep_read_keys(conn: Connection, heads: Sequence[tuple[str, int]]) -> None:
    """Before an archive removes threads' events: keep each one's read key (see
    ``schema.archived_read_keys``), so a cursor at any of them stays exact."""
    for thread_id, version in heads:
        conn.execute(_KEEP_READ_KEYS, {"t": thread_id, "v": version})


def insert_archived_threads(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    for chunk in _chunks(list(rows), ROW_CHUNK):
        conn.execute(archived_threads.insert(), list(chunk))


def mark_archived(conn: Connection, heads: Sequence[tuple[str, int]]) -> None:
    """Each thread's projection head is kept, marked as archived up to its version."""
    stmt = (
        threads.update()
        .where(threads.c.thread_id == sa.bindparam("b_thread_id"))
        .values(archived_version=sa.bindparam("b_version"))
    )
    rows = [{"b_thread_id": t, "b_version": v} for t, v in heads]
    for chunk in _chunks(rows, ROW_CHUNK):
        conn.execute(stmt, list(chunk))


def restore_archived_rows(conn: Connection) -> int:
    """After a rebuild from the events: put back each archived thread's head, and the
    archive marks and run ids of threads whose later events were folded; returns the
    number of archived-only rows put back."""
    newest = _latest_archived().subquery("newest_archived")
    a = archived_threads
    run_of_newest = (
        sa.select(a.c.run_id)
        .where(a.c.thread_id == threads.c.thread_id)
        .order_by(a.c.version.desc())
        .limit(1)
        .scalar_subquery()
    )
    conn.execute(
        threads.update()
        .where(sa.exists().where(a.c.thread_id == threads.c.thread_id))
        .values(
            archived_version=sa.select(sa.func.max(a.c.version))
            .where(a.c.thread_id == threads.c.thread_id)
            .scalar_subquery(),
            run_id=sa.func.coalesce(threads.c.run_id, run_of_newest),
        )
    )
    run_ids = sa.select(a.c.run_id).where(
        a.c.thread_id == newest.c.thread_id, a.c.version == newest.c.version
    ).scalar_subquery()
    rows = sa.select(
        newest.c.thread_id, newest.c.version, newest.c.last_hash, run_ids, newest.c.version
    ).where(~sa.exists().where(threads.c.thread_id == newest.c.thread_id))
    result = conn.execute(
        threads.insert().from_select(
            ["thread_id", "version", "last_hash", "run_id", "archived_version"], rows
        )
    )
    return max(int(result.rowcount or 0), 0)


def unmarked_archive_records(conn: Connection, thread_id: str | None) -> list[tuple[str, int, int | None]]:
    """``(thread_id, newest archived version, the projection's archived_version)`` of each
    archived thread whose projection row is missing or does not mark that version."""
    a = archived_threads
    newest = sa.select(a.c.thread_id.label("thread_id"), sa.func.max(a.c.version).label("version")).group_by(
        a.c.thread_id
    )
    if thread_id is not None:
        newest = newest.where(a.c.thread_id == thread_id)
    n = newest.subquery("newest_archived")
    query = (
        sa.select(n.c.thread_id, n.c.version, threads.c.archived_version)
        .select_from(n.outerjoin(threads, threads.c.thread_id == n.c.thread_id))
        .where(sa.func.coalesce(threads.c.archived_version, -1) != n.c.version)
        .order_by(n.c.thread_id)
    )
    return [(str(t), int(v), None if m is None else int(m)) for t, v, m in conn.execute(query)]
