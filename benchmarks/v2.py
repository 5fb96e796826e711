"""The MLP over the Open Inference Protocol (gRPC raw contents, REST binary and JSON tensors) and the native
route, in one run.

    python benchmarks/v2.py [--duration 5] [--concurrency 64] [--rounds 2] [--loadgen wrk|python] [--perf-analyzer]

One localserve server (one replica, the MLP as a raw model with dynamic batching, gRPC on a second
port) answers all four routes; each is loaded in turn at the same concurrency (rounds alternate the
order), after a warm-up: the HTTP routes with the same load generator, gRPC with its own
(``grpc_load.py``: grpc.aio, the message serialized once). One sample a request: 256 FP32 features
in, 10 out. Prints req/s, p50/p99, the server's CPU a request and the mean batch (rows per model call, from
``localserve_batch_size``) per route, and the ratios to V2 JSON; ``--threads`` adds each server thread's CPU a
request. Asserts no time.

A fifth row, ``grpc-floor``, is a bare ``grpc.aio`` server on uvloop answering a constant message
(``apps/grpc_floor.py``), loaded the same way: what ``grpcio`` itself costs a call, the ceiling of a
gRPC front door built on it. Its server CPU per request against V2 binary's (which includes the
model) says whether gRPC can be the fastest route on this machine at all.

``--perf-analyzer`` adds three rows loaded by NVIDIA's perf_analyzer, one C++ client for gRPC (raw
contents), REST binary and REST JSON tensors (``pa_load.py``), so that the transports are compared
without the Python gRPC client's own cost on the same two cores.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import loadgen
from grpc_load import model_infer_message, run_grpc
from onnx_models import build_mlp
from pa_load import ROWS, launcher, run_perf_analyzer
from procs import ServerProcess, free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONFIG = """\
- kind: api
  name: mlp
  model: mlp.onnx
  batching: {{max_batch_size: {batch}, batch_interval: {interval}}}
"""


def bodies(features: list[float], input_name: str) -> dict[str, tuple[bytes, dict[str, str], str]]:
    """route -> (body, extra headers, content type) for one sample of the MLP."""
    tensor = {"name": input_name, "shape": [1, len(features)], "datatype": "FP32"}
    as_json = {"inputs": [{**tensor, "data": features}], "outputs": [{"name": "output"}]}
    header = json.dumps(
        {
            "inputs": [{**tensor, "parameters": {"binary_data_size": 4 * len(features)}}],
            "outputs": [{"name": "output", "parameters": {"binary_data": True}}],
        }
    ).encode()
    binary = header + struct.pack(f"<{len(features)}f", *features)
    return {
        "v2-binary": (binary, {"Inference-Header-Content-Length": str(len(header))}, "application/octet-stream"),
        "v2-json": (json.dumps(as_json).encode(), {}, "application/json"),
        "native": (json.dumps({input_name: [features]}).encode(), {}, "application/json"),
    }


PATHS = {"v2-binary": "/v2/models/mlp/infer", "v2-json": "/v2/models/mlp/infer", "native": "/mlp"}
GRPC = "grpc-raw"  # ModelInfer with raw_input_contents, on the --grpc-port
FLOOR = "grpc-floor"  # the same message to a bare grpc.aio server (apps/grpc_floor.py)


def load(args: argparse.Namespace, port: int, route: str, body: tuple[bytes, dict[str, str], str], seconds: float):
    data, headers, content_type = body
    if route in ROWS:
        protocol, tensors = ROWS[route]
        url = f"127.0.0.1:{args.grpc_port if protocol == 'grpc' else port}"
        shapes = {"input": [256]}
        return run_perf_analyzer(args.pa, "mlp", url, protocol, tensors, args.concurrency, seconds, shapes)
    if route in (GRPC, FLOOR):
        return run_grpc(args.grpc_port if route == GRPC else args.floor_port, data, args.concurrency, seconds)
    if args.loadgen == "wrk":
        return loadgen.run_wrk(
            port, PATHS[route], data, args.concurrency, seconds, args.wrk_threads, content_type, headers
        )
    return loadgen.run_python(port, PATHS[route], data, args.concurrency, seconds, content_type, 1, headers)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its descendants so far (Linux /proc)."""
    from procs import _children

    children = _children()
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def thread_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """Thread id -> (its name, user + system CPU seconds so far) of process ``pid`` (Linux /proc)."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
        threads[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return threads


def batch_figures(port: int) -> tuple[float, float]:
    """The sum and count of ``localserve_batch_size`` (rows per model call) so far, from /metrics."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        page = conn.getresponse().read().decode()
    finally:
        conn.close()
    figures = {"sum": 0.0, "count": 0.0}
    for line in page.splitlines():
        for key in figures:
            if line.startswith(f"localserve_batch_size_{key}{{"):
                figures[key] += float(line.rsplit(" ", 1)[1])
    return figures["sum"], figures["count"]


def check(port: int, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body, headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def check_routes(args: argparse.Namespace, port: int, routes: dict[str, tuple[bytes, dict[str, str], str]]) -> None:
    """Every route answers 200 before the load."""
    for route, (data, headers, content_type) in routes.items():
        if route in ROWS:
            continue  # perf_analyzer checks its own answers
        if route in (GRPC, FLOOR):
            result = run_grpc(args.grpc_port if route == GRPC else args.floor_port, data, 1, 0.2)
            if result.non2xx or result.errors or not result.requests:
                raise RuntimeError(f"{route}: {result}")
            continue
        status, answer = check(port, PATHS[route], data, {"Content-Type": content_type, **headers})
        if status != 200:
            raise RuntimeError(f"{route}: {status} {answer[:300]!r}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of load per route and round")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1, help="each round loads every route once, order alternating")
    parser.add_argument("--loadgen", choices=["wrk", "python"], default="wrk" if loadgen.wrk_available() else "python")
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="the MLP's max_batch_size")
    parser.add_argument("--interval", default="2ms", help="the MLP's batch_interval")
    parser.add_argument(
        "--serve-args", default="", help="more `localserve serve` flags, e.g. --serve-args=--pin-threads"
    )
    parser.add_argument("--perf-analyzer", action="store_true", help="add rows loaded by perf_analyzer (pa_load.py)")
    parser.add_argument("--threads", action="store_true", help="print each server thread's CPU a request, per route")
    args = parser.parse_args(argv)
    args.pa = launcher() if args.perf_analyzer else None
    if args.perf_analyzer and args.pa is None:
        parser.error("scripts/perf_analyzer.sh could not install perf_analyzer")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        model = build_mlp(project)
        (project / "cortex.yaml").write_text(CONFIG.format(batch=args.batch, interval=args.interval))
        features = json.loads(model.body)["input"]
        message = model_infer_message("mlp", "input", features)
        routes = {GRPC: (message, {}, ""), **bodies(features, "input"), FLOOR: (message, {}, "")}
        if args.pa:
            routes.update(dict.fromkeys(ROWS, (b"", {}, "")))
        port = free_port()
        args.grpc_port, args.floor_port = other_ports(port, 2)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [
            sys.executable,
            "-m",
            "localserve",
            "serve",
            "--no-install",
            "--port",
            str(port),
            "--grpc-port",
            str(args.grpc_port),
            "--log-level",
            "warning",
        ]
        cmd += ["--no-access-log", *shlex.split(args.serve_args)]
        server = ServerProcess(cmd, port, project / "serve.log", env=env, cwd=project)
        floor_cmd = [sys.executable, str(HERE / "apps" / "grpc_floor.py"), "--port", str(args.floor_port)]
        floor = subprocess.Popen(floor_cmd, stdout=subprocess.PIPE, env=env, start_new_session=True)
        server.start()
        try:
            assert floor.stdout is not None
            if floor.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"the gRPC floor server did not start (exit code {floor.wait()})")
            server.wait_ready("/mlp", routes["native"][0], timeout=120)
            check_routes(args, port, routes)
            results: dict[str, list] = {route: [] for route in routes}
            for round_index in range(args.rounds):
                order = list(routes) if round_index % 2 == 0 else list(reversed(routes))
                for route in order:
                    if route not in ROWS:  # perf_analyzer warms up itself
                        load(args, port, route, routes[route], args.warmup)
                    assert server.proc is not None
                    pid = floor.pid if route == FLOOR else server.proc.pid
                    before, rows_before, threads = cpu_seconds(pid), batch_figures(port), thread_seconds(pid)
                    result = load(args, port, route, routes[route], args.duration)
                    used = cpu_seconds(pid) - before
                    if args.threads:
                        print_threads(route, pid, threads, thread_seconds(pid), result.requests)
                    rows, calls = (b - a for a, b in zip(rows_before, batch_figures(port), strict=True))
                    # perf_analyzer's own start and windows are not its requests: no CPU per request for it
                    per_request = None if route in ROWS else 1000 * used / max(1, result.requests)
                    mean_batch = None if route == FLOOR or not calls else rows / calls
                    results[route].append((result, per_request, mean_batch))
        finally:
            server.stop()
            floor.kill()
            floor.wait()
    report(args, results)


def print_threads(
    route: str, pid: int, before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], requests: int
) -> None:
    """Each thread's CPU a request (µs) over one load, busiest first; the process's own thread is the event loop."""
    used = [(after[tid][1] - before.get(tid, ("", 0.0))[1], tid, after[tid][0]) for tid in after]
    shown = [
        f"{'loop' if tid == pid else f'{name}/{tid - pid}'} {1e6 * seconds / max(1, requests):.0f}"
        for seconds, tid, name in sorted(used, reverse=True)
        if seconds > 0
    ]
    print(f"{route} threads, µs a request: {', '.join(shown)}", flush=True)


def other_ports(taken: int, count: int) -> list[int]:
    """``count`` free ports, distinct from each other and from ``taken``."""
    ports: list[int] = []
    while len(ports) < count:
        if (candidate := free_port()) != taken and candidate not in ports:
            ports.append(candidate)
    return ports


def report(args: argparse.Namespace, results: dict[str, list]) -> None:
    """The table (the median round of each route) and the ratios."""
    print(
        f"MLP 256-1024-1024-10, one sample a request, concurrency {args.concurrency}, {args.duration:g} s x "
        f"{args.rounds} round(s), loadgen {args.loadgen} (gRPC: grpc.aio), batching max {args.batch} / {args.interval}, "
        "one replica"
    )
    print(
        f"{'route':<10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'errors':>7} {'server CPU ms/req':>18} "
        f"{'mean batch':>10}"
    )
    rps: dict[str, float] = {}
    cpus: dict[str, float | None] = {}
    for route, runs in results.items():
        best, cpu, batch = sorted(runs, key=lambda r: r[0].rps)[len(runs) // 2]  # the median round
        rps[route], cpus[route] = best.rps, cpu
        shown = "-" if cpu is None else f"{cpu:.3f}"
        rows = "-" if batch is None else f"{batch:.1f}"
        print(
            f"{route:<10} {best.rps:>9.0f} {best.p50_ms:>8.2f} {best.p99_ms:>8.2f} {best.non2xx:>8} {best.errors:>7} "
            f"{shown:>18} {rows:>10}"
        )
    if rps["v2-json"]:
        print(f"V2 binary / V2 JSON throughput: {rps['v2-binary'] / rps['v2-json']:.2f}x")
        print(
            f"gRPC raw / V2 JSON throughput: {rps[GRPC] / rps['v2-json']:.2f}x; gRPC raw / V2 binary: "
            f"{rps[GRPC] / rps['v2-binary']:.2f}x; gRPC raw / native: {rps[GRPC] / rps['native']:.2f}x"
        )
    floor_cpu, binary_cpu = cpus[FLOOR], cpus["v2-binary"]
    assert floor_cpu is not None and binary_cpu is not None  # loaded by this script, not perf_analyzer
    print(
        f"gRPC raw / gRPC floor: {rps[GRPC] / rps[FLOOR]:.2f}x; the floor (grpcio alone, no model) / V2 binary: "
        f"{rps[FLOOR] / rps['v2-binary']:.2f}x throughput, {floor_cpu / binary_cpu:.2f}x server CPU a request"
    )
    if args.pa:
        print(
            f"perf_analyzer, gRPC / REST binary: {rps['pa-grpc'] / rps['pa-binary']:.2f}x; gRPC / REST JSON: "
            f"{rps['pa-grpc'] / rps['pa-json']:.2f}x"
        )


if __name__ == "__main__":
    main()
