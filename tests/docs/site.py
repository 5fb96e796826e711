"""The documentation site built once per test module (``mkdocs build --strict`` into a temporary folder)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, cli_env


def build(site: Path) -> Path:
    """Build the site into ``site``, strictly (a warning fails it), as CI does; return ``site``."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=cli_env(NO_MKDOCS_2_WARNING="1"),
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return site


def text_of(page: Path) -> str:
    """A built page's text, tags removed and entities decoded (what a reader sees, and search indexes)."""
    body = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
    return html.unescape(body)
