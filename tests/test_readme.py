"""The README's quickstart commands, run as written (ports aside) from the repository root; the README
and the documentation name no issue and no platform document by number."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from tests.conftest import ROOT, cli_env
from tests.docs.examples import run_block

README = (ROOT / "README.md").read_text()


def blocks(section: str) -> list[str]:
    body = README.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(?:bash)?\n(.*?)```", body, re.S)


def localserve(command: str) -> list[str]:
    args = shlex.split(command.split("#", 1)[0])
    assert args[0] == "localserve"
    return [sys.executable, "-m", "localserve", *args[1:]]


def test_main_job_prints_what_the_readme_shows() -> None:
    command, output = blocks("Quickstart")[:2]
    install, _, run = command.strip().partition(" && ")
    assert install == "pip install -e '.[onnx,cortex]'"  # CI installs the package; the run is checked here
    done = subprocess.run(localserve(run), cwd=ROOT, capture_output=True, env=cli_env(), timeout=120, check=True)
    assert done.stdout.decode() == output.strip()


def test_the_test_command_is_what_ci_runs() -> None:
    """.ci/run runs the README's test command as written, pytest under a time limit and its output kept in a log
    (its quickstart it reads from the README)."""
    test_block = blocks("Quickstart")[3].strip()
    assert test_block == "pip install -e '.[test]' && python -m pytest"
    install, _, test = test_block.partition(" && ")
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    limited = f'{install} && timeout -k 30 "$PYTEST_LIMIT" {test} 2>&1 | tee "$WORK/pytest-$1.log" || status=$?'
    assert [line for line in ci if line.startswith(install)] == [limited]


def test_the_abeja_run_and_the_server_block_pasted_whole() -> None:
    """The second block as one shell script: run, serve in the background, wait for /readyz, curl, get, stop."""
    block = blocks("Quickstart")[2]
    done = run_block(block, ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert out[0] == '{"total":108.0}' == block.splitlines()[1].lstrip("# ")
    assert out[1].startswith('{"class_label":"iris-setosa"')
    table = out[2:]
    assert table[1].split()[:3] == ["iris", "ready", "1"]
    assert any("iris: classification of 'class_label', 1 prediction" in line for line in table)


def test_the_readme_is_a_front_page_and_no_page_names_an_issue_or_a_seed() -> None:
    assert len(README.splitlines()) <= 250
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    history = re.compile(r"\b(issue|issues) #?\d|\bseeds? \d{3}\b|\bround \d\b", re.I)
    assert [
        f"{page.relative_to(ROOT)}: {line}"
        for page in pages
        for line in page.read_text().splitlines()
        if history.search(line)
    ] == []
