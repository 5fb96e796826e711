"""The README's quickstart commands, run as written (ports aside) from the repository root."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, cli_env, free_port, wait_ready
from tests.server.test_reload import RELOADED, Served

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


def develop_section() -> str:
    return README.split("## Develop a handler\n", 1)[1].split("\n## ", 1)[0]


def develop_commands() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", develop_section(), re.S)


def test_the_pytest_examples_are_the_files_ci_runs() -> None:
    """Each python block is the example file named just before it, which the test command collects (testpaths)."""
    found = re.findall(r"`(handlers_examples/[\w/]+\.py)`:\n\n```python\n(.*?)```", develop_section(), re.S)
    assert [path for path, _ in found] == [
        "handlers_examples/json_tax/test_json_tax.py",
        "handlers_examples/iris_onnx/test_iris_onnx.py",
    ]
    for path, code in found:
        assert code == (ROOT / path).read_text(), path
    assert re.search(r'^testpaths = \["tests", "handlers_examples"\]', (ROOT / "pyproject.toml").read_text(), re.M)


def test_the_pytest_command_passes_in_a_fresh_pytest() -> None:
    """The plugin is found by its entry point (no conftest): the README's command, as written, in a process."""
    command = develop_commands()[1].strip()
    assert command.startswith("python -m pytest ")
    args = [sys.executable, *shlex.split(command)[1:], "-q", "-p", "no:cacheprovider"]
    # One process (the suite's own workers are busy enough), and no __pycache__ left in the examples (conftest.py).
    env = cli_env(PYTEST_ADDOPTS="-n 0", PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(args, cwd=ROOT, capture_output=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout.decode()[-3000:]
    assert "5 passed" in done.stdout.decode()


def test_the_development_loop_serve_edit_and_curl(tmp_path: Path) -> None:
    """The README's loop on a copy of its example: serve --reload, curl, save an edit, curl the new code."""
    serve_line, edit_line, curl_line, answer = (line for line in develop_commands()[0].splitlines() if line.strip())
    serve = localserve(serve_line.replace(" &", ""))
    assert "--reload" in serve
    edited = re.fullmatch(r"# edit (\S+) and save: .*", edit_line)
    assert edited is not None, edit_line
    shutil.copytree(ROOT / "handlers_examples/json_tax", tmp_path / "handlers_examples/json_tax")
    port = str(free_port())
    proc = subprocess.Popen(
        [*serve, "--port", port, "--log-format", "text"],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    served = Served(proc, f"http://127.0.0.1:{port}")
    curl = shlex.split(curl_line.replace("localhost:8888", f"localhost:{port}"))
    try:
        served.wait_line("reload: watching ")
        wait_ready(served.url, proc)
        done = subprocess.run(curl, cwd=tmp_path, capture_output=True, timeout=30, check=True)
        assert done.stdout.decode() == answer.lstrip("# ")
        handler = tmp_path / edited[1]
        mark = served.mark()
        handler.write_text(handler.read_text().replace("* 1.08", "* 1.5"))
        served.wait_line(RELOADED, mark)
        done = subprocess.run(curl, cwd=tmp_path, capture_output=True, timeout=30, check=True)
        assert done.stdout.decode() == '{"total":150.0}'
    finally:
        proc.terminate()
        proc.wait(20)
        served.reader.join(10)
        assert proc.stdout is not None
        proc.stdout.close()
