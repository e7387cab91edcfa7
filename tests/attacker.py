"""An attacker with full rights on the store's database (SPEC §10's threat model).

Everything here is plain SQL on the store's own tables, as the table owner (or a
superuser) could run it: drop or disable the append-only triggers, rewrite events and
recompute their hashes with the store's own :func:`symfonic_store.events.event_hash`
(and the audit columns beside them with :func:`symfonic_store.audit_columns.derive`),
move positions, delete whole threads, and fix up the projection rows so that the
database's own checks (``verify``, the projection heads) pass again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from symfonic_store import InterruptStore, StoredEvent
from symfonic_store.audit_columns import derive as audit_columns
from symfonic_store.db import schema
from symfonic_store.events import GENESIS_HASH, event_hash

# The store's own table definitions: the attacker knows the schema (it is public).
EVENTS = schema.events
THREADS = schema.threads


def disable_triggers(store: InterruptStore) -> None:
    """SQLite: drop both triggers; PostgreSQL: ``ALTER TABLE ... DISABLE TRIGGER ALL``."""
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER IF EXISTS symfonic_events_no_update")
            conn.exec_driver_sql("DROP TRIGGER IF EXISTS symfonic_events_no_delete")
        else:
            conn.exec_driver_sql("ALTER TABLE symfonic_events DISABLE TRIGGER ALL")


def restore_triggers(store: InterruptStore) -> None:
    """Put the append-only triggers back as the store made them (``verify`` then finds
    nothing wrong with them): the attacker covering the tracks of :func:`disable_triggers`."""
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            for statement in schema.SQLITE_APPEND_ONLY_TRIGGERS:
                conn.exec_driver_sql(statement)
        else:
            conn.exec_driver_sql("ALTER TABLE symfonic_events ENABLE TRIGGER ALL")


def alter_audit_columns(store: InterruptStore, position: int, **values: Any) -> None:
    """Change an event's audit columns only (the copies ``audit()`` reads, which the hash
    does not cover), then restore the triggers: the chain, the head and the guards hold."""
    disable_triggers(store)
    with store.engine.begin() as conn:
        conn.execute(sa.update(EVENTS).where(EVENTS.c.position == position).values(**values))
    restore_triggers(store)


def hash_of(event: StoredEvent, prev_hash: str) -> str:
    return event_hash(
        prev_hash,
        thread_id=event.thread_id,
        version=event.version,
        type=event.type,
        interrupt_id=event.interrupt_id,
        run_id=event.run_id,
        actor=event.actor,
        data=event.data,
        occurred_at=event.occurred_at,
    )


def reforge(
    store: InterruptStore,
    thread_id: str,
    change: Callable[[StoredEvent], dict[str, Any] | None],
) -> None:
    """Rewrite a thread's events through ``change`` (new column values, or None to keep the
    event), recompute every hash from the first change on, and fix the projection head:
    afterwards the chain holds and so does the head, as ``verify`` sees them."""
    disable_triggers(store)
    history = store.history(thread_id)
    prev = GENESIS_HASH
    with store.engine.begin() as conn:
        for event in history:
            values = change(event) or {}
            forged = dataclasses.replace(event, **values) if values else event
            new_hash = hash_of(forged, prev)
            if values or new_hash != event.hash:
                # The audit columns too, as the store would write them: verify finds them true.
                copies = audit_columns(forged.type, forged.data, forged.occurred_at)
                conn.execute(
                    sa.update(EVENTS).where(EVENTS.c.position == event.position)
                    .values(**values, **copies, hash=new_hash)
                )
            prev = new_hash
        conn.execute(
            sa.update(THREADS).where(THREADS.c.thread_id == thread_id).values(last_hash=prev)
        )


def delete_tail(store: InterruptStore, thread_id: str, from_version: int) -> None:
    """Delete the thread's events from ``from_version`` on and roll its projection head back
    to what is left, so nothing in the database points at the removed events."""
    disable_triggers(store)
    with store.engine.begin() as conn:
        conn.execute(sa.delete(EVENTS).where(EVENTS.c.thread_id == thread_id, EVENTS.c.version >= from_version))
    store.rebuild_projection(force=True)


def delete_thread(store: InterruptStore, thread_id: str) -> None:
    """Delete every event of a thread, and its projection row."""
    disable_triggers(store)
    with store.engine.begin() as conn:
        conn.execute(sa.delete(EVENTS).where(EVENTS.c.thread_id == thread_id))
        conn.execute(sa.delete(THREADS).where(THREADS.c.thread_id == thread_id))


def insert_event(store: InterruptStore, event: StoredEvent) -> None:
    """Insert an event at a position of the attacker's choosing, its hash computed as the
    store would (the previous event of its thread is the one before its version)."""
    prev = GENESIS_HASH
    for e in store.history(event.thread_id):
        if e.version == event.version - 1:
            prev = e.hash
    sealed = dataclasses.replace(event, hash=hash_of(event, prev))
    copies = audit_columns(event.type, event.data, event.occurred_at)
    with store.engine.begin() as conn:
        conn.execute(sa.insert(EVENTS).values(**dataclasses.asdict(sealed), **copies))
    store.rebuild_projection(force=True)


def swap_positions(store: InterruptStore, first: int, second: int) -> None:
    """Exchange two events' global positions (the hashes do not cover positions)."""
    disable_triggers(store)
    with store.engine.begin() as conn:
        conn.execute(sa.update(EVENTS).where(EVENTS.c.position == first).values(position=-1))
        conn.execute(sa.update(EVENTS).where(EVENTS.c.position == second).values(position=first))
        conn.execute(sa.update(EVENTS).where(EVENTS.c.position == -1).values(position=second))


CHECKPOINT_TABLES = (schema.checkpoints, schema.checkpoint_heads, schema.checkpoint_buckets)


def delete_checkpoint_tables(store: InterruptStore) -> None:
    """Delete every row of the three tables the store keeps its checkpoints in: the
    record of which checkpoint came last, and the heads and buckets the next one builds
    on. A plain ``checkpoint`` then starts a fresh chain on whatever the log holds."""
    with store.engine.begin() as conn:
        for table in CHECKPOINT_TABLES:
            conn.execute(sa.delete(table))


def reforge_answer(
    store: InterruptStore, thread_id: str, *, actor: str, response: Any, decision: str | None = None
) -> None:
    """Re-forge a thread's answer (its ``interrupt.resumed`` event) as ``actor`` giving
    ``response`` (and ``decision``, where the event records one): every hash after it
    recomputed, the audit columns and the projection head fixed up, triggers restored."""

    def change(event: StoredEvent) -> dict[str, Any] | None:
        if event.type != "interrupt.resumed":
            return None
        data = dict(event.data, response=response)
        if "decision" in data:
            data["decision"] = decision
        return {"actor": actor, "data": data}

    reforge(store, thread_id, change)
    restore_triggers(store)
