"""The README's quickstart commands, run as written (ports aside) from the repository root."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from tests.conftest import ROOT, cli_env, free_port, wait_ready

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
    """.ci/run runs the README's test command as written (its quickstart it reads from the README)."""
    test_block = blocks("Quickstart")[3].strip()
    assert test_block == "pip install -e '.[test]' && python -m pytest"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert [line for line in ci if line.startswith(test_block)] == [f"{test_block} || status=$?"]


def test_abeja_run_serve_curl_and_get() -> None:
    lines = [line for line in blocks("Quickstart")[2].splitlines() if line.strip()]
    run, expected = lines[0], lines[1].lstrip("# ")
    done = subprocess.run(localserve(run), cwd=ROOT, capture_output=True, env=cli_env(), timeout=120, check=True)
    assert done.stdout.decode() == expected
    port = str(free_port())
    serve = localserve(lines[2].replace(" &", "")) + ["--port", port]
    proc = subprocess.Popen(serve, cwd=ROOT, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        curl = shlex.split(lines[3].replace("localhost:8888", f"localhost:{port}"))
        answer = subprocess.run(curl, cwd=ROOT, capture_output=True, timeout=30, check=True).stdout
        assert b'"class_label":"iris-setosa"' in answer
        get = localserve(lines[4]) + ["--url", f"http://127.0.0.1:{port}"]
        table = subprocess.run(
            get, cwd=ROOT, capture_output=True, env=cli_env(), timeout=30, check=True
        ).stdout.decode()
        assert table.splitlines()[1].split()[:3] == ["iris", "ready", "1"]
        assert "iris: classification of 'class_label', 1 prediction" in table
    finally:
        proc.terminate()
        proc.wait(20)
