"""``localserve serve``'s own port handling: a port in use ends it before user code is imported; with ``--port 0``
the port is bound first, so LOCALSERVE_URL carries the port that serves."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.cli.test_listen import serving
from tests.conftest import cli_env


@pytest.mark.parametrize("replicas", ["1", "2"])
def test_a_port_in_use_ends_serve_naming_it_before_user_code_is_imported(tmp_path: Path, replicas: str) -> None:
    """Not uvicorn's "[Errno 98] ... address already in use" and exit 3 once the APIs had loaded: the port, and
    the way out, before the handler's module is imported (its import never ends)."""
    marker = tmp_path / "importing"
    (tmp_path / "main.py").write_text(
        f"import pathlib, threading\n\npathlib.Path({str(marker)!r}).touch()\nthreading.Event().wait()  # never returns\n\n\n"
        "def handler(request, context):\n    return {}\n"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "localserve", "serve", "--handler", "main:handler", "--no-install"]
            + ["--host", "127.0.0.1", "--port", str(port), "--replicas", replicas],
            cwd=tmp_path,
            capture_output=True,
            env=cli_env(),
            timeout=50,
            check=False,
        )
    assert (done.returncode, done.stderr.decode().splitlines()[-1]) == (
        1,
        f"Error: Port {port} on 127.0.0.1 is already in use (another server listens there): stop it, or serve on "
        "another port with --port (--port 0 picks a free one).",
    )
    assert not marker.exists()


@pytest.mark.parametrize("replicas", ["1", "2"])
def test_localserve_url_carries_the_port_bound_for_port_0(make_project: Callable[..., Path], replicas: str) -> None:
    """User code's LOCALSERVE_URL is the URL served, not port 0 (one process, and replicas on one socket)."""
    project = make_project(
        {
            "main.py": """
            import os

            SEEN_AT_IMPORT = os.environ["LOCALSERVE_URL"]

            def handler(request, context):
                return {"content_type": "application/json", "content": [SEEN_AT_IMPORT, os.environ["LOCALSERVE_URL"]]}
            """
        }
    )
    with serving("-h", "main:handler", "--port", "0", "--replicas", replicas, project=project) as s:
        banner = s.banner()
        found = re.match(r"serving command line at (http://127\.0\.0\.1:\d+) \(", banner["serving"])
        assert found is not None and not found[1].endswith(":0"), banner
        url = found[1]
        s.wait_for(lambda _: sum(m.startswith("api 'proj' loaded") for m in s.seen) == int(replicas))
        for _ in range(4):  # new connections: with replicas, each may answer
            reply = httpx.post(banner["API proj"], json={})
            assert (reply.status_code, reply.json()) == (200, [url, url])


@pytest.mark.parametrize("port", ["0", "free"])
def test_serve_enters_the_project_with_one_thread_and_no_numpy(tmp_path: Path, port: str) -> None:
    """/mnt/project's private mount namespace needs a process of one thread (unshare(2)); numpy starts
    threads when imported. Whatever serve does before it enters the project (binding ``--port 0``, checking
    a given port) imports neither the server package nor numpy."""
    (tmp_path / "main.py").write_text("def handler(request, context):\n    return {}\n")
    if port == "free":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
    probe_entry = (
        "import json, os, sys\n"
        "from localserve.project.compat.context import Project\n"
        "def enter(self):\n"
        "    print(json.dumps([len(os.listdir('/proc/self/task')), 'numpy' in sys.modules]), flush=True)\n"
        "    os._exit(0)\n"
        "Project.__enter__ = enter\n"
        "from localserve.cli import main\n"
        f"main(['serve', '--handler', 'main:handler', '--no-install', '--host', '127.0.0.1', '--port', {port!r}])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe_entry], cwd=tmp_path, capture_output=True, env=cli_env(), timeout=50, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip().splitlines()[-1] == "[1, false]"
