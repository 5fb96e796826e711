"""Serving replicas: their default count, a stop past a running request.

Replicas are processes: starting, stopping and exiting them is the behaviour, so those cases run real ones.
"""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from localserve.config import load_config
from tests.conftest import cli_env, free_port, wait_ready, wait_until


def test_default_replicas_one_per_four_cores_for_gpu_apis_unless_configured(tmp_path: Path, monkeypatch) -> None:
    from localserve.processes import supervisor

    def config(extra: str = "") -> object:
        (tmp_path / "cortex.yaml").write_text(f"- kind: api\n  name: a\n  model: m.onnx\n{extra}")
        return load_config(tmp_path)

    for cores, expected in ((2, 1), (8, 2), (16, 4), (64, 4)):
        monkeypatch.setattr(supervisor.os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert supervisor.default_replicas(config("  compute: {gpu: 1}\n")) == expected
    assert supervisor.default_replicas(config()) == 1  # CPU APIs: one process
    assert supervisor.default_replicas(config("  compute: {gpu: 1, min_replicas: 2}\n")) == 2  # the config wins


def test_a_request_still_running_when_the_stop_ends_leaves_through_os_exit_after_the_logs(tmp_path: Path) -> None:
    """A handler still running after the graceful timeout: the process ends (os._exit once the logs are out),
    neither waiting for it nor left to the interpreter's exit."""
    marker = tmp_path / "running"
    (tmp_path / "main.py").write_text(
        f"import pathlib, threading\n\n\ndef handler(request, context):\n    pathlib.Path({str(marker)!r}).touch()\n"
        "    threading.Event().wait()  # never returns\n    return {}\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "localserve", "serve", "--handler", "main:handler", "--no-install"]
        + ["--host", "127.0.0.1", "--port", str(port), "--graceful-timeout", "1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(lambda: httpx.post(url, json={}, timeout=60))
            wait_until(marker.exists, "the handler never started")
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=50)  # the handler, which never returns, is not waited for
            answer = pending.exception() or pending.result()
    finally:
        proc.kill()
    stderr = err.decode()
    assert "exiting while these threads still run: localserve-" in stderr, stderr
    assert "terminate called" not in stderr
    # the client was answered before the exit, as every client is at a stop (503 past the graceful timeout)
    assert not isinstance(answer, BaseException) and answer.status_code == 503, (answer, stderr)


ANYIO_WORKER_LEFT = """
import asyncio, threading
import anyio
from localserve.cli.exits import exit_past_threads

started, gate = threading.Event(), threading.Event()


def work():
    started.set()
    gate.wait()


async def main():  # as the server's loop ends with one of anyio's threads (watchfiles' watcher) not yet gone
    task = asyncio.ensure_future(anyio.to_thread.run_sync(work, abandon_on_cancel=True))
    while not started.is_set():
        await asyncio.sleep(0.01)
    task.cancel()


asyncio.run(main())
release = threading.Timer(0.1, gate.set)
release.daemon = True
release.start()
exit_past_threads(0, [])
print("exited normally")
"""


def test_anyios_own_thread_ending_with_the_loop_is_not_user_codes(tmp_path: Path) -> None:
    """serve --reload's watcher runs in anyio's pool; stopping the server warned "user code left threads running:
    AnyIO worker thread". Such a thread is waited for (it was told to stop), and never blamed on user code."""
    script = tmp_path / "left.py"
    script.write_text(ANYIO_WORKER_LEFT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, env=cli_env(), timeout=50, check=False)
    assert (done.returncode, done.stdout.decode(), done.stderr.decode()) == (0, "exited normally\n", "")
