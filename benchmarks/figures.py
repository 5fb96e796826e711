"""Headline figures for localserve: one-shot run, start to ready, serving overhead, metrics cost, `get`.

    python benchmarks/figures.py [--runs 5] [--requests 300]
    python benchmarks/figures.py --only metrics       # section 4 alone: metrics on vs --no-metrics

Runs localserve from this checkout (``PYTHONPATH=<checkout> python -m localserve ...``) against the
bundled examples, prints every command line it ran and the medians it measured, and never asserts a
time. About 2 minutes on a 2-core machine. See benchmarks/README.md ("figures.py").
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EX = "handlers_examples"
JPEG_MAGIC = b"\xff\xd8\xff"
START_TIMEOUT = 90.0
WARMUP = 50

# name -> (serve args, predict path, request body file)
SERVE_EXAMPLES: dict[str, tuple[list[str], str, str]] = {
    "json_tax": (["--project", f"{EX}/json_tax", "--handler", "main:handler"], "/", f"{EX}/json_tax/request.json"),
    "iris_onnx": (["--project", f"{EX}/iris_onnx"], "/iris", f"{EX}/iris_onnx/sample.json"),
    "tf_savedmodel": (["--project", f"{EX}/tf_savedmodel"], "/iris-tf", f"{EX}/tf_savedmodel/sample.json"),
}

WRK_LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = %s
"""


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return e


def localserve_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "localserve", *args]


def shown(cmd: list[str]) -> str:
    """The command line as it can be pasted from the repository root."""
    return f"PYTHONPATH={shlex.quote(str(ROOT))} " + shlex.join(cmd)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load() -> str:
    """Other work on the machine shows directly in the figures; above ~0.5 before a section, treat it as noisy."""
    one, five, _ = os.getloadavg()
    return f"(load average now {one:.2f}, 5-min {five:.2f})"


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def fmt_list(xs: list[float], unit: str = "s", scale: float = 1.0, digits: int = 2) -> str:
    return "[" + ", ".join(f"{x * scale:.{digits}f}" for x in xs) + f"] {unit}"


def request(port: int, method: str, path: str, body: bytes | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body, headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class Server:
    """`localserve serve` in its own session on a free port; stop() kills the whole process group."""

    def __init__(self, args: list[str], log_dir: Path) -> None:
        self.port = free_port()
        self.cmd = localserve_cmd("serve", *args, "--no-install", "--port", str(self.port))
        self.log_path = log_dir / f"serve-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def start(self) -> Server:
        with self.log_path.open("wb") as log:
            self.started_at = time.perf_counter()
            self.proc = subprocess.Popen(
                self.cmd, cwd=ROOT, env=env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def _poll(self, attempt: Callable[[], bool], what: str) -> float:
        assert self.proc is not None
        while time.perf_counter() - self.started_at < START_TIMEOUT:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} before {what}: {self.log_tail()}")
            try:
                if attempt():
                    return time.perf_counter() - self.started_at
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError(f"no {what} within {START_TIMEOUT:.0f} s: {self.log_tail()}")

    def wait_ready(self) -> float:
        """Seconds from process start to the first 200 on GET /readyz."""
        return self._poll(lambda: request(self.port, "GET", "/readyz", timeout=2.0)[0] == 200, "200 on /readyz")

    def wait_predict(self, path: str, body: bytes) -> float:
        """Seconds from process start to the first 200 on a real predict POST."""
        return self._poll(lambda: request(self.port, "POST", path, body, timeout=10.0)[0] == 200, f"200 on {path}")

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-n:]) or "(empty log)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------------------------------


def one_shot(runs: int, tmp: Path) -> None:
    print("\n## 1. One-shot run (`localserve run`, subprocess, stdout to a file)")
    cmd = localserve_cmd(
        "run",
        "--project",
        f"{EX}/image_flip",
        "--handler",
        "main:handler",
        "--input",
        f"{EX}/image_flip/cat.jpg",
        "--quiet",
        "--no-install",
    )
    out = tmp / "flipped.jpg"
    print(f"$ {shown(cmd)} > {out}    (x{runs})")
    times = []
    for _ in range(runs):
        with out.open("wb") as f:
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, env=env(), stdout=f, stderr=subprocess.PIPE)
            times.append(time.perf_counter() - t0)
        data = out.read_bytes()
        if proc.returncode != 0 or not data.startswith(JPEG_MAGIC):
            raise RuntimeError(f"run failed (rc={proc.returncode}, {len(data)} bytes): {proc.stderr.decode()[-500:]}")
    print(f"output: {len(data)} bytes, starts with JPEG magic ff d8 ff: yes")
    print(f"wall time: median {median(times):.2f} s   runs {fmt_list(times)}")


def start_to_ready(runs: int, tmp: Path) -> None:
    print("\n## 2. Start to ready (`localserve serve`, process start -> first 200)")
    print("Each run: one fresh process; /readyz polled every 5 ms, then the example's body POSTed until a 200.")
    rows = []
    for name, (args, path, body_file) in SERVE_EXAMPLES.items():
        body = (ROOT / body_file).read_bytes()
        ready, predict = [], []
        for _ in range(runs):
            with Server(args + ["--log-level", "warning"], tmp) as srv:
                print(f"$ {shown(srv.cmd)}")
                ready.append(srv.wait_ready())
                predict.append(srv.wait_predict(path, body))
        rows.append((name, path, body_file, ready, predict))
    print()
    print(f"{'example':<15} {'predict':<18} {'ready p50':>10} {'1st 200 p50':>12}   runs (ready / first predict)")
    for name, path, _, ready, predict in rows:
        post = f"POST {path}"
        print(
            f"{name:<15} {post:<18} {median(ready):>8.2f} s {median(predict):>10.2f} s   "
            f"{fmt_list(ready)} / {fmt_list(predict)}"
        )
    print(f"(bodies: {', '.join(r[2] for r in rows)})")


def sequential_latency(port: int, path: str, body: bytes, n: int) -> list[float]:
    import httpx

    lat = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Content-Type": "application/json"}) as client:
        for i in range(WARMUP + n):
            t0 = time.perf_counter()
            r = client.post(path, content=body)
            dt = time.perf_counter() - t0
            if r.status_code != 200:
                raise RuntimeError(f"POST {path}: {r.status_code} {r.text[:200]}")
            if i >= WARMUP:
                lat.append(dt)
    return lat


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to a temporary file (native libraries write there); replay it on an exception."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            f.seek(0)
            sys.stderr.write(f.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def time_calls(fn: Callable[[], object], calls: int, warmup: int = 100) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def raw_iris() -> tuple[str, list[float]]:
    import numpy as np
    import onnxruntime

    sess = onnxruntime.InferenceSession(str(ROOT / EX / "iris_onnx/iris.onnx"))
    sample = json.loads((ROOT / EX / "iris_onnx/sample.json").read_text())
    x = np.array([[sample[k] for k in ("sepal_length", "sepal_width", "petal_length", "petal_width")]], np.float32)
    desc = (
        f'onnxruntime.InferenceSession("{EX}/iris_onnx/iris.onnx").run(None, {{"input": x}}), x float32 {list(x.shape)}'
    )
    return desc, time_calls(lambda: sess.run(None, {"input": x}), 5000)


def raw_tf() -> tuple[str, list[float]]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    with quiet_stderr():  # TensorFlow's absl/oneDNN banner lines; shown if the load fails
        import tensorflow as tf

        model = tf.saved_model.load(str(ROOT / EX / "tf_savedmodel/iris_savedmodel"))
    fn = model.signatures["serving_default"]
    sample = json.loads((ROOT / EX / "tf_savedmodel/sample.json").read_text())
    x = np.array([[sample[k] for k in ("sepal_length", "sepal_width", "petal_length", "petal_width")]], np.float32)
    desc = (
        f'tf.saved_model.load("{EX}/tf_savedmodel/iris_savedmodel").signatures["serving_default"](measurements=x), '
        f"x float32 {list(x.shape)}"
    )
    return desc, time_calls(lambda: fn(measurements=x), 2000)


def serving_overhead(n: int, tmp: Path) -> str:
    """Section 3; returns the verbatim `localserve get` output taken against the iris server (section 5)."""
    print(
        f"\n## 3. Serving overhead, single sequential requests ({WARMUP} warm-up + {n} measured, one keep-alive httpx.Client)"
    )
    get_out = ""
    results = []
    for name, raw in (("iris_onnx", raw_iris), ("tf_savedmodel", raw_tf)):
        args, path, body_file = SERVE_EXAMPLES[name]
        body = (ROOT / body_file).read_bytes()
        with Server(args + ["--log-level", "warning"], tmp) as srv:
            print(f"$ {shown(srv.cmd)}")
            srv.wait_ready()
            lat = sequential_latency(srv.port, path, body, n)
            if name == "iris_onnx":
                get_cmd = localserve_cmd("get", "--url", f"http://127.0.0.1:{srv.port}")
                proc = subprocess.run(get_cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=30)
                get_out = f"$ {shown(get_cmd)}\n" + proc.stdout + (proc.stderr if proc.returncode else "")
        # in-process call of the same model, after the server is gone (no competition for the 2 cores)
        desc, raw_us = raw()
        results.append((name, f"POST {path} {body_file}", lat, desc, raw_us))
    print()
    print(
        f"{'example':<15} {'http p50 ms':>11} {'http p99 ms':>11} {'raw p50 µs':>10} {'raw p99 µs':>10} {'p50 ratio':>9}"
    )
    for name, _, lat, _, raw_us in results:
        ratio = median(lat) * 1e6 / median(raw_us)
        print(
            f"{name:<15} {median(lat) * 1e3:>11.3f} {pct(lat, 99) * 1e3:>11.3f} "
            f"{median(raw_us):>10.1f} {pct(raw_us, 99):>10.1f} {ratio:>8.0f}x"
        )
    for name, req, _, desc, raw_us in results:
        print(f"  {name}: http = {req}; raw = {desc}, p50 of {len(raw_us)} calls")
    return get_out


def run_wrk(port: int, path: str, lua: Path, duration: int) -> tuple[float, int, str]:
    cmd = ["wrk", "-t1", "-c8", f"-d{duration}s", "-s", str(lua), f"http://127.0.0.1:{port}{path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30)
    m = re.search(r"Requests/sec:\s*([\d.]+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stdout[-300:]} {proc.stderr[-300:]}")
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", proc.stdout)
    return float(m.group(1)), int(bad.group(1)) if bad else 0, shlex.join(cmd)


def metrics_cost(tmp: Path, rounds: int = 3, duration: int = 5) -> None:
    print(f"\n## 4. Metrics cost (iris_onnx, wrk -t1 -c8 -d{duration}s, {rounds} alternating rounds each)")
    if not shutil.which("wrk"):
        print("wrk not found: skipped")
        return
    args, path, body_file = SERVE_EXAMPLES["iris_onnx"]
    body = (ROOT / body_file).read_text().strip()
    lua = tmp / "post.lua"
    lua.write_text(WRK_LUA % json.dumps(body))
    print(f"wrk script {lua}: POST with Content-Type: application/json and the body of {body_file}")
    servers = {
        "metrics on": Server(args + ["--no-access-log"], tmp),
        "--no-metrics": Server(args + ["--no-access-log", "--no-metrics"], tmp),
    }
    rps: dict[str, list[float]] = {k: [] for k in servers}
    try:
        for label, srv in servers.items():
            srv.start()
            print(f"$ {shown(srv.cmd)}    ({label})")
        for srv in servers.values():
            srv.wait_ready()
            srv.wait_predict(path, body.encode())
        wrk_cmds = {}
        for _ in range(rounds):
            for label, srv in servers.items():
                r, bad, cmd = run_wrk(srv.port, path, lua, duration)
                if bad:
                    raise RuntimeError(f"{label}: {bad} non-2xx responses")
                rps[label].append(r)
                wrk_cmds[label] = cmd
        for label, cmd in wrk_cmds.items():
            print(f"$ {cmd}    ({label}; port of its server)")
    finally:
        for srv in servers.values():
            srv.stop()
    on, off = median(rps["metrics on"]), median(rps["--no-metrics"])
    print()
    for label, xs in rps.items():
        print(f"{label:<13} median {median(xs):>8.0f} req/s   rounds {fmt_list(xs, 'req/s', digits=0)}")
    print(f"metrics on / --no-metrics = {on / off:.3f}  (metrics cost {100 * (1 - on / off):+.1f}% of throughput)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs per one-shot and start-up figure (default 5)")
    parser.add_argument("--requests", type=int, default=300, help="measured sequential requests (default 300)")
    parser.add_argument(
        "--metrics-rounds", type=int, default=3, help="alternating rounds of the metrics-cost A/B (default 3)"
    )
    parser.add_argument(
        "--only", choices=["metrics"], help="run one section only: 'metrics' (the metrics-cost A/B of section 4)"
    )
    opts = parser.parse_args()
    if opts.runs < 1 or opts.requests < 1:
        parser.error("--runs and --requests must be at least 1")

    t_start = time.perf_counter()
    print("# localserve figures (medians; times vary 25-50% run to run on a small machine)")
    print(
        f"checkout {ROOT}, python {sys.version.split()[0]}, {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.2f}"
    )
    print(f"all commands run from {ROOT}")
    with tempfile.TemporaryDirectory(prefix="localserve-figures-") as tmp_s:
        tmp = Path(tmp_s)
        if opts.only == "metrics":
            metrics_cost(tmp, rounds=opts.metrics_rounds)
            print(f"\ntotal {time.perf_counter() - t_start:.0f} s, load avg {os.getloadavg()[0]:.2f}")
            return 0
        one_shot(opts.runs, tmp)
        print(load())
        start_to_ready(opts.runs, tmp)
        print(load())
        get_out = serving_overhead(opts.requests, tmp)
        print(load())
        metrics_cost(tmp, rounds=opts.metrics_rounds)
        print(load())
        print(
            f"\n## 5. `localserve get` against the iris_onnx server of section 3 (after {WARMUP} + {opts.requests} requests)"
        )
        print(get_out.rstrip())
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s, load avg {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
