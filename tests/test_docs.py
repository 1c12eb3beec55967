"""The README stays a front door and the documentation holds together: the README is short,
every relative link in it and in docs/ points at a file and a heading that exist, and no
page speaks of the project's work items or working sessions, which a reader cannot
resolve."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The README's length at most: a front door (p4lang/tutorials' and Mininet's are 100-250
#: lines); what is longer belongs in docs/.
README_MAX_LINES = 300
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
#: Words that point at a work item or a working session instead of saying what happened.
UNRESOLVABLE = [
    re.compile(r"(?<![\w&/])#\d+\b"),
    re.compile(r"\bissues?\b", re.IGNORECASE),
    re.compile(r"\b(this|that|last|next|previous|earlier|two|three)\s+sessions?\b", re.I),
    re.compile(r"\bsessions?\s+(ago|earlier|later|before)\b", re.IGNORECASE),
    re.compile(r"\bsession\s+\d+", re.IGNORECASE),
]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: the text without its Markdown, lower case,
    punctuation dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.strip().lower()
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in " -_" or category[0] in "LN":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a page: its headings' (duplicates numbered as GitHub does) and
    explicit ``<a id="...">`` ones."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = path.read_text()
    for _number, line in prose_lines(text):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    found.update(HTML_ANCHOR.findall(text))
    return found


def broken_links(path: Path) -> list[str]:
    out = []
    for number, line in prose_lines(path.read_text()):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if not dest.exists():
                out.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                out.append(f"{where} (no such heading)")
    return out


def test_the_readme_is_a_front_door() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to docs/"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_somewhere(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_speaks_of_work_items_or_sessions(page: Path) -> None:
    hits = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
        for number, line in prose_lines(page.read_text())
        if any(p.search(line) for p in UNRESOLVABLE)
    ]
    assert hits == []


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """The link check finds a missing file and a missing heading, and knows GitHub's
    anchors; the words check finds a work item."""
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Seed 001's schemes: `qcn schemes`\n## Two\n## Two\n")
    page.write_text(
        "[a](other.md#seed-001s-schemes-qcn-schemes) [b](other.md#two-1) [c](#here)\n"
        "[d](missing.md) [e](other.md#three) ![f](img.png)\n"
        "```\n[g](not-checked.md)\n```\n"
        '<a id="here"></a>\n'
    )
    (tmp_path / "img.png").write_bytes(b"")
    global ROOT  # noqa: PLW0603 - the messages are relative to it
    saved, ROOT = ROOT, tmp_path
    try:
        assert broken_links(page) == [
            "page.md:2: missing.md (no such file)",
            "page.md:2: other.md#three (no such heading)",
        ]
    finally:
        ROOT = saved
    assert any(p.search("as (#30) did") for p in UNRESOLVABLE)
    assert any(p.search("measured this session") for p in UNRESOLVABLE)
    assert not any(p.search("the CNM clone sessions serve") for p in UNRESOLVABLE)
