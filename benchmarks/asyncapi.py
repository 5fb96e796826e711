"""AsyncAPI figures: submit throughput (jobs/s accepted) and end-to-end job latency at an idle queue.

    python benchmarks/asyncapi.py [--duration 5] [--concurrency 16] [--idle 50] [--stores sqlite,redis]

For each store, a real `localserve serve` (one replica) serves a trivial AsyncAPI (predict returns
its payload). Submit throughput: POSTs for ``--duration`` seconds from ``--concurrency``
connections (wrk when installed, else the asyncio generator of loadgen.py), while the worker runs
the jobs. Idle latency: ``--idle`` jobs one at a time on an empty queue, each from the
moment its POST is sent to the completion time the store recorded (the ``timestamp`` of the poll),
and to the poll that first saw it completed (polled every 2 ms). The Redis store needs
`redis-server` on PATH (started on a free loopback port, no persistence). Prints figures; asserts
no time.
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
from datetime import datetime
from pathlib import Path

import httpx
from loadgen import LoadResult, run_python, run_wrk, wrk_available
from procs import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "- kind: AsyncAPI\n  name: echo\n  predictor: {type: python, path: predictor.py}\n"
PREDICTOR = "class PythonPredictor:\n    def __init__(self, config):\n        pass\n\n    def predict(self, payload):\n        return payload\n"


def submit_throughput(port: int, duration: float, concurrency: int) -> LoadResult:
    """POST /echo for ``duration`` seconds from ``concurrency`` connections (wrk, else the asyncio generator)."""
    if wrk_available():
        return run_wrk(port, "/echo", b'{"n": 1}', concurrency, duration)
    return run_python(port, "/echo", b'{"n": 1}', concurrency, duration)


def drain(url: str) -> None:
    """Wait until the worker has run every submitted job (the queue figures of /metrics)."""
    idle = ('localserve_async_jobs{api="echo",status="in_queue"} 0.0', 'status="in_progress"} 0.0')
    while not all(line in httpx.get(f"{url}/metrics", timeout=60).text for line in idle):
        time.sleep(0.1)


def idle_latency(url: str, count: int) -> tuple[list[float], list[float]]:
    stored, observed = [], []
    with httpx.Client(timeout=60) as http:
        for index in range(count):
            sent = time.time()
            job_id = http.post(f"{url}/echo", json={"n": index}).json()["id"]
            while True:
                body = http.get(f"{url}/echo/{job_id}").json()
                if body["status"] in ("completed", "failed"):
                    break
                time.sleep(0.002)
            observed.append(time.time() - sent)
            finished = datetime.fromisoformat(body["timestamp"].replace("Z", "+00:00")).timestamp()
            stored.append(max(0.0, finished - sent))
            time.sleep(0.05)  # the queue is idle again, the worker waiting
    return stored, observed


def measure(store: str, args: argparse.Namespace, work: Path) -> None:
    project = work / f"echo-{store}"
    project.mkdir()
    (project / "cortex.yaml").write_text(CONFIG)
    (project / "predictor.py").write_text(PREDICTOR)
    redis_proc = None
    flags: list[str] = []
    if store == "redis":
        binary = shutil.which("redis-server")
        if binary is None:
            print("redis: skipped (redis-server is not installed)")
            return
        redis_port = free_port()
        redis_proc = subprocess.Popen(
            [binary, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=work,
            stdout=subprocess.DEVNULL,
        )
        flags = ["--async-store", f"redis://127.0.0.1:{redis_port}/0"]
        time.sleep(0.3)
    port = free_port()
    env = dict(os.environ, LOCALSERVE_CACHE_DIR=str(work / "cache"), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "localserve", "serve", "--project", str(project), "--port", str(port)]
    cmd += ["--no-access-log", "--log-level", "warning", *flags]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        submit_throughput(port, 1, args.concurrency)  # warm-up
        drain(url)
        load = submit_throughput(port, args.duration, args.concurrency)
        accepted = (load.requests - load.non2xx - load.errors) / load.duration_s
        drain(url)
        stored, observed = idle_latency(url, args.idle)
        ms = [s * 1000 for s in stored]
        seen = [s * 1000 for s in observed]
        print(
            f"{store:<7} submit {accepted:7,.0f} jobs/s accepted (p50 {load.p50_ms:.1f} ms, {load.non2xx} refused, "
            f"{args.concurrency} connections, {load.duration_s:.0f} s)   "
            f"idle job latency: median {statistics.median(ms):6.1f} ms, p90 {_p90(ms):6.1f} ms (to the stored "
            f"timestamp); median {statistics.median(seen):6.1f} ms to the first poll that saw it"
        )
    finally:
        proc.terminate()
        proc.wait(30)
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)


def _p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.9) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of submits per store")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--idle", type=int, default=50)
    parser.add_argument("--stores", default="sqlite,redis")
    args = parser.parse_args()
    print(f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        for store in args.stores.split(","):
            measure(store, args, Path(folder))


if __name__ == "__main__":
    main()
