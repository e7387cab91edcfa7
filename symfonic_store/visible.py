"""What a reviewer sees is what they approve: invisible characters and look-alikes made visible.

A payload ``"\\u202e024$"`` reads as ``$420`` in a browser (a bidirectional override); a
zero-width joiner shows as nothing; ``"аlice"`` with a Cyrillic ``а`` reads as ``alice``.
This module turns text into :class:`Piece` s a person can trust, with no I/O:

- every character of Unicode category Cf (format: bidirectional controls, zero-width
  characters, tags), Cc (controls), Zl and Zp (line and paragraph separators) -- except
  tab and newline -- and every lone surrogate is an :class:`Escape`, shown as
  ``⟨U+202E⟩``; so is a literal ``⟨``, so that an escape cannot be forged by the text;
- each word that mixes scripts (the mixed-script detection of Unicode TR 39 §5.1: the
  intersection of its characters' augmented Script_Extensions is empty, Common and
  Inherited characters counting for every script) is a :class:`Mixed`, shown as
  ``⚠⟨Cyrillic+Latin⟩аlice``.

:func:`reveal` renders the pieces as plain text (the CLI's tables);
``symfonic_store.server.inbox.visible_html`` renders the same pieces as HTML. The stored
text, and every digest over it, is never changed: only what is shown.

The Script and Script_Extensions properties come from ``fontTools.unicodedata`` (Python's
``unicodedata`` has no Script property); categories from Python's ``unicodedata``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from fontTools import unicodedata as scripts

__all__ = ["Escape", "Mixed", "Piece", "escape_text", "mixed_scripts", "pieces", "reveal"]

INVISIBLE = frozenset({"Cf", "Cc", "Zl", "Zp", "Cs"})
"""The categories shown as escapes (Cs: a lone surrogate, which no page or terminal can show)."""
KEPT = frozenset({"\t", "\n"})
"""Controls that lay text out and are shown as they are."""
OPEN, CLOSE = "⟨", "⟩"
"""The brackets of every annotation; a literal ``⟨`` in the text is itself escaped."""
MIXED_SIGN = "⚠"

_ANY = frozenset({"Zyyy", "Zinh"})
"""Common and Inherited: a character of these (alone) belongs with every script."""
_AUGMENTED = {
    # TR 39 §5.1: a Han character also belongs to the writing systems that use Han
    # with another script (Han with Bopomofo, Japanese, Korean).
    "Hani": ("Hanb", "Jpan", "Kore"),
    "Hira": ("Jpan",),
    "Kana": ("Jpan",),
    "Hang": ("Kore",),
    "Bopo": ("Hanb",),
}


@dataclass(frozen=True)
class Escape:
    """One character shown as its code point, e.g. ``⟨U+202E⟩``."""

    char: str

    @property
    def code(self) -> str:
        return f"U+{ord(self.char):04X}"

    @property
    def name(self) -> str:
        """The character's Unicode name, or its category when it has none (controls)."""
        return unicodedata.name(self.char, "") or f"a {unicodedata.category(self.char)} character"

    @property
    def text(self) -> str:
        return f"{OPEN}{self.code}{CLOSE}"


@dataclass(frozen=True)
class Mixed:
    """A word whose letters come from scripts that no single script contains."""

    scripts: tuple[str, ...]
    """The scripts' names, in the order the word first uses them."""
    parts: tuple[str | Escape, ...]

    @property
    def label(self) -> str:
        return f"{MIXED_SIGN}{OPEN}{'+'.join(self.scripts)}{CLOSE}"


Piece = str | Escape | Mixed
"""Text shown as it is, an escaped character, or a word marked as mixing scripts."""


@lru_cache(maxsize=4096)
def _hidden(char: str) -> bool:
    return char == OPEN or (char not in KEPT and unicodedata.category(char) in INVISIBLE)


@lru_cache(maxsize=4096)
def _in_word(char: str) -> bool:
    """Letters, marks, digits, connectors and format characters make words.

    Format characters (zero-width joiners) are part of the word they sit in, so one
    cannot split a look-alike word in two to escape the mixed-script mark.
    """
    category = unicodedata.category(char)
    return category[0] in "LMN" or category in ("Pc", "Cf")


@lru_cache(maxsize=4096)
def _script_set(char: str) -> frozenset[str] | None:
    """The augmented Script_Extensions of ``char``; None for Common/Inherited (any script)."""
    extensions = scripts.script_extension(char)
    if extensions <= _ANY:
        return None
    augmented = set(extensions)
    for script in extensions:
        augmented.update(_AUGMENTED.get(script, ()))
    return frozenset(augmented)


def mixed_scripts(word: str) -> tuple[str, ...]:
    """The scripts ``word`` mixes, by name in order of first use; ``()`` when it mixes none.

    A word is mixed when the intersection of its characters' augmented script sets is
    empty (TR 39's resolved script set); digits, punctuation and combining marks of
    Common or Inherited script never make a word mixed.
    """
    resolved: frozenset[str] | None = None
    for char in word:
        found = _script_set(char)
        if found is not None:
            resolved = found if resolved is None else resolved & found
    if resolved is None or resolved:
        return ()
    names: list[str] = []
    for char in word:
        if _script_set(char) is None:
            continue
        code = scripts.script(char)
        if code in _ANY:  # an inherited mark used by several scripts: name its first one
            code = sorted(scripts.script_extension(char))[0]
        name = scripts.script_name(code, code)
        if name not in names:
            names.append(name)
    return tuple(names)


def _escaped(text: str) -> list[str | Escape]:
    if text.isprintable() and OPEN not in text:  # no Cc, Cf, Cs, Zl, Zp in it
        return [text] if text else []
    out: list[str | Escape] = []
    start = 0
    for i, char in enumerate(text):
        if _hidden(char):
            if start < i:
                out.append(text[start:i])
            out.append(Escape(char))
            start = i + 1
    if start < len(text):
        out.append(text[start:])
    return out


def escape_text(text: str) -> str:
    """``text`` with its invisible characters (and ``⟨``) as escapes; no mixed-script marks."""
    return "".join(p if isinstance(p, str) else p.text for p in _escaped(text))


_SUSPECT = re.compile(r"[^\t\n\x20-\x7e]+")
"""Where to look closer: anything but printable ASCII, tab and newline."""
_ASCII_BREAK = re.compile(r"[^\x80-\U0010ffffA-Za-z0-9_]")
"""An ASCII character that ends a word (the ASCII word characters: letters, digits, ``_``)."""
_NEAR = 64
"""Places to look closer this close together are looked at as one region."""


def _word_end(text: str, start: int) -> int:
    stop = _ASCII_BREAK.search(text, start)
    return len(text) if stop is None else stop.start()


def pieces(text: str) -> list[Piece]:
    """``text`` as pieces to show: plain runs, escapes and mixed-script words, in order.

    A word of printable ASCII hides nothing and mixes no scripts, so only the words
    around other characters are looked at one character at a time.
    """
    out: list[Piece] = []
    done = 0
    found = _SUSPECT.search(text)
    while found is not None:
        left = found.start()
        while left > done and _in_word(text[left - 1]):
            left -= 1
        right = _word_end(text, found.end())
        found = _SUSPECT.search(text, right)
        while found is not None and found.start() - right < _NEAR:
            right = _word_end(text, found.end())
            found = _SUSPECT.search(text, right)
        if done < left:
            out.append(text[done:left])
        out.extend(_scan(text[left:right]))
        done = right
    if done < len(text):
        out.append(text[done:])
    merged: list[Piece] = []
    run: list[str] = []
    for piece in out:
        if isinstance(piece, str):
            run.append(piece)
            continue
        if run:
            merged.append("".join(run))
            run = []
        merged.append(piece)
    if run:
        merged.append("".join(run))
    return merged


def _scan(text: str) -> list[Piece]:
    """The pieces of ``text``, looked at one character at a time."""
    out: list[Piece] = []
    start = 0
    n = len(text)
    i = 0
    while i < n:
        if not _in_word(text[i]):
            i += 1
            continue
        end = i
        while end < n and _in_word(text[end]):
            end += 1
        found = mixed_scripts(text[i:end])
        if found:
            out.extend(_escaped(text[start:i]))
            out.append(Mixed(found, tuple(_escaped(text[i:end]))))
            start = end
        i = end
    out.extend(_escaped(text[start:]))
    return out


def reveal(text: str) -> str:
    """``text`` as a person should see it in plain text: escapes and mixed-script marks.

    ASCII text without controls is returned unchanged; so is any text with nothing to
    reveal.
    """
    if text.isascii() and text.isprintable():
        return text
    out: list[str] = []
    for piece in pieces(text):
        if isinstance(piece, str):
            out.append(piece)
        elif isinstance(piece, Escape):
            out.append(piece.text)
        else:
            out.append(piece.label)
            out.extend(p if isinstance(p, str) else p.text for p in piece.parts)
    return "".join(out)
