"""Every relative link of README.md and docs/*.md reaches a file, and its anchor a heading there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "ARCHITECTURE.md", *(ROOT / "docs").glob("*.md")])

FENCED = re.compile(r"^```.*?^```$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def prose(text: str) -> str:
    """The page without its fenced code (a `# comment` there is no heading, a `](` no link)."""
    return FENCED.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    found: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(prose(text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    return LINK.findall(INLINE_CODE.sub("", prose(page.read_text(encoding="utf-8"))))


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)  # http:, https:, mailto:...


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    """Each relative link names a file or folder that exists; an anchor names a heading of that page."""
    broken: list[str] = []
    for target in filter(relative, links(page)):
        path, _, anchor = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        name = goal.relative_to(ROOT).as_posix() if goal.is_relative_to(ROOT) else str(goal)
        if not goal.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and (goal.suffix != ".md" or anchor not in anchors(goal)):
            broken.append(f"{target}: no heading #{anchor} in {name}")
    assert not broken, broken


def test_the_pages_have_links_to_check() -> None:
    """The check sees links, anchors among them (a broken pattern would pass every page)."""
    found = links(ROOT / "README.md")
    assert "docs/langgraph.md" in found and "#which-one-is-yours" not in found
    assert any("#" in t for p in PAGES for t in links(p) if relative(t))
    assert "you-call-interrupt-in-your-own-process" in anchors(ROOT / "README.md")


def test_slugs_are_githubs() -> None:
    """Code, punctuation and links in headings give GitHub's anchors; repeated headings are numbered."""
    assert slug("You call `interrupt()` in your own process") == "you-call-interrupt-in-your-own-process"
    assert slug("Signed JWTs (`--jwt-*`)") == "signed-jwts---jwt-"
    assert slug("LangGraph's own interrupts (`--graph`)") == "langgraphs-own-interrupts---graph"
    assert slug("On every path: the inbox, the sweep, the audit") == "on-every-path-the-inbox-the-sweep-the-audit"



def test_no_install_line_names_the_unpublished_package() -> None:
    """symfonic-store is not on PyPI: no page, and no message of the package, tells anyone to `pip install 'symfonic-store[extra]'` (they say `pip install '.[extra]'` in a checkout)."""
    sources = [*PAGES, *sorted((ROOT / "symfonic_store").rglob("*.py"))]
    named = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "symfonic-store[" in line
    ]
    assert named == []
