"""The benchmark harness runs end to end on a tiny duration and prints its table (no time is asserted)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from image_report import format_images  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["wrk", "python"])
def test_harness_prints_rows_for_raw_and_starlette(generator: str, tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    if generator == "wrk" and shutil.which("wrk") is None:
        pytest.skip("wrk is not installed")
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--duration", "0.3", "--only", "iris"]
    servers = "raw,starlette" + (",starlette-thread" if generator == "wrk" else "")  # the thread: one run is enough
    cmd += ["--concurrency", "1", "--servers", servers, "--loadgen", generator, "--out", str(out)]
    cmd += ["--threads"] if generator == "wrk" else []

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)

    assert proc.returncode == 0, proc.stderr
    assert "== iris ==" in proc.stdout
    assert re.search(r"^raw session\.run, in-process: batch 1: [\d,]+ calls/s", proc.stdout, re.M), proc.stdout
    # req/s, p50, p99, p99.9, 0 non-2xx, 0 errors, x floor (not run), x starlette, x thread, x litserve (not run)
    thread = r"[\d.]+" if generator == "wrk" else "-"
    row = rf"^starlette\s+1\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0\s+0\s+-\s+1\.00\s+{thread}\s+-$"
    assert re.search(row, proc.stdout, re.M), proc.stdout
    if generator == "wrk":  # per-thread CPU: the inline app's loop (its main thread) did the work
        line = re.search(r"^starlette c=1 CPU us a request: (.*)$", proc.stdout, re.M)
        assert line is not None and "main " in line.group(1), proc.stdout
        assert re.search(r"^starlette-thread c=1 CPU us a request: .*thread \d+ ", proc.stdout, re.M), proc.stdout
    if generator == "wrk":  # the same work on one worker thread answers as the inline app does
        row = r"^starlette-thread\s+1\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0\s+0\s+-\s+[\d.]+\s+1\.00\s+-$"
        assert re.search(row, proc.stdout, re.M), proc.stdout
    assert re.search(r"^starlette\s+[\d.]+\s+\d+\s+\d+\s+1\s*$", proc.stdout, re.M), proc.stdout
    results = json.loads(out.read_text())
    iris = results["models"]["iris"]
    assert [r["batch"] for r in iris["raw"]] == [1, 32]
    (cell,) = iris["servers"]["starlette"]["cells"]
    assert cell["concurrency"] == 1
    assert cell["requests"] > 0
    assert cell["non2xx"] == 0
    assert cell["p999_ms"] >= cell["p99_ms"] > 0


# A smoke of the harness: the two servers its ratio line compares (the others are the same plumbing).
GPU_SERVERS = ["localserve", "localserve-batched"]


@pytest.mark.slow
def test_gpu_workload_runs_on_cpu_with_the_tiny_model(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("PIL")
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "images.py"), "gpu", "--device", "cpu", "--model", "tinynet"]
    cmd += [
        "--duration",
        "0.3",
        "--warmup",
        "0.1",
        "--concurrency",
        "4",  # one cell per server: a smoke of the harness (the figures are the benchmark's, never the test's)
        "--servers",
        ",".join(["raw", *GPU_SERVERS]),
    ]
    cmd += ["--out", str(out)]

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=ROOT)

    assert proc.returncode == 0, proc.stderr
    assert "localserve image benchmark 'gpu': model tinynet on cpu" in proc.stdout
    assert re.search(
        r"^raw session\.run, in-process: batch 1: .* \| batch 32: .* \| preprocess on one thread: ", proc.stdout, re.M
    )
    results = json.loads(out.read_text())
    assert list(results["servers"]) == GPU_SERVERS
    for server in GPU_SERVERS:
        data = results["servers"][server]
        assert data["notes"] == [], (server, data)  # every answer was {"top5": [5 class ids]}
        assert [c["concurrency"] for c in data["cells"]] == [4], server
        assert all(c["requests"] > 0 and c["non2xx"] == 0 and c["errors"] == 0 for c in data["cells"]), data
        # req/s, p50, p99, 0 non-2xx, 0 errors, then three ratios ("-" where their baseline server is not run)
        row = rf"^{server}\s+4\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+0\s+0(\s+([\d.]+|-)){{3}}$"
        assert re.search(row, proc.stdout, re.M), (server, proc.stdout)
    assert re.search(r"^localserve-batched / localserve \(req/s\): c=4 [\d.]+x$", proc.stdout, re.M)
    assert "targets (ResNet-50 on one H100; this run: tinynet on cpu):\n  localserve-batched c=128: not measured\n" in (
        proc.stdout
    )
    assert re.search(
        r"^  batching never slower than none \(localserve-batched >= localserve\): (met|NOT met at c=4)$",
        proc.stdout,
        re.M,
    )


def _cell(concurrency: int, rps: float, non2xx: int = 0) -> dict:
    return {"concurrency": concurrency, "rps": rps, "p50_ms": 1.0, "p99_ms": 2.0, "non2xx": non2xx, "errors": 0}


def test_a_row_with_non_2xx_answers_has_no_ratios_and_none_against_it() -> None:
    """Seen on an H100: one replica's default queue (100) answered c=128's excess 503 at once, and those
    quick 503s counted as 16,326 req/s, which made batching look 0.19x as fast as none."""
    meta = {
        "workload": "gpu", "device": "cuda", "model": "resnet50", "duration_s": 3.0, "loadgen": "python",
        "loadgen_processes": 8, "cpus": 16, "rounds": 1, "loadavg_start": [0.5], "loadavg_end": [4.1],
        "peers": ["localserve"], "headlines": [["localserve-batched", "localserve"]],
    }  # fmt: skip
    servers = {
        "localserve": {"cells": [_cell(1, 300.0), _cell(128, 16326.0, non2xx=53497)]},
        "localserve-batched": {"cells": [_cell(1, 330.0), _cell(128, 3113.0)]},
    }

    text = format_images({"meta": meta, "servers": servers})

    assert re.search(r"^localserve\s+128\s+16,326\s+1\.00\s+2\.00\s+53497\s+0\s+-\s+-$", text, re.M), text
    assert re.search(r"^localserve-batched\s+128\s+3,113\s+1\.00\s+2\.00\s+0\s+0\s+-\s+-$", text, re.M), text
    assert "localserve-batched / localserve (req/s): c=1 1.10x, c=128 -\n" in text
    assert "batching never slower than none (localserve-batched >= localserve): met" in text
    servers["localserve"]["cells"][1] = _cell(128, 3200.0)
    servers["localserve-batched"]["cells"][1] = _cell(128, 9000.0, non2xx=10)  # its 503s never count as faster
    text = format_images({"meta": meta, "servers": servers})
    assert "batching never slower than none (localserve-batched >= localserve): NOT met at c=128" in text
    assert "localserve-batched c=128 >= 2,800 req/s with p99 <= 100 ms: 9,000 req/s, p99 2.0 ms: NOT met" in text


def test_run_report_gives_the_goal_ratios_and_the_baseline_s() -> None:
    from report import format_model

    servers = {
        "floor": {"cells": [_cell(1, 5000.0), _cell(64, 10000.0)]},
        "starlette-thread": {"cells": [_cell(1, 2000.0), _cell(64, 4000.0)]},
        "localserve": {"cells": [_cell(1, 2100.0), _cell(64, 8000.0)]},
        "localserve@base": {"cells": [_cell(1, 2000.0), _cell(64, 8000.0, non2xx=3)]},
        "localserve-batched": {"cells": [_cell(1, 1995.0), _cell(64, 9000.0)]},
    }

    text = format_model("iris", {"servers": servers})

    assert "localserve / starlette-thread (req/s): c=1 1.05x, c=64 2.00x\n" in text
    assert "localserve-batched / localserve (req/s): c=1 0.95x, c=64 1.12x\n" in text
    assert "localserve-batched / floor (req/s): c=1 0.40x, c=64 0.90x\n" in text
    assert "localserve / localserve@base (req/s): c=1 1.05x\n" in text  # its c=64 had 503s: no ratio
    assert "localserve / starlette (req/s)" not in text  # the inline app did not run
    assert re.search(r"^localserve@base\s+1\s+2,000\s", text, re.M), text


@pytest.mark.slow
def test_pipeline_workload_prints_the_threads_ratio(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("PIL")
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "images.py"),
        "pipeline",
        "--duration",
        "0.3",
        "--concurrency",
        "2",
    ]
    cmd += ["--loadgen", "python", "--loadgen-processes", "2"]  # the JPEG body, and latencies merged over processes

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)

    assert proc.returncode == 0, proc.stderr
    assert "localserve image benchmark 'pipeline': model tinynet on cpu" in proc.stdout
    assert "load generator python x2" in proc.stdout
    for server in ("localserve-t1", "localserve-t2"):
        assert re.search(rf"^{server}\s+2\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+0\s+0\s+[\d.]+\s+-$", proc.stdout, re.M), (
            proc.stdout
        )
    assert re.search(r"^localserve-t2 / localserve-t1 \(req/s\): c=2 [\d.]+x$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^localserve-t2\s+localserve serve, batching 8 / 2 ms, threads_per_process 2$", proc.stdout, re.M)


@pytest.mark.slow
def test_asyncapi_benchmark_prints_its_figures() -> None:
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "asyncapi.py"),
        "--duration",
        "0.3",
        "--idle",
        "2",
        "--stores",
        "sqlite",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert re.search(
        r"^sqlite  submit +[\d,]+ jobs/s accepted \(p50 [\d.]+ ms, 0 refused, 16 connections, \d+ s\)   "
        r"idle job latency: median +[\d.]+ ms, p90 +[\d.]+ ms \(to the stored timestamp\); median +[\d.]+ ms to the "
        r"first poll that saw it$",
        proc.stdout,
        re.M,
    ), proc.stdout


@pytest.mark.slow
def test_v2_benchmark_prints_every_route_the_grpc_floor_and_the_ratios() -> None:
    """benchmarks/v2.py: every route answered 200 throughout (the V2 binary header travels with the load).

    One smoke, with the python load generator (always there); wrk's path through the shared harness
    is the run.py test's."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "v2.py"), "--duration", "0.3", "--warmup", "0.1"]
    cmd += ["--concurrency", "4", "--loadgen", "python"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT / "benchmarks")
    assert proc.returncode == 0, proc.stderr
    for route in ("grpc-raw", "v2-binary", "v2-json", "native", "grpc-floor"):
        # req/s, p50, p99, then 0 non-2xx and 0 errors, then server CPU per request and the mean batch (no model: -)
        batch = "-" if route == "grpc-floor" else r"[\d.]+"
        row = rf"^{route}\s+\d+\s+[\d.]+\s+[\d.]+\s+0\s+0\s+[\d.]+\s+{batch}$"
        assert re.search(row, proc.stdout, re.M), proc.stdout
    assert re.search(r"^V2 binary / V2 JSON throughput: [\d.]+x$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^gRPC raw / V2 JSON throughput: [\d.]+x; gRPC raw / V2 binary: [\d.]+x; ", proc.stdout, re.M)
    assert re.search(r"^gRPC raw / gRPC floor: [\d.]+x; the floor .* [\d.]+x server CPU a request$", proc.stdout, re.M)


@pytest.mark.slow
def test_reload_benchmark_prints_the_reload_and_restart_times() -> None:
    """benchmarks/reload.py: one save of the iris example reloaded, and one restart (TensorFlow's case is the
    same plumbing with a slower start)."""
    pytest.importorskip("onnxruntime")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "reload.py"), "--rounds", "1", "--only", "iris"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert re.search(
        r"^iris ONNX \(handlers_examples/iris_onnx\): save -> new code answering [\d,]+ ms \(min [\d,]+, max [\d,]+; "
        r"the server's reload [\d,]+ ms\); restart -> first answer [\d,]+ ms; reload / restart [\d.]+x$",
        proc.stdout,
        re.M,
    ), proc.stdout


@pytest.mark.slow
def test_coldstart_benchmark_prints_each_servers_median_and_its_ratio_to_the_floor() -> None:
    """benchmarks/coldstart.py: the floor and localserve started once each on the iris model."""
    pytest.importorskip("onnxruntime")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "coldstart.py"), "--rounds", "1", "--only", "iris"]
    proc = subprocess.run(
        [*cmd, "--servers", "floor,localserve"], capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("floor", "localserve"):
        line = rf"^iris  {name} +median [\d.]+ s  [\d.]+x floor, CPU [\d.]+ s   \([\d.]+\)$"
        assert re.search(line, proc.stdout, re.M), proc.stdout


@pytest.mark.slow
def test_multimodel_benchmark_prints_uncached_against_cached() -> None:
    """benchmarks/multimodel.py: the first request of a model not in memory against one in memory."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "multimodel.py"), "--rounds", "2", "--model", "iris"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT / "benchmarks")
    assert proc.returncode == 0, proc.stderr
    for label in ("uncached model, first request", "cached model"):
        assert re.search(rf"^{label} +median +[\d.]+ ms, p90 +[\d.]+ ms$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^uncached / cached \(median\): [\d.]+x$", proc.stdout, re.M), proc.stdout


@pytest.mark.slow
def test_hostile_benchmark_prints_healthz_and_rss_for_each_phase() -> None:
    """benchmarks/hostile.py: the trailer and repeated-output attacks, briefly, against this checkout."""
    pytest.importorskip("onnxruntime")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "hostile.py"), "--seconds", "0.5", "--attacks", "trailer,outputs"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    phases = ["idle", "attack", "after"]
    assert list(results) == [f"{attack}: {phase}" for attack in ("trailer", "outputs") for phase in phases]
    for figures in results.values():
        assert set(figures) == {"healthz_p50_ms", "healthz_max_ms", "healthz_slow_s", "rss_max_mb", "rss_end_mb"}
        assert figures["rss_max_mb"] > 0 and figures["healthz_p50_ms"] == figures["healthz_p50_ms"]  # answered: no NaN


@pytest.mark.slow
def test_phases_prints_the_server_side_phases_of_localserve() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("PIL")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "phases.py"), "--device", "cpu", "--model", "tinynet"]
    cmd += ["--servers", "localserve", "--duration", "0.3"]

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("tinynet on cpu, c=1, 0.3 s; means in us\n"), proc.stdout
    number = r"[\d,]+"
    row = rf"^localserve\s+{number} req/s  client p50\s+{number}  duration {number}" + "".join(
        rf"  {phase} {number}" for phase in ("queue", "prepare", "model", "finish")
    )
    assert re.search(row + "$", proc.stdout, re.M), proc.stdout


@pytest.mark.slow
def test_hotpath_timeline_splits_a_request_into_its_steps() -> None:
    pytest.importorskip("onnxruntime")
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "hotpath.py"), "--timeline", "--no-stages", "--duration", "1"]

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)

    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^  timeline of [\d,]+ requests at c=1", proc.stdout, re.M), proc.stdout
    segments = re.findall(r"^  ([A-H]\d?) .*?(-?\d+\.\d)  +-?\d+\.\d  +-?\d+\.\d$", proc.stdout, re.M)
    names = [name for name, *_ in segments]
    assert names == ["A", "A1", "A2", "A3", "A4", "A5", "A6", "B", "C", "D", "D2", "E", "F", "G", "H"], proc.stdout
    # A to F follow one another on one thread, or from a thread to the loop it wakes: paired with the wrong
    # request, one of them would come out negative. G and H (the client's turn) may: the loop can see the next
    # request before the thread that answered has noted its write.
    assert all(float(p50) > 0 for name, p50, *_ in segments if name[0] in "ABCDEF"), proc.stdout


def test_hotpath_timeline_needs_concurrency_1() -> None:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "hotpath.py"), "--timeline", "--concurrency", "8"]

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)

    assert proc.returncode == 2
    assert "--timeline pairs each step with its request: it needs --concurrency 1" in proc.stderr


def test_hops_prints_each_round_trip() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "hops.py")], capture_output=True, text=True, timeout=120
    )

    assert proc.returncode == 0, proc.stderr
    names = [line.split("  ")[0] for line in proc.stdout.splitlines()]
    assert names[:3] == [
        "thread ping-pong, back to back",
        "thread ping-pong, 2 ms idle before each",
        "loop -> thread -> loop (asyncio)",
    ], proc.stdout
    assert all(re.search(r"p50 +\d+ us   p99 +\d+ us$", line) for line in proc.stdout.splitlines()), proc.stdout


HARNESS = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from procs import ServerProcess
server = ServerProcess([sys.executable, "-c", "import time; time.sleep(600)"], 0, Path(sys.argv[2]))
server.start()
try:
    print(server.proc.pid, flush=True)
    time.sleep(600)
finally:
    server.stop()
"""


def test_a_sigterm_to_the_harness_stops_its_server(tmp_path: Path) -> None:
    """``timeout`` ends a benchmark with SIGTERM; the server it started in a session of its own goes too."""
    cmd = [sys.executable, "-c", HARNESS, str(ROOT / "benchmarks"), str(tmp_path / "server.log")]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as harness:
        assert harness.stdout is not None
        server_pid = int(harness.stdout.readline())  # the server is running
        try:
            harness.terminate()
            assert harness.wait(timeout=60) == 128 + 15
            with pytest.raises(ProcessLookupError):
                os.kill(server_pid, 0)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)
