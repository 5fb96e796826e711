"""Each peer of the benchmark (MLServer, BentoML, Ray Serve) serves the model in its own venv, with and
without its batching: ``benchmarks/peers.py smoke``. Skipped where the peer's venv is not installed
(``python benchmarks/peers.py setup``): they come from PyPI and conflict with each other and with us."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import peers  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("peer", list(peers.PEERS))
def test_peer_serves_the_model_with_and_without_batching(peer: str, tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    reason = peers.PEERS[peer].missing()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "peers.py"), "smoke", peer, "--loadgen", "python"]
    cmd += ["--out", str(out)]

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)

    assert proc.returncode == 0, proc.stderr
    servers = json.loads(out.read_text())["models"]["iris"]["servers"]
    assert list(servers) == [peer, f"{peer}-batched"]
    for name, data in servers.items():
        assert "skipped" not in data, (name, data)
        assert data["notes"] == [], (name, data)  # the first answer held the model's 3 outputs
        assert data["cold_start_s"] > 0 and data["memory"]["rss_mib"] > 0, data
        assert [c["concurrency"] for c in data["cells"]] == [1, 4], data
        assert all(c["requests"] > 0 and c["non2xx"] == 0 and c["errors"] == 0 for c in data["cells"]), data
        assert re.search(rf"^{name}\s+4\s+[\d,]+\s+[\d.]+", proc.stdout, re.M), proc.stdout


def test_v2_body_is_the_open_inference_protocol_request_of_the_sample() -> None:
    model = peers.BenchModel("iris", Path("iris.onnx"), (4,), 3, b'{"input": [5.1, 3.5, 1.4, 0.2]}')
    body = json.loads(peers.v2_body(model))
    assert body == {
        "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}],
        "outputs": [{"name": "output"}],
    }


def test_an_unknown_peer_is_refused_with_the_names() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "peers.py"), "status", "triton"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown peer(s) triton; expected mlserver, bentoml, ray or all" in proc.stderr
