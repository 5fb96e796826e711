"""A multi-model API's first-request latency: a model not in memory (loaded on that request) against one in memory.

    python benchmarks/multimodel.py [--rounds 30] [--model mlp|iris]

A real `localserve serve` (one replica) serves an ONNXPredictor with `models: {dir: ...}` of two copies
of the benchmark model (`onnx_models.py`: the 256-1024-1024-10 MLP, 4.3 MB, by default) and
`cache_size: 1`. Each round sends, alternately, a request to the other model (uncached: it is
loaded, the first evicted) and a second request to the same model (cached). Prints the median and
p90 of each and their ratio; asserts no time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from onnx_models import BUILDERS
from procs import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """- name: multi
  kind: RealtimeAPI
  predictor:
    type: onnx
    path: predictor.py
    models: {dir: models, cache_size: 1, disk_cache_size: 2}
"""
PREDICTOR = """class ONNXPredictor:
    def __init__(self, onnx_client, config):
        self.client = onnx_client

    def predict(self, payload, query_params):
        return {"output": self.client.predict(payload["input"], query_params["model"])[0].tolist()}
"""


def project(root: Path, model: str) -> bytes:
    """The project: two copies of the model, each in a version folder; the request body."""
    built = BUILDERS[model](root)
    for name in ("first", "second"):
        (root / "models" / name / "1").mkdir(parents=True)
        shutil.copy(built.path, root / "models" / name / "1" / "model.onnx")
    (root / "cortex.yaml").write_text(CONFIG)
    (root / "predictor.py").write_text(PREDICTOR)
    return built.body


def timed(http: httpx.Client, url: str, body: bytes) -> float:
    start = time.perf_counter()
    response = http.post(url, content=body, headers={"content-type": "application/json"})
    seconds = time.perf_counter() - start
    if response.status_code != 200:
        raise SystemExit(f"{url}: {response.status_code} {response.text}")
    return seconds


def measure(url: str, body: bytes, rounds: int) -> tuple[list[float], list[float]]:
    uncached, cached = [], []
    with httpx.Client(timeout=120) as http:
        timed(http, f"{url}/multi?model=first", body)  # the first load of the process is not a round's
        for index in range(rounds):
            model = ("second", "first")[index % 2]  # the other model: not in memory (cache_size 1)
            uncached.append(timed(http, f"{url}/multi?model={model}", body))
            cached.append(timed(http, f"{url}/multi?model={model}", body))
    return uncached, cached


def ms(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--model", choices=sorted(BUILDERS), default="mlp")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        body = project(root, args.model)
        port = free_port()
        cmd = [sys.executable, "-m", "localserve", "serve", "--port", str(port), "--no-access-log"]
        env = dict(os.environ, LOCALSERVE_CACHE_DIR=str(root / "cache"), PYTHONPATH=str(ROOT))  # this checkout
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, proc)
            uncached, cached = measure(url, body, args.rounds)
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"multimodel ({args.model}, cache_size 1, {args.rounds} rounds alternated)")
    for label, values in (("uncached model, first request", uncached), ("cached model", cached)):
        print(f"{label:30} median {statistics.median(values) * 1000:8.2f} ms, p90 {ms(values, 0.9):8.2f} ms")
    print(f"uncached / cached (median): {statistics.median(uncached) / statistics.median(cached):.1f}x")


if __name__ == "__main__":
    main()
