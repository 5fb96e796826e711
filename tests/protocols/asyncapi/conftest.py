"""A real redis-server on a free loopback port for the Redis store tests; AsyncAPI projects."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port

REDIS = shutil.which("redis-server")
needs_redis = pytest.mark.skipif(
    REDIS is None,
    reason="redis-server is not installed (Debian: apt-get install redis-server; .ci/install-system-deps)",
)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """``redis://127.0.0.1:<port>/0`` of a fresh redis-server (no persistence), stopped after the test."""
    if REDIS is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server; .ci/install-system-deps)")
    import redis

    port = free_port()
    folder = tmp_path / "redis"
    folder.mkdir()
    proc = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert proc.poll() is None, f"redis-server exited with {proc.returncode}"
            assert time.monotonic() < deadline, "redis-server did not answer within 20 s"
            time.sleep(0.02)
    client.close()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


PREDICTOR = """
import json, os, time


class PythonPredictor:
    def __init__(self, config):
        self.gate = config.get("gate")
        self.runs = config.get("runs")

    def predict(self, payload, request_id, query_params, headers):
        if self.runs:
            with open(self.runs, "a") as f:  # one line per run: the side file that counts them
                f.write(f"{request_id} {os.getpid()}\\n")
        if self.gate and isinstance(payload, dict) and payload.get("wait"):
            while not os.path.exists(self.gate):
                time.sleep(0.01)
        if isinstance(payload, dict) and payload.get("fail"):
            raise ValueError("boom: " + str(payload["fail"]))
        if isinstance(payload, dict) and payload.get("bad_name"):  # a file name that is not UTF-8
            raise ValueError("cannot read " + os.fsdecode(b"/data/\\xff.bin"))
        if isinstance(payload, dict) and payload.get("unjsonable"):
            return {"when": object}
        return {"id": request_id, "payload": payload, "query": query_params, "agent": headers.get("x-agent")}
"""


@pytest.fixture
def async_project(make_project: Callable[..., Path], tmp_path: Path) -> Callable[..., Path]:
    """A ``kind: AsyncAPI`` project named ``jobs``; ``extra`` is YAML appended to the API's entry."""

    def make(extra: str = "", threads: int = 1) -> Path:
        gate, runs = tmp_path / "gate", tmp_path / "runs.txt"
        config = (
            "- kind: AsyncAPI\n  name: jobs\n  predictor:\n    type: python\n    path: predictor.py\n"
            f"    threads_per_process: {threads}\n"
            f"    config: {{gate: '{gate}', runs: '{runs}'}}\n{extra}"
        )
        return make_project({"cortex.yaml": config, "predictor.py": PREDICTOR})

    return make
