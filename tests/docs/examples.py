"""The code blocks of the documentation's tutorials and how-to guides, read as a reader follows them.

A page is a sequence of blocks. A ``bash`` block is a command to run; a ``text`` block right after it is
what the command prints (its last lines). A block after ``<!-- file: PATH -->`` is a file the reader
writes. A ``bash`` block after ``<!-- not-run: REASON -->`` is not run, for the reason given (a GPU,
Docker, a cluster). Other blocks (Python or YAML shown to read) are illustrations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*(ROOT / "docs" / "tutorials").glob("*.md"), *(ROOT / "docs" / "how-to").glob("*.md")])
FENCE = re.compile(r"(?:<!-- (file|not-run): (.+?) -->\n)?```(\w*)\n(.*?)```\n", re.S)
SHELLS = ("bash", "sh", "shell", "console")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, text, and what the comment before it says (``file`` or ``not-run``)."""

    language: str
    text: str
    mark: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class Step:
    """What the test does for a block: write a file, or run a command and compare its output's last lines."""

    command: str | None = None
    expected: str | None = None
    path: str | None = None
    content: str | None = None


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, in order."""
    return [
        Block(lang, text, mark or None, value or None) for mark, value, lang, text in FENCE.findall(page.read_text())
    ]


def steps(page: Path) -> tuple[list[Step], list[str]]:
    """The steps of a page, and the reasons given for the shell blocks it does not run."""
    found, skipped = [], []
    listed = blocks(page)
    for index, block in enumerate(listed):
        if block.mark == "file":
            found.append(Step(path=block.value, content=block.text))
        elif block.language in SHELLS and block.mark == "not-run":
            skipped.append(block.value or "")
        elif block.language in SHELLS:
            after = listed[index + 1] if index + 1 < len(listed) else None
            expected = after.text if after is not None and after.language == "text" and after.mark is None else None
            found.append(Step(command=block.text, expected=expected))
    return found, skipped
