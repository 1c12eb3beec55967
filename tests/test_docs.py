"""The README stays a front door and the documentation holds together.

- The README is at most :data:`README_MAX_LINES` lines, and each row of its status table
  fits in two lines: its text as rendered (a link's target, backticks and emphasis left
  out, cells joined by a space) is at most :data:`STATUS_ROW_MAX_CHARS` characters.
- Every relative link in the README and in docs/ points at a file that exists, and at a
  heading of it where the link names one (GitHub's anchors).
- No table cell in the README or docs/ holds more than one dated measurement. A *dated
  measurement* is a figure tied to a point in the project's history, and a cell names such
  a point in one of two ways: an ISO date (``2026-11-27``), or a change the figure is set
  against (``after the second pass``, ``before the fix``, ``since the merge``, ``again
  on``/``at``/``after``: :data:`CHANGE_MARK`). A cell may name at most one such
  point; two are two measurements of one figure side by side, and the earlier belongs
  in docs/history.md, which every page's figures link to. A date and a change in one cell
  count as two even where they name the same day: the change goes in the prose. A cell
  that gives a figure's earlier value (``(was 0.30)``, ``(were 5.2)``: :data:`EARLIER_VALUE`)
  holds two measurements by itself.
- No page speaks of the project's work items or working sessions, which a reader cannot
  resolve.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The README's length at most: a front door a newcomer reads in five minutes; what is
#: longer belongs in docs/.
README_MAX_LINES = 150
#: A README status row's rendered text at most: two lines of a 100-character reading width.
STATUS_ROW_MAX_CHARS = 200
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
#: The words the pages use to set a figure against a change in the project: each names a
#: point in its history, as a date does.
CHANGE_MARK = re.compile(
    r"\bagain (?:on|at|after)\b"
    r"|\b(?:after|before|since) the\b[^|;.()]{0,40}?\b(?:pass|fix|merge|lookup)\b",
    re.IGNORECASE,
)
#: A figure's earlier value given beside it.
EARLIER_VALUE = re.compile(r"\((?:was|were) [\d.,\u2212-]")
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


def table_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every table row outside fenced code blocks, the header and
    delimiter rows included; a ``|`` inside backticks or escaped stays in its cell."""
    rows = []
    for number, line in prose_lines(text):
        stripped = line.strip()
        if not stripped.startswith("|"):
            continue
        body = stripped[1:-1] if stripped.endswith("|") and len(stripped) > 1 else stripped[1:]
        cells, cell, in_code, i = [], "", False, 0
        while i < len(body):
            ch = body[i]
            if ch == "\\" and body[i + 1 : i + 2] == "|":
                cell, i = cell + "|", i + 2
                continue
            if ch == "`":
                in_code = not in_code
            if ch == "|" and not in_code:
                cells.append(cell)
                cell = ""
            else:
                cell += ch
            i += 1
        cells.append(cell)
        rows.append((number, [c.strip() for c in cells]))
    return rows


def rendered(markdown: str) -> str:
    """The text a reader sees: a link or image as its text, no backticks or emphasis."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"[`*]", "", text)


def status_rows(text: str) -> list[tuple[int, str]]:
    """(line number, rendered text) of each data row of the README's status table: the
    first table under its ``## Status`` heading."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "## Status")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = "\n".join(lines[start:end])
    rows = table_rows(section)[2:]  # past the header and its delimiter row
    assert rows, "the README's Status section has no table"
    return [(start + n, " ".join(rendered(c) for c in cells)) for n, cells in rows]


def dated_marks(cell: str) -> list[str]:
    """The points in the project's history a table cell names: its ISO dates and its
    change marks (module docstring)."""
    return ISO_DATE.findall(cell) + [m.group(0) for m in CHANGE_MARK.finditer(cell)]


def crowded_cells(path: Path) -> list[str]:
    """Each table cell of a page that holds more than one dated measurement: it names more
    than one point in time, or gives a figure's earlier value."""
    out = []
    for number, cells in table_rows(path.read_text()):
        for cell in cells:
            points, earlier = dated_marks(cell), EARLIER_VALUE.findall(cell)
            if len(points) > 1 or earlier:
                marks = points + earlier
                out.append(f"{path.relative_to(ROOT)}:{number}: {marks}: {cell[:80]}")
    return out


def test_the_readme_is_a_front_door() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to docs/"
    )


def test_each_readme_status_row_fits_in_two_lines() -> None:
    long = [
        f"README.md:{number}: {len(row)} characters: {row[:60]}"
        for number, row in status_rows(README.read_text())
        if len(row) > STATUS_ROW_MAX_CHARS
    ]
    assert long == [], f"at most {STATUS_ROW_MAX_CHARS}: the detail belongs on the docs page"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_table_cell_holds_two_dated_measurements(page: Path) -> None:
    assert crowded_cells(page) == [], "today's figure in the cell, the earlier in history.md"


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


def test_the_table_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """The dated-cell check finds two dates in a cell, a figure with its earlier value, and a
    figure before and after a pass, and leaves one date with its load and words such as
    "after the restore" alone; the status check finds a row past two lines, counted as
    rendered (a link's target is not)."""
    page = tmp_path / "page.md"
    page.write_text(
        "| what | figure |\n|---|---|\n"
        "| HPCC | 97-108 s. After the routes' fix below: 121 s. After the core's second"
        " pass below: 63.8 s |\n"
        "| noise | ok (2026-11-25; on 2026-11-27 the machine was noisier) |\n"
        "| queue | 0.96: **met** (was 0.30) |\n"
        "| transient, again at 06d14b7 (2026-11-24, idle) | 0.97 |\n"
        "| after the restore | 1.08 after the restore (2026-11-24, idle) |\n"
        "| `--depth-at enqueue|dequeue` | 2026-11-23 | 2026-11-24 |\n"
        "```\n| fenced | 2026-11-23, 2026-11-24 |\n```\n"
    )
    global ROOT  # noqa: PLW0603 - the messages are relative to it
    saved, ROOT = ROOT, tmp_path
    try:
        found = crowded_cells(page)
    finally:
        ROOT = saved
    assert [line.split(":")[1] for line in found] == ["3", "4", "5", "6"], found
    status = (
        "# x\n\n## Status\n\n| part | state | detail |\n|---|---|---|\n"
        f"| long | {'word ' * 40} | [d](docs/qcn.md) |\n"
        f"| short | two lines at most | [d](docs/{'a' * 300}.md#{'b' * 300}) |\n"
        "\n## Commands\n\n| not | a status row |\n|---|---|\n"
    )
    rows = status_rows(status)
    assert [number for number, _ in rows] == [7, 8]
    assert [len(row) > STATUS_ROW_MAX_CHARS for _, row in rows] == [True, False]
