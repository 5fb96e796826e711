"""A replica process's entry point, run as the supervisor runs it: settings through a pipe, the listening socket
inherited, one byte on the ready pipe once loaded, exit code 0 after a SIGTERM."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from localserve.config import load_config
from localserve.processes.listeners import bind_socket
from localserve.processes.replicas import ReplicaStart, Supervisor
from localserve.server import ServeOptions
from tests.conftest import cli_env

HANDLER = "def handler(request, context):\n    return {'content': {'got': request.read().decode()}}\n"


def test_a_replica_reads_its_settings_serves_on_the_socket_says_it_is_ready_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    (tmp_path / "main.py").write_text(HANDLER)
    options = Supervisor(load_config(tmp_path, handler="main:handler"), ServeOptions(replicas=1)).replica_options(0)
    start = ReplicaStart(load_config(tmp_path, handler="main:handler"), options)
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    settings_r, settings_w = os.pipe()
    ready_r, ready_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "localserve.cli.replica", str(settings_r), str(sock.fileno()), str(ready_w)],
        cwd=tmp_path,
        env=cli_env(),
        pass_fds=(settings_r, sock.fileno(), ready_w),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(settings_r)
    os.close(ready_w)
    sock.close()
    try:
        with os.fdopen(settings_w, "wb") as settings:
            pickle.dump([str(tmp_path), *sys.path], settings)
            pickle.dump(start, settings)
        with os.fdopen(ready_r, "rb", buffering=0) as ready:
            assert len(ready.read(1)) == 1  # blocks until the replica has loaded every API (empty: it died)
        answer = httpx.post(f"http://127.0.0.1:{port}/", content=b"hi", timeout=30)
        assert (answer.status_code, answer.json()) == (200, {"got": "hi"})
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()
