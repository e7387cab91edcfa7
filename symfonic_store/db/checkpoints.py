"""The SQL LangGraph's savers lack, on their own tables (:mod:`.checkpoint_tables`).

``store.checkpointer()`` keeps a graph's checkpoints in the tables of LangGraph's own
savers (``langgraph-checkpoint-sqlite`` and ``langgraph-checkpoint-postgres``), created
by those savers' ``setup()`` and written by their SQL. The tables are declared (in
:mod:`.checkpoint_tables`, the layout each backend chooses) only for what those savers
do not implement -- ``copy_thread``, ``delete_for_runs``,
and on SQLite ``prune`` -- and for tests/langgraph/test_checkpointer_tables.py, which reflects the
tables a saver created and compares them with these declarations, column by column: a
LangGraph release that changes the layout fails there, before these statements could
touch a table they no longer understand.

None of the tables belongs to the store's schema (``db/schema.py``): Alembic neither
creates nor compares them, and no statement here touches the event table. Deleting
checkpoints never deletes an event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..compat import clause_adapter
from .backends import backend_of
from .backends.postgres import (
    CHECKPOINT_SETUP_LOCK_KEY as SETUP_LOCK_KEY,
)
from .backends.postgres import checkpoint_setup_lock as setup_lock
from .backends.postgres import checkpoint_setup_unlock as setup_unlock
from .checkpoint_tables import (
    POSTGRES,
    POSTGRES_MIGRATIONS,
    SQLITE,
    Layout,
    postgres_blobs,
    postgres_checkpoints,
    postgres_metadata,
    postgres_migrations,
    postgres_writes,
    sqlite_checkpoints,
    sqlite_metadata,
    sqlite_writes,
)


def layout_for(conn: Connection) -> Layout:
    """The layout of the saver that LangGraph ships for ``conn``'s backend."""
    return backend_of(conn).checkpoint_layout


PRUNE_STRATEGIES = ("keep_latest", "delete")


# --- copy_thread ---------------------------------------------------------------------


def copy_thread(conn: Connection, layout: Layout, source: str, target: str) -> None:
    """Copy every checkpoint, write and blob of ``source`` to ``target``, all namespaces.

    The whole parent chain is copied (what a ``DeltaChannel`` rebuilds its value from);
    rows the target already has under the same keys are kept as they are.
    """
    for table in layout.tables:
        names = [c.name for c in table.columns]
        values = [
            sa.literal(target, sa.Text).label("thread_id") if c.name == "thread_id" else c
            for c in table.columns
        ]
        select = sa.select(*values).where(table.c.thread_id == source)
        conn.execute(layout.insert(table).from_select(names, select).on_conflict_do_nothing())


# --- delete_for_runs -----------------------------------------------------------------


def _doomed_writes(layout: Layout, doomed: sa.ColumnElement[bool]) -> sa.Delete:
    """Delete the writes of the checkpoints that ``doomed`` selects."""
    c, w = layout.checkpoints, layout.writes
    # Alike the parent query below in shape only (other tables and keys), deliberately spelled out.
    of_doomed = (
        sa.select(sa.literal(1))
        .where(
            c.c.thread_id == w.c.thread_id,
            c.c.checkpoint_ns == w.c.checkpoint_ns,
            c.c.checkpoint_id == w.c.checkpoint_id,
            doomed,
        )
        .exists()
    )
    return sa.delete(w).where(of_doomed)


def _orphan(layout: Layout, doomed: sa.ColumnElement[bool]) -> sa.Update:
    """Clear the parent of each checkpoint whose parent ``doomed`` selects."""
    c = layout.checkpoints
    parent = c.alias("parent")
    # Alike the writes query above in shape only (other tables and keys), deliberately spelled out.
    of_doomed = (
        sa.select(sa.literal(1))
        .where(
            parent.c.thread_id == c.c.thread_id,
            parent.c.checkpoint_ns == c.c.checkpoint_ns,
            parent.c.checkpoint_id == c.c.parent_checkpoint_id,
            clause_adapter(parent).traverse(doomed),  # the same test, on the parent row
        )
        .exists()
    )
    return sa.update(c).where(of_doomed).values(parent_checkpoint_id=None)


def _versions(conn: Connection, layout: Layout, doomed: sa.ColumnElement[bool]) -> set[tuple[str, str, str, str]]:
    """``(thread, namespace, channel, version)`` of the blobs ``doomed`` checkpoints use."""
    c = layout.checkpoints
    rows = conn.execute(
        sa.select(c.c.thread_id, c.c.checkpoint_ns, c.c.checkpoint["channel_versions"]).where(doomed)
    ).all()
    used = set()
    for thread_id, ns, versions in rows:
        for channel, version in (versions or {}).items():
            used.add((thread_id, ns, channel, str(version)))
    return used


def _collect_blobs(conn: Connection, layout: Layout, freed: set[tuple[str, str, str, str]]) -> None:
    """Delete the blobs only deleted checkpoints used (what a kept one uses stays)."""
    if not freed or layout.blobs is None:
        return
    c, b = layout.checkpoints, layout.blobs
    for thread_id, ns in sorted({(t, n) for t, n, _, _ in freed}):
        kept: set[tuple[str, str]] = set()
        for (versions,) in conn.execute(
            sa.select(c.c.checkpoint["channel_versions"]).where(
                c.c.thread_id == thread_id, c.c.checkpoint_ns == ns
            )
        ):
            kept.update((ch, str(v)) for ch, v in (versions or {}).items())
        garbage: dict[str, list[str]] = {}
        for t, n, channel, version in freed:
            if (t, n) == (thread_id, ns) and (channel, version) not in kept:
                garbage.setdefault(channel, []).append(version)
        for channel, versions in garbage.items():
            conn.execute(
                sa.delete(b).where(
                    b.c.thread_id == thread_id,
                    b.c.checkpoint_ns == ns,
                    b.c.channel == channel,
                    b.c.version.in_(versions),
                )
            )


def delete_for_runs(conn: Connection, layout: Layout, run_ids: Sequence[str]) -> None:
    """Delete every checkpoint whose metadata names one of ``run_ids``, with its writes.

    A kept checkpoint whose parent is deleted is left without a parent (as PostgreSQL's
    ``prune`` leaves one); blobs only the deleted checkpoints used go with them.
    """
    if not run_ids:
        return
    doomed = layout.run_id().in_(list(run_ids))
    freed = _versions(conn, layout, doomed) if layout.blobs is not None else set()
    conn.execute(_doomed_writes(layout, doomed))
    conn.execute(_orphan(layout, doomed))
    conn.execute(sa.delete(layout.checkpoints).where(doomed))
    _collect_blobs(conn, layout, freed)


# --- prune (SQLite: PostgresSaver has its own) ---------------------------------------

_DELTA_KEYS = ("counters_since_delta_snapshot", "delta_writes_versioned")


def delta_threads(conn: Connection, layout: Layout, thread_ids: Sequence[str]) -> list[str]:
    """The threads among ``thread_ids`` that use a ``DeltaChannel``.

    A ``DeltaChannel`` keeps only what changed since its last snapshot and rebuilds
    its value from older checkpoints, so keeping only the latest one would lose it.
    LangGraph marks such a checkpoint's metadata with the counters since the last
    snapshot, and drops the key only on a step that snapshotted every delta channel:
    a thread with no marked checkpoint at all has every value whole in its latest one.
    """
    c = layout.checkpoints
    text = sa.cast(c.c.metadata, sa.Text)
    marked = sa.or_(*(sa.func.json_type(text, f"$.{key}").is_not(None) for key in _DELTA_KEYS))
    rows = conn.execute(
        sa.select(c.c.thread_id).distinct().where(c.c.thread_id.in_(list(thread_ids)), marked)
    )
    return sorted(r[0] for r in rows)


def refuse_delta(conn: Connection, layout: Layout, thread_ids: Sequence[str]) -> None:
    """Raise ``NotImplementedError`` (as ``PostgresSaver.prune`` does) if a thread uses one."""
    delta = delta_threads(conn, layout, thread_ids)
    if delta:
        raise NotImplementedError(
            f"keep_latest can't prune threads that use a DeltaChannel: {', '.join(delta)}"
        )


def prune_delete(conn: Connection, layout: Layout, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint and write of the threads."""
    for table in layout.tables:
        conn.execute(sa.delete(table).where(table.c.thread_id.in_(list(thread_ids))))


def prune_keep_latest(conn: Connection, layout: Layout, thread_id: str) -> None:
    """Keep the latest checkpoint of each namespace of the thread, with its writes.

    As ``PostgresSaver.prune`` does: the kept checkpoint loses its (deleted) parent; a
    subgraph call's namespace (a task id after ``:``) goes with the saved root
    checkpoint its call started from when that one is not kept.
    """
    c, w = layout.checkpoints, layout.writes
    latest = (
        sa.select(c.c.checkpoint_ns, sa.func.max(c.c.checkpoint_id).label("head"))
        .where(c.c.thread_id == thread_id)
        .group_by(c.c.checkpoint_ns)
        .subquery()
    )
    heads = conn.execute(
        sa.select(latest.c.checkpoint_ns, latest.c.head, c.c.metadata).join(
            c,
            sa.and_(
                c.c.thread_id == thread_id,
                c.c.checkpoint_ns == latest.c.checkpoint_ns,
                c.c.checkpoint_id == latest.c.head,
            ),
        )
    ).all()
    kept = {ns: head for ns, head, _ in heads}
    saved = set(
        conn.execute(
            sa.select(c.c.checkpoint_id).where(c.c.thread_id == thread_id, c.c.checkpoint_ns == "")
        ).scalars()
    )
    calls = set()
    for ns, _, metadata in heads:
        root = (json.loads(metadata) if metadata else {}).get("parents", {}).get("")
        if ":" in ns and root in saved and root != kept.get(""):
            calls.add(ns)
    for table in (c, w):
        if calls:
            conn.execute(
                sa.delete(table).where(table.c.thread_id == thread_id, table.c.checkpoint_ns.in_(calls))
            )
    for ns, head in kept.items():
        if ns in calls:
            continue
        here = (w.c.thread_id == thread_id, w.c.checkpoint_ns == ns, w.c.checkpoint_id != head)
        conn.execute(sa.delete(w).where(*here))
        conn.execute(
            sa.delete(c).where(
                c.c.thread_id == thread_id, c.c.checkpoint_ns == ns, c.c.checkpoint_id != head
            )
        )
        conn.execute(
            sa.update(c)
            .where(c.c.thread_id == thread_id, c.c.checkpoint_ns == ns, c.c.checkpoint_id == head)
            .values(parent_checkpoint_id=None)
        )


__all__ = [
    "POSTGRES",
    "SETUP_LOCK_KEY",
    "postgres_blobs",
    "postgres_checkpoints",
    "postgres_metadata",
    "postgres_migrations",
    "postgres_writes",
    "sqlite_checkpoints",
    "sqlite_metadata",
    "sqlite_writes",
    "POSTGRES_MIGRATIONS",
    "PRUNE_STRATEGIES",
    "SQLITE",
    "Layout",
    "copy_thread",
    "delete_for_runs",
    "delta_threads",
    "layout_for",
    "prune_delete",
    "prune_keep_latest",
    "refuse_delta",
    "setup_lock",
    "setup_unlock",
]
