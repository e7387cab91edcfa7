"""The inbox's ``visible`` filter: text as HTML in which nothing is hidden (SPEC §12).

The pieces of :mod:`symfonic_store.visible` as escaped HTML: an invisible character is
the visible text ``⟨U+202E⟩`` in a ``<span class="esc">`` whose title names it; a word
that mixes scripts is a ``<span class="mixed">`` that starts with the visible mark
``⚠⟨Cyrillic+Latin⟩``. The page's text is therefore exactly the CLI's plain reveal, and
every other character is escaped by :func:`markupsafe.escape`.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from ...visible import Escape, Mixed, pieces, reveal


def _escape_html(piece: Escape) -> str:
    return (
        f'<span class="esc" title="{escape(piece.code)} {escape(piece.name)}: '
        f'an invisible character, shown as its code">{escape(piece.text)}</span>'
    )


def _part_html(part: str | Escape) -> str:
    return str(escape(part)) if isinstance(part, str) else _escape_html(part)


def visible(value: Any) -> Markup:
    """``value`` as text for a page, its invisible characters and mixed-script words visible."""
    out: list[str] = []
    for piece in pieces("" if value is None else str(value)):
        if isinstance(piece, Mixed):
            names = ", ".join(piece.scripts)
            out.append(
                f'<span class="mixed" title="This word mixes scripts ({escape(names)}): '
                f'a letter may be a look-alike from another alphabet">'
                f'<span class="mark">{escape(piece.label)}</span>'
                + "".join(_part_html(p) for p in piece.parts)
                + "</span>"
            )
        else:
            out.append(_part_html(piece))
    return Markup("".join(out))  # every piece above is escaped


def revealed(value: Any) -> str:
    """``value`` as plain text (a page's title), revealed like the CLI's tables."""
    return reveal("" if value is None else str(value))
