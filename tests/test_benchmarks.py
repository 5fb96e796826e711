"""The benchmark harness runs end to end on a tiny duration and prints its table (no time is asserted)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["wrk", "python"])
def test_harness_prints_rows_for_raw_and_starlette(generator: str, tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    if generator == "wrk" and shutil.which("wrk") is None:
        pytest.skip("wrk is not installed")
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--duration", "0.5", "--only", "iris"]
    cmd += ["--concurrency", "1", "--servers", "raw,starlette", "--loadgen", generator, "--out", str(out)]

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)

    assert proc.returncode == 0, proc.stderr
    assert "== iris ==" in proc.stdout
    assert re.search(r"^raw session\.run, in-process: batch 1: [\d,]+ calls/s", proc.stdout, re.M), proc.stdout
    assert re.search(r"^starlette\s+1\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+0\s+0\s+1\.00\s+-$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^starlette\s+[\d.]+\s+\d+\s+\d+\s+1\s*$", proc.stdout, re.M), proc.stdout
    results = json.loads(out.read_text())
    iris = results["models"]["iris"]
    assert [r["batch"] for r in iris["raw"]] == [1, 32]
    (cell,) = iris["servers"]["starlette"]["cells"]
    assert cell["concurrency"] == 1
    assert cell["requests"] > 0
    assert cell["non2xx"] == 0
