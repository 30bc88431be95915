"""Reading the README and the docs/ pages from tests: pages, fenced blocks, named examples.

A page marks an example the tests run with ``<!-- example: NAME -->`` on the line before
its fence; a ``python`` example followed by "prints" and a ``text`` block must print
exactly that block. Every ``python`` fence of a page is runnable as written; a block that
is not (a sketch) takes another info string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", flags=re.S | re.M)
_EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```(\w*)\n(.*?)^```$", flags=re.S | re.M)
_PRINTS = re.compile(r"\n+prints[^\n]*\n\n```text\n(.*?)^```$", flags=re.S | re.M)


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block of a page."""

    page: str  # relative to the repository root, e.g. "docs/history.md"
    line: int  # the line of the opening fence, 1-based
    kind: str  # the fence's info string ("python", "text", ...)
    body: str
    prints: str | None  # for a python block: the "prints" text block after it, if any

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of docs/, in a stable order."""
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def page(name: str) -> str:
    """The text of ``README.md`` or of ``docs/NAME``."""
    path = ROOT / name if name == "README.md" else DOCS / name
    return path.read_text("utf-8")


def table_rows(page_name: str, name: str) -> list[list[str]]:
    """The rows of the table a page marks with ``<!-- table: NAME -->`` on the line before
    it, header and rule left out: each row its cells, stripped (``\\|`` stays in a cell)."""
    found = re.search(rf"<!-- table: {re.escape(name)} -->\n((?:\|.*\n)+)", page(page_name))
    assert found is not None, f"{page_name} has no table {name}"
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in found.group(1).splitlines()[2:]]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, with the "prints" block that follows a python one."""
    text = path.read_text("utf-8")
    found = []
    for match in _FENCE.finditer(text):
        prints = _PRINTS.match(text, match.end()) if match.group(1) == "python" else None
        found.append(Block(
            page=path.relative_to(ROOT).as_posix(),
            line=text.count("\n", 0, match.start()) + 1,
            kind=match.group(1),
            body=match.group(2),
            prints=prints.group(1) if prints else None,
        ))
    return found


def example(name: str, page_name: str) -> tuple[str, str | None]:
    """The body of the example ``name`` of a page, and what it prints (when it says)."""
    text = page(page_name)
    matches = [m for m in _EXAMPLE.finditer(text) if m.group(1) == name]
    assert len(matches) == 1, f"{page_name}: expected one example {name!r}, found {len(matches)}"
    match = matches[0]
    prints = _PRINTS.match(text, match.end())
    return match.group(3), prints.group(1) if prints else None


def shown(value: object) -> str | None:
    """How the docs tables write a plain default; ``None`` for one the text describes."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int):
        return f"`{value}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if value == []:
        return "`[]`"
    return None
