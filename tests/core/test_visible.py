"""What a reviewer sees: invisible characters escaped, words that mix scripts marked (SPEC §12).

The pure module ``symfonic_store.visible``: examples of what it shows, and properties --
the reveal is total (any string, lone surrogates included, gives text with nothing
invisible left in it, encodable as UTF-8), faithful (the original is read back from it),
and leaves plain ASCII and single-script text unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata

import pytest
from cli_helpers import run_cli
from hypothesis import given
from hypothesis import strategies as st

from symfonic_store import InterruptStore, build_interrupt_marker
from symfonic_store.visible import Escape, Mixed, escape_text, mixed_scripts, pieces, reveal

BIDI = "\u202e024$"
JOINED = "a\u200dlice"
LOOKALIKE = "\u0430lice"  # a Cyrillic а, then Latin
ANNOTATION = re.compile(r"⚠⟨(?!U\+)[^⟩]*⟩|⟨U\+([0-9A-F]{4,6})⟩")


def read_back(shown: str) -> str:
    """The original text from what :func:`reveal` shows: escapes decoded, marks dropped."""
    return ANNOTATION.sub(lambda m: chr(int(m[1], 16)) if m[1] else "", shown)


def hidden(char: str) -> bool:
    return char not in "\t\n" and unicodedata.category(char) in ("Cf", "Cc", "Zl", "Zp", "Cs")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (BIDI, "⟨U+202E⟩024$"),
        (JOINED, "a⟨U+200D⟩lice"),
        (LOOKALIKE, "⚠⟨Cyrillic+Latin⟩\u0430lice"),
        ("\u0430\u200dlice", "⚠⟨Cyrillic+Latin⟩\u0430⟨U+200D⟩lice"),
        ("paypal.c\u043em", "paypal.⚠⟨Latin+Cyrillic⟩c\u043em"),
        ("ΑΒΓabc", "⚠⟨Greek+Latin⟩ΑΒΓabc"),
        ("a\u0661", "⚠⟨Latin+Arabic⟩a\u0661"),
        ("line\u2028next\u2029para", "line⟨U+2028⟩next⟨U+2029⟩para"),
        ("\x1b[31mred\r", "⟨U+001B⟩[31mred⟨U+000D⟩"),
        ("tag\U000e0041", "tag⟨U+E0041⟩"),
        ("\ufeffbom", "⟨U+FEFF⟩bom"),
        ("keeps\ttab\nand newline", "keeps\ttab\nand newline"),
        ("a forged ⟨U+202E⟩", "a forged ⟨U+27E8⟩U+202E⟩"),
    ],
)
def test_invisible_characters_are_escaped_and_mixed_words_marked(text: str, shown: str) -> None:
    """Each invisible or format character shows as its code point; a word mixing scripts carries the scripts' names."""
    assert reveal(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "alice", "Jean-Пьер", "Пётр Иванов", "naïve café", "東京タワー", "ひらがなと漢字", "한국어漢字",
        "注音ㄅㄆ漢", "order_42", "v2.0-rc1", "١٢٣ عربي", "ελληνικά 2026", "x\u0301y",
    ],
)
def test_one_script_per_word_is_not_marked(text: str) -> None:
    """Common and Inherited characters (digits, punctuation, combining marks) mix nothing; Japanese and Korean writing may mix Han."""
    assert reveal(text) == text


def test_pieces_say_what_each_part_is() -> None:
    """The HTML rendering reads the same pieces: plain runs, escapes with names, mixed words with their parts."""
    assert pieces(f"to {LOOKALIKE}: {BIDI}") == [
        "to ",
        Mixed(("Cyrillic", "Latin"), ("\u0430lice",)),
        ": ",
        Escape("\u202e"),
        "024$",
    ]
    assert Escape("\u202e").name == "RIGHT-TO-LEFT OVERRIDE"
    assert Escape("\x1b").name == "a Cc character"
    assert escape_text(LOOKALIKE) == LOOKALIKE


@given(st.text(st.characters(exclude_categories=())))
def test_the_reveal_is_total_and_faithful(text: str) -> None:
    """Any string gives text with nothing invisible in it, encodable as UTF-8, from which the original reads back."""
    shown = reveal(text)
    assert not [c for c in shown if hidden(c)]
    shown.encode("utf-8")
    assert read_back(shown) == text


@given(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("\t\n")))
def test_plain_ascii_text_is_unchanged(text: str) -> None:
    """Printable ASCII with tabs and newlines is shown exactly as stored."""
    assert reveal(text) == text


COMMON = st.characters(categories=("Nd", "P", "S", "Zs"), max_codepoint=0x7F)
ONE_SCRIPT = st.sampled_from([(0x61, 0x7A), (0x430, 0x44F), (0x3B1, 0x3C9), (0x5D0, 0x5EA)]).flatmap(
    lambda span: st.text(st.characters(min_codepoint=span[0], max_codepoint=span[1]) | COMMON)
)


@given(ONE_SCRIPT)
def test_text_in_one_script_is_unchanged(text: str) -> None:
    """Latin, Cyrillic, Greek or Hebrew letters with digits and punctuation show exactly as stored."""
    assert reveal(text) == text


@given(st.text(st.characters(categories=("L", "M", "N", "P", "S", "Zs"))))
def test_only_words_that_mix_scripts_are_marked(text: str) -> None:
    """A mark names at least two scripts, and the word it marks resolves to no single script."""
    assert read_back(reveal(text)) == text
    for piece in pieces(text):
        if isinstance(piece, Mixed):
            assert len(piece.scripts) >= 2
            assert mixed_scripts("".join(p for p in piece.parts if isinstance(p, str)))


HOSTILE_PAYLOAD = {"amount": BIDI, "note": f"pay {JOINED}", "to": LOOKALIKE}
SHOWN = ("⟨U+202E⟩024$", "a⟨U+200D⟩lice", "⚠⟨Cyrillic+Latin⟩\u0430lice")


def hostile_shop(store: InterruptStore) -> tuple[str, str]:
    """A thread whose id, interrupt name, payload, requester and approver hide characters."""
    thread_id, interrupt_id = f"refund{JOINED}", "i-\u202e1"
    marker = build_interrupt_marker(name="appr\u043eve", interrupt_id=interrupt_id, payload=HOSTILE_PAYLOAD)
    store.mint(thread_id, marker, actor=LOOKALIKE)
    store.resume(thread_id, interrupt_id, {"approved": True, "by": BIDI}, actor=f"b\u200bob{BIDI}")
    return thread_id, interrupt_id


@pytest.mark.parametrize("args", [["audit"], ["replay", f"refund{JOINED}"]], ids=["audit", "replay"])
def test_cli_tables_show_invisible_and_look_alike_characters(store: InterruptStore, migrated_url: str, args: list[str]) -> None:
    """Tables show escapes and mixed-script marks in ids, names, actors, payloads and responses; none of the raw characters."""
    hostile_shop(store)
    shown = run_cli(*args, db=migrated_url, env={"COLUMNS": "400"})
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert not [c for c in text if hidden(c)], text
    assert "i-⟨U+202E⟩1" in text
    assert "b⟨U+200B⟩ob⟨U+202E⟩024$" in text  # the approver, and the response's "by"
    assert "⚠⟨Cyrillic+Latin⟩\u0430lice" in text  # the requester
    assert "⚠⟨Latin+Cyrillic⟩appr\u043eve" in text
    if args == ["audit"]:  # replay names the thread in its title and cuts the marker short
        assert "refunda⟨U+200D⟩lice" in text
        assert all(part in text for part in SHOWN)


def test_pending_table_reveals_and_json_and_csv_keep_the_stored_text(store: InterruptStore, migrated_url: str) -> None:
    """`pending` reveals in its table; `--format json` and `csv` carry the exact stored characters."""
    thread_id, interrupt_id = f"open{JOINED}", "i-open"
    marker = build_interrupt_marker(name="approve", interrupt_id=interrupt_id, payload=HOSTILE_PAYLOAD)
    store.mint(thread_id, marker, actor=LOOKALIKE)
    table = run_cli("pending", db=migrated_url).stdout
    assert "opena⟨U+200D⟩lice" in table and all(part in table for part in SHOWN)
    assert BIDI not in table and JOINED not in table

    (item,) = json.loads(run_cli("pending", "--format", "json", db=migrated_url).stdout)
    assert (item["thread_id"], item["payload"]) == (thread_id, HOSTILE_PAYLOAD)
    hostile_shop(store)
    records = json.loads(run_cli("audit", "--format", "json", db=migrated_url).stdout)
    assert [(r["thread_id"], r["payload"]) for r in records if r["actor"] is None] == [(thread_id, HOSTILE_PAYLOAD)]
    rows = list(csv.DictReader(io.StringIO(run_cli("audit", "--format", "csv", db=migrated_url).stdout)))
    answered = next(r for r in rows if r["outcome"] == "resumed")
    assert (answered["thread_id"], answered["actor"]) == (f"refund{JOINED}", f"b\u200bob{BIDI}")
    assert json.loads(answered["payload"]) == HOSTILE_PAYLOAD


def test_the_inbox_filter_escapes_html_and_shows_the_plain_reveal_as_its_text() -> None:
    """The HTML is escaped, escapes and marks are elements with a title, and the page's text is the CLI's reveal."""
    import html

    from symfonic_store.server.inbox.visible_html import visible

    text = f"<b onmouseover='x'>{LOOKALIKE}</b> & {BIDI}"
    shown = str(visible(text))
    assert "<b" not in shown and "&lt;b onmouseover=&#39;x&#39;&gt;" in shown and "&amp;" in shown
    assert '<span class="esc" title="U+202E RIGHT-TO-LEFT OVERRIDE: ' in shown
    assert '<span class="mixed" title="This word mixes scripts (Cyrillic, Latin)' in shown
    assert html.unescape(re.sub(r"<[^>]*>", "", shown)) == reveal(text)
    assert str(visible(None)) == "" and str(visible("plain & <ok>")) == "plain &amp; &lt;ok&gt;"


@given(st.text(st.sampled_from([*"ab Z_-.1\t\n", "\u0430", "\u03b1", "\u200d", "\u202e", "\u0301", "é", "⟨", "\x1b"])))
def test_printable_ascii_words_skipped_give_the_same_pieces_as_a_full_scan(text: str) -> None:
    """Looking closer only around non-ASCII characters and controls finds what a scan of every character finds."""
    from symfonic_store.visible import _scan

    full: list[object] = []
    for piece in _scan(text):
        if isinstance(piece, str) and full and isinstance(full[-1], str):
            full[-1] += piece
        else:
            full.append(piece)
    assert pieces(text) == full
