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


PIPED_WIDTH = 100_000
"""Piped output is read by grep: a row stays on one line, however wide."""


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else PIPED_WIDTH
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


LONG_VALUE = 120
"""At most this many characters of a long value (payload, response, data) in a table row."""


def cell_limit(width: int, *, records: bool = False) -> int:
    """How many characters of a long value a table shows.

    Piped, and beside other columns, :data:`LONG_VALUE` (a terminal column then shows
    at most three lines of it); in the record layout two lines of the terminal.
    ``--format json``/``csv`` always carry the whole value.
    """
    if records and width < PIPED_WIDTH:
        return max(24, 2 * (width - 14))
    return LONG_VALUE


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at most, ending with how many were left out."""
    if len(text) <= limit:
        return text
    keep = max(8, limit - len(f"…(+{len(text)} chars)"))
    return f"{text[:keep]}…(+{len(text) - keep} chars)"


_GAP = 3
"""Between two columns: a space of padding, the (blank) divider, a space of padding."""
_WIDE_FLOOR = 20
"""The narrowest a column of long values gets before the table turns into records."""
_WIDE_LINES = 3
"""A long value beside other columns shows at most this many lines of its column."""


def _widths(
    columns: Sequence[str], rows: Sequence[Sequence[str]], wide: Sequence[str], room: int
) -> list[int] | None:
    """Each column's width, or None when the table cannot fit ``room`` without cutting.

    A column starts at its floor -- its longest word, so an id (no spaces) is never
    folded and a time wraps at its space; a long-value column at a few characters; a
    short column at its full width -- and the room left is shared in proportion to how
    much wider each would like to be.
    """
    from rich.cells import cell_len

    natural, floor = [], []
    for i, name in enumerate(columns):
        texts = [name, *(row[i] for row in rows)]
        full = max(cell_len(line) for text in texts for line in text.splitlines() or [""])
        words = max((cell_len(w) for text in texts for w in text.split()), default=1)
        natural.append(full)
        if name in wide:
            floor.append(min(full, max(_WIDE_FLOOR, cell_len(name))))
        else:  # a short value (an age, an outcome) is not worth wrapping
            floor.append(full if full <= 8 else max(words, 1))
    room -= _GAP * (len(columns) - 1)
    if sum(floor) > room:
        return None
    want = [n - f for n, f in zip(natural, floor, strict=True)]
    spare, total = room - sum(floor), sum(want)
    if total <= spare:
        return natural
    return [f + w * spare // total for f, w in zip(floor, want, strict=True)]


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    wide: Sequence[str] = (),
    optional: Sequence[str] = (),
) -> None:
    """``rows`` as a table, or as records when the terminal is too narrow for one.

    The ``optional`` columns are left out, in the order given, when the table would not
    fit the terminal with them (``--format json``/``csv`` always have them); only when it
    still does not fit does each row become a block of lines.

    Values in the ``wide`` columns (payloads, responses, event data) are cut to a
    readable length with a marker saying how much was left out; nothing else is cut,
    and no line is wider than the terminal. Piped output keeps each row on one line.
    Every value is shown revealed (:func:`symfonic_store.visible.reveal`): invisible
    characters as escapes, words that mix scripts marked. ``--format json``/``csv``
    print the stored text itself.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ..visible import reveal

    out = console()
    say(reveal(title))
    full = [[reveal(cell(v)) for v in row] for row in rows]
    if out.width >= PIPED_WIDTH:  # a cell's stacked lines side by side: a row is one line
        full = [[" ".join(text.splitlines()) for text in row] for row in full]
    is_wide = [name in wide for name in columns]

    def cut(limits: Sequence[int]) -> list[list[str]]:
        return [
            [shorten(text, limit) if w else text for text, w, limit in zip(row, is_wide, limits, strict=True)]
            for row in full
        ]

    limit = cell_limit(out.width)
    cells = cut([limit] * len(columns))
    if out.width >= PIPED_WIDTH:
        widths: list[int] | None = None
    else:
        widths = _widths(columns, cells, wide, out.width)
        dropped = list(optional)
        while widths is None and dropped:
            gone = columns.index(dropped.pop(0))
            columns = [c for i, c in enumerate(columns) if i != gone]
            full = [[t for i, t in enumerate(row) if i != gone] for row in full]
            is_wide = [name in wide for name in columns]
            cells = cut([limit] * len(columns))
            widths = _widths(columns, cells, wide, out.width)
        if widths is None:
            _records(out, columns, cut([cell_limit(out.width, records=True)] * len(columns)))
            return
        cells = cut([min(limit, _WIDE_LINES * w) for w in widths])
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, name in enumerate(columns):
        grid.add_column(name, overflow="fold", width=None if widths is None else widths[i])
    for row in cells:
        grid.add_row(*(Text(text) for text in row))
    out.print(grid)


def _records(out: Console, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Too narrow for the columns side by side: a block of `name  value` lines per row."""
    from rich.table import Table
    from rich.text import Text

    for row in rows:
        record = Table.grid(padding=(0, 2))
        record.add_column(no_wrap=True)
        record.add_column(overflow="fold")
        for name, text in zip(columns, row, strict=True):
            record.add_row(name, Text(text))
        out.print("")
        out.print(record)


def say(text: str) -> None:
    console().print(text)


def audit_table(records: Sequence[AuditRecord]) -> None:
    """One row per record, the decision beside the outcome; fits a 120-column terminal.

    ``interrupt`` is the name with the thread and the interrupt's id under it (and the
    tool call of a batched request); ``outcome`` adds the reason and the refused answers;
    ``actor`` who answered, who asked (``asked by``) and when it was answered. The
    payload is left out when the terminal is too narrow for it (``--format json``).
    """
    if not records:
        say("no interrupts match")
        return
    rows = []
    for r in records:
        what = [r.name or "(unnamed)", r.thread_id, r.interrupt_id]
        if r.action_index is not None:
            what.append(f"call {r.action_index + 1}")
        outcome = [r.outcome, *([f"({r.reason})"] if r.reason else [])]
        if r.attempts:
            outcome.append(f"{len(r.attempts)} refused")
        who = [r.actor or "-", *([f"asked by {r.requested_by}"] if r.requested_by else [])]
        if r.resolved_at is not None:
            who.append(f"at {when(r.resolved_at)}")
        rows.append(
            (r.minted_at, "\n".join(what), "\n".join(outcome), r.decision, "\n".join(who), r.response,
             r.payload)
        )
    table(
        f"audit: {len(records)} interrupt(s)",
        ("minted", "interrupt", "outcome", "decision", "actor", "response", "payload"),
        rows,
        wide=("response", "payload"),
        optional=("payload",),
    )


def replay_table(thread: str, steps: Sequence[tuple[StoredEvent, dict[str, Any]]]) -> None:
    """A thread's events, one row each: the table fits a 120-column terminal, ids whole.

    ``event`` is the type with the interrupt's id under it; ``after`` the state after the
    event: the interrupt still pending (``pending`` alone when it is the row's own) and
    the run, one per line (``-``: neither). ``--format json`` has the whole state.
    """
    rows = []
    for event, state in steps:
        marker = state.get("_interrupt_pending") or {}
        pending, run = marker.get("interrupt_id"), state.get("run_id")
        after = [] if pending is None else ["pending" if pending == event.interrupt_id else f"pending {pending}"]
        after += [] if run is None else [f"run {run}"]
        what = event.type if event.interrupt_id is None else f"{event.type}\n{event.interrupt_id}"
        rows.append(
            (event.position, event.version, event.occurred_at, what, event.actor, event.data,
             "\n".join(after) or None)
        )
    table(
        f"replay of thread {thread!r}: {len(steps)} event(s)",
        ("pos", "ver", "occurred", "event", "actor", "data", "after"),
        rows,
        wide=("data",),
    )


def number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
