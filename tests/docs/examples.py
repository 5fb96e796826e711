"""The code blocks of the documentation's tutorials and how-to guides, read as a reader follows them.

A page is a sequence of blocks. A ``bash`` block is a command to run; a ``text`` block right after it is
what the command prints (its last lines). A block after ``<!-- file: PATH -->`` is a file the reader
writes. A ``bash`` block after ``<!-- not-run: REASON -->`` is not run, for the reason given (a GPU,
Docker, a cluster). Other blocks (Python or YAML shown to read) are illustrations.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import cli_env, free_port

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


PORTS = ("8888", "8081", "6379")  # HTTP, gRPC and Redis as the pages write them; each becomes a free port


def run_block(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a block in bash, each port of PORTS moved to a free one (``serve``'s default port too)."""
    ports = {port: str(free_port()) for port in PORTS}
    env = cli_env(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        LOCALSERVE_PORT=ports["8888"],
        LOCALSERVE_URL=f"http://127.0.0.1:{ports['8888']}",
        LOCALSERVE_NO_INSTALL="1",
    )
    script = "set -euo pipefail\n" + re.sub("|".join(PORTS), lambda m: ports[m[0]], command)
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        text=True,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += "\n(the block did not end within 120 s)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # what the block left running (a server it did not stop)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
