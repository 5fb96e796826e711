"""Every command of the tutorials and how-to guides, run as a reader would: in a scratch copy of the
example projects, in order, with a server's port moved to a free one (``tests/docs/examples.py`` reads
the pages)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.docs.examples import PAGES, ROOT, SHELLS, blocks, run_block, steps

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    found, _ = steps(page)
    shutil.copytree(
        ROOT / "handlers_examples", tmp_path / "handlers_examples", ignore=shutil.ignore_patterns("__pycache__")
    )
    for step in found:
        if step.path is not None:
            target = tmp_path / step.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.content or "")
            continue
        assert step.command is not None
        done = run_block(step.command, tmp_path)
        assert done.returncode == 0, (
            f"{page.name}: exit {done.returncode}\n$ {step.command}\n{done.stdout}\n{done.stderr[-3000:]}"
        )
        if step.expected is not None:
            expected = step.expected.strip().splitlines()
            assert done.stdout.strip().splitlines()[-len(expected) :] == expected, (step.command, done.stdout)


def test_every_shell_block_is_run_or_says_why_not() -> None:
    for page in PAGES:
        for block in blocks(page):
            if block.language in SHELLS and block.mark == "not-run":
                assert len(block.value or "") > 10, f"{page.name}: a block not run must say why"
        assert any(b.language in SHELLS for b in blocks(page)) or page.name == "index.md", page.name


def test_the_collector_reads_files_commands_outputs_and_reasons(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- file: a/b.py -->\n```python\nX = 1\n```\n\n```bash\necho hi\n```\n```text\nhi\n```\n\n"
        "<!-- not-run: needs a GPU -->\n```bash\nnvidia-smi\n```\n\n```python\nshown only\n```\n"
    )
    found, skipped = steps(page)
    assert [(s.path, s.content, s.command, s.expected) for s in found] == [
        ("a/b.py", "X = 1\n", None, None),
        (None, None, "echo hi\n", "hi\n"),
    ]
    assert skipped == ["needs a GPU"]
