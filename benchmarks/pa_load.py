"""NVIDIA's perf_analyzer (a C++ client) as a load generator for the Open Inference Protocol routes.

    rows = run_perf_analyzer(launcher, "mlp", {"grpc": "127.0.0.1:8081", "http": "127.0.0.1:8888"}, 64, 5.0, {"input": [256]})

One client for gRPC and REST alike, so the transports are compared without a Python client's cost
on the same cores (``grpc_load.py``'s grpc.aio client spends more CPU per call than the server).
The launcher comes from ``scripts/perf_analyzer.sh`` (its last line of output). Each row is one
perf_analyzer run at one concurrency: three windows of ``seconds`` (stability not asked for: the
figures are what they are: the first three windows are taken), read from its CSV report.
"""

from __future__ import annotations

import csv
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# perf_analyzer's -i and --input-tensor-format for each row (REST sends binary tensors by default)
ROWS = {"pa-grpc": ("grpc", "binary"), "pa-binary": ("http", "binary"), "pa-json": ("http", "json")}


@dataclass(frozen=True)
class PaResult:
    rps: float
    p50_ms: float
    p99_ms: float
    non2xx: int = 0  # perf_analyzer stops at the first failed request: a result has none
    errors: int = 0


def launcher() -> str | None:
    """scripts/perf_analyzer.sh's launcher (it installs perf_analyzer once), or None when it cannot."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "perf_analyzer.sh")], capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else None


def run_perf_analyzer(
    command: str,
    model: str,
    url: str,
    protocol: str,
    tensor_format: str,
    concurrency: int,
    seconds: float,
    shapes: dict[str, list[int]],
) -> PaResult:
    """One perf_analyzer run against ``url`` over ``protocol``; its throughput and latencies."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.csv"
        args = [command, "-m", model, "-u", url, "-i", protocol, "-b", "1", "-f", str(report)]
        args += ["--concurrency-range", str(concurrency), "--measurement-interval", str(int(seconds * 1000))]
        args += ["--stability-percentage", "999999", "--max-trials", "10"]  # the first three windows
        if protocol == "http":
            args += ["--input-tensor-format", tensor_format, "--output-tensor-format", tensor_format]
        for name, shape in shapes.items():
            args += ["--shape", f"{name}:{','.join(map(str, shape))}"]
        done = subprocess.run(args, capture_output=True, text=True, cwd=tmp)
        if done.returncode != 0 or not report.exists():
            raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {(done.stdout + done.stderr)[-800:]}")
        (row,) = list(csv.DictReader(report.open()))
    return PaResult(float(row["Inferences/Second"]), int(row["p50 latency"]) / 1000, int(row["p99 latency"]) / 1000)
