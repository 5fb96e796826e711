"""NVIDIA's perf_analyzer, unmodified, against ``localserve serve``, over HTTP and over gRPC.

perf_analyzer reads the statistics extension around each measurement window: it picks the model's
version by the one whose ``queue`` count grew, and stops with "Server side statistics compute counts
must be the same" unless ``compute_input``, ``compute_infer`` and ``compute_output`` grow together.
The models are served by the engine's two paths: ``single`` (a fixed shape) and ``free`` (a free
first dimension, like the bundled iris example, which Triton's auto-completed configuration gives a
``max_batch_size`` of 4) without batching (the API's thread runs the model), ``batched`` through
the batcher. Each runs over both transports (``-i http``, ``-i grpc``: perf_analyzer's default, on
``--grpc-port``), which read the same statistics. perf_analyzer comes from scripts/perf_analyzer.sh
(PyPI's wheel, run through Debian 13's C libraries); the test is skipped only when that script
cannot install it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port
from tests.models import onnx_linear
from tests.test_e2e import server

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "scripts" / "perf_analyzer.sh"
CONFIG = """\
- kind: api
  name: single
  model: single.onnx
- kind: api
  name: batched
  model: batched.onnx
  batching: {max_batch_size: 8}
- kind: api
  name: free
  model: batched.onnx
"""


@pytest.fixture(scope="module")
def perf_analyzer() -> str:
    """The launcher scripts/perf_analyzer.sh installed (or had in its cache)."""
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"scripts/perf_analyzer.sh could not install perf_analyzer: {done.stderr.strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The server's address for each of perf_analyzer's ``-i`` values."""
    project = tmp_path_factory.mktemp("perf_analyzer")
    (project / "cortex.yaml").write_text(CONFIG)
    onnx_linear(project / "single.onnx", fixed_batch=1)  # dims [1, 4]: perf_analyzer needs no --shape
    onnx_linear(project / "batched.onnx")  # [batch, 4]: with max_batch_size 8, and as "free" without batching
    grpc_port = free_port()
    with server("--grpc-port", str(grpc_port), cwd=project) as (address, _):
        yield {"http": address.removeprefix("http://"), "grpc": f"127.0.0.1:{grpc_port}"}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", ["single", "batched", "free"])
def test_perf_analyzer_runs_unchanged(
    perf_analyzer: str, urls: dict[str, str], model: str, protocol: str, tmp_path: Path
) -> None:
    # Short windows; a stability band wide enough that a busy machine cannot fail the run (the test is
    # about the server's answers and statistics, never about how fast they come).
    command = [perf_analyzer, "-m", model, "-u", urls[protocol], "-i", protocol]
    command += ["--measurement-interval", "500", "--stability-percentage", "1000", "--max-trials", "10"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{output}"
    assert "Concurrency: 1, throughput:" in output, output
    assert "Server side statistics" not in output, output
    assert "Successful request count:" in output, output  # the server's side was read and reported
