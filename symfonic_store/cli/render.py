"""Rendering for people and programs: rich tables, JSON and CSV on stdout."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..events import StoredEvent
    from ..services.audit import AuditRecord


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output is read by grep: a row stays on one line and no id is cut short.
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 100_000
    return Console(
        file=stream, width=width, highlight=False, emoji=False, markup=False, soft_wrap=False
    )


def emit(text: str) -> None:
    """Write machine-readable output as UTF-8, whatever the locale."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
    else:
        buffer.write(text.encode("utf-8"))
        buffer.flush()


def emit_json(value: Any, *, indent: int | None = 2) -> None:
    emit(json.dumps(value, ensure_ascii=False, indent=indent, default=str) + "\n")


def when(value: datetime | float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def age(minted_at: Any) -> str:
    if not isinstance(minted_at, int | float) or isinstance(minted_at, bool):
        return "-"
    seconds = max(0, int(time.time() - minted_at))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, wide: Sequence[str] = ()
) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for name in columns:
        if name in wide:
            table.add_column(name, overflow="fold")
        else:
            table.add_column(name, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell(v)) for v in row))
    console().print(table)


def say(text: str) -> None:
    console().print(text)


def audit_table(records: Sequence[AuditRecord]) -> None:
    if not records:
        say("no interrupts match")
        return
    rows = [
        (r.minted_at, r.thread_id, r.interrupt_id, r.name, r.outcome, r.reason, r.actor,
         r.response, r.resolved_at, len(r.attempts), r.payload)
        for r in records
    ]
    table(
        f"audit: {len(records)} interrupt(s)",
        ("minted", "thread", "interrupt", "name", "outcome", "reason", "actor", "response",
         "resolved", "attempts", "payload"),
        rows,
        wide=("response", "payload"),
    )


def replay_table(thread: str, steps: Sequence[tuple[StoredEvent, dict[str, Any]]]) -> None:
    rows = []
    for event, state in steps:
        marker = state.get("_interrupt_pending") or {}
        rows.append(
            (event.position, event.version, event.occurred_at, event.type, event.interrupt_id,
             event.actor, event.data, marker.get("interrupt_id"), state.get("run_id"))
        )
    table(
        f"replay of thread {thread!r}: {len(steps)} event(s)",
        ("position", "version", "occurred", "type", "interrupt", "actor", "data",
         "pending after", "run_id after"),
        rows,
        wide=("data",),
    )


def number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
