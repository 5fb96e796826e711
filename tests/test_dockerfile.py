"""The Dockerfile, read by a small parser (variants, entrypoint, health check, user); its install steps run for real."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVE = ["serve", "--project", "/mnt/project", "--host", "0.0.0.0", "--hide-errors"]


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper-case: FROM, RUN, CMD ...
    value: str  # the arguments, continuation lines joined
    stage: str  # the stage it belongs to ('' before the first FROM)

    @property
    def json(self) -> list[str] | None:
        """The exec (JSON) form's list, or None for the shell form."""
        text = self.value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, list) else None
        return None


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile: comments dropped, ``\\`` continuations joined, stages tracked."""
    instructions: list[Instruction] = []
    stage = ""
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        if not full:
            continue
        keyword, _, value = full.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.search(r"\s+AS\s+(\S+)\s*$", value, re.IGNORECASE)
            stage = match.group(1) if match else value.split()[0]
        instructions.append(Instruction(keyword, value.strip(), stage))
    assert not pending, "the Dockerfile ends inside a continuation line"
    return instructions


def _flags_and_rest(value: str) -> tuple[dict[str, str], str]:
    flags = {}
    while value.startswith("--"):
        flag, _, value = value.partition(" ")
        name, _, setting = flag[2:].partition("=")
        flags[name] = setting
        value = value.lstrip()
    return flags, value


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())


def _one(instructions: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in instructions if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {len(found)}"
    return found[0]


def _env(instructions: list[Instruction], stage: str) -> dict[str, str]:
    env = {}
    for inst in instructions:
        if inst.keyword == "ENV" and inst.stage == stage:
            for name, value in re.findall(r'(\w+)=("[^"]*"|\S+)', inst.value):
                env[name] = value.strip('"')
    return env


def test_parser_joins_continuations_and_reads_json_forms() -> None:
    parsed = parse_dockerfile(
        'ARG V=1\n# comment\nFROM a:1 AS one\nRUN echo a \\\n    && echo b\nCMD ["x", "y z"]\nFROM one\nUSER 0\n'
    )
    assert [(i.keyword, i.value, i.stage) for i in parsed] == [
        ("ARG", "V=1", ""),
        ("FROM", "a:1 AS one", "one"),
        ("RUN", "echo a && echo b", "one"),
        ("CMD", '["x", "y z"]', "one"),
        ("FROM", "one", "one"),
        ("USER", "0", "one"),
    ]
    assert parsed[3].json == ["x", "y z"]
    assert parsed[2].json is None


def test_gpu_and_cpu_variants(instructions: list[Instruction]) -> None:
    assert instructions[0].keyword == "ARG"
    assert instructions[0].value == "VARIANT=gpu"
    froms = [i.value for i in instructions if i.keyword == "FROM"]
    assert len(froms) == 3
    gpu_base, cpu_base, final = froms
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-cudnn-runtime-ubuntu24\.04 AS base-gpu", gpu_base)
    assert cpu_base == "python:3.12-slim AS base-cpu"
    assert final == "base-${VARIANT} AS final"


def test_extras_exist_and_match_cuda(instructions: list[Instruction]) -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    gpu = _env(instructions, "base-gpu")["LOCALSERVE_EXTRAS"].split(",")
    cpu = _env(instructions, "base-cpu")["LOCALSERVE_EXTRAS"].split(",")
    assert gpu == ["gpu", "tensorflow-gpu", "s3"]
    assert cpu == ["onnx", "tensorflow", "s3"]
    assert set(gpu + cpu) <= set(extras)
    # onnxruntime-gpu 1.27+ on PyPI is built for CUDA 13; the base image is CUDA 12.
    assert extras["gpu"] == ["onnxruntime-gpu>=1.19,<1.27"]
    assert extras["tensorflow-gpu"] == ["tensorflow[and-cuda]>=2.18"]
    install = [i.value for i in instructions if i.keyword == "RUN" and i.stage == "final"]
    assert any('pip install "/tmp/localserve-src[${LOCALSERVE_EXTRAS}]"' in run for run in install)


def test_entrypoint_and_cmd_serve_the_mounted_project(instructions: list[Instruction]) -> None:
    assert _one(instructions, "ENTRYPOINT").json == ["localserve"]
    assert _one(instructions, "CMD").json == SERVE
    assert _one(instructions, "EXPOSE").value == "8888"
    assert _one(instructions, "WORKDIR").value == "/mnt/project"


def test_cache_volume(instructions: list[Instruction]) -> None:
    assert _env(instructions, "final")["LOCALSERVE_CACHE_DIR"] == "/var/cache/localserve"
    assert _one(instructions, "VOLUME").json == ["/var/cache/localserve"]


def test_runs_as_a_non_root_user(instructions: list[Instruction]) -> None:
    user = _one(instructions, "USER")
    assert user.stage == "final"
    assert user.value not in ("root", "0") and not user.value.startswith(("root:", "0:"))
    assert user.value == "localserve"
    final = [i.keyword for i in instructions if i.stage == "final"]
    assert "RUN" not in final[final.index("USER") :], "everything after USER runs unprivileged; install before it"


def test_healthcheck_hits_healthz_with_python(instructions: list[Instruction]) -> None:
    flags, rest = _flags_and_rest(_one(instructions, "HEALTHCHECK").value)
    assert set(flags) == {"interval", "timeout", "start-period", "retries"}
    keyword, _, command = rest.partition(" ")
    assert keyword == "CMD"
    argv = json.loads(command)
    assert argv[:2] == ["python", "-c"]
    assert "http://127.0.0.1:8888/healthz" in argv[2]


class _Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_healthcheck_command_really_checks(instructions: list[Instruction]) -> None:
    _, rest = _flags_and_rest(_one(instructions, "HEALTHCHECK").value)
    argv = json.loads(rest.partition(" ")[2])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        script = argv[2].replace(":8888/", f":{server.server_address[1]}/")
        assert subprocess.run([sys.executable, "-c", script], capture_output=True).returncode == 0
        down = script.replace("/healthz", "/nothing-here")
        assert subprocess.run([sys.executable, "-c", down], capture_output=True).returncode != 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_dockerignore_keeps_what_the_build_needs() -> None:
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip()]
    patterns = [ln for ln in lines if not ln.startswith("#")]
    for needed in ("pyproject.toml", "README.md", "localserve"):
        assert needed not in patterns
    assert "**/.*" in patterns
    assert "tests" in patterns


# --- the install steps, for real ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Dockerfile's install steps in a fresh venv: the build context, then ``pip install`` of it.

    ``--system-site-packages`` and ``--no-deps`` reuse the dependencies installed here rather than
    downloading TensorFlow again; what is checked is that the package builds and its command runs.
    """
    base = tmp_path_factory.mktemp("image")
    context = base / "localserve-src"
    context.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, context / name)
    shutil.copytree(ROOT / "localserve", context / "localserve", ignore=shutil.ignore_patterns("__pycache__"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet"]
    subprocess.run([*pip, str(context)], check=True, cwd=base)
    yield venv / "bin"


@pytest.mark.slow
def test_installed_entrypoint_runs(installed: Path) -> None:
    result = subprocess.run([str(installed / "localserve"), "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "serve" in result.stdout


@pytest.mark.slow
def test_installed_serve_answers_healthz(installed: Path, tmp_path: Path) -> None:
    """The image's command (ENTRYPOINT + CMD) with a free port and a local project instead of /mnt/project."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text(
        "def handler(request, context):\n"
        "    return {'status_code': 200, 'content_type': 'application/json', 'content': {'ok': True}}\n"
    )
    port = _free_port()
    argv = [str(installed / "localserve"), *SERVE, "--handler", "main:handler", "--no-install"]
    argv[argv.index("/mnt/project")] = str(project)
    argv[argv.index("0.0.0.0")] = "127.0.0.1"
    argv += ["--port", str(port)]
    env = {**os.environ, "LOCALSERVE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(argv, env=env, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail(f"localserve serve did not become ready:\n{proc.communicate()[0]}")
                time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200
        request = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=b"{}", method="POST")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=5) as response:
            assert json.loads(response.read()) == {"ok": True}
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
