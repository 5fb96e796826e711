"""scripts/gpu_bench.sh's refusals, on a machine without a GPU (what it does with one: benchmarks/README.md).

The scripts run as processes, as a user runs them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_bench.sh"


def _path_without(name: str, extra: Path | None = None) -> str:
    """PATH with no directory that holds ``name`` (and ``extra`` first)."""
    dirs = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / name).exists()]
    return os.pathsep.join([str(extra), *dirs] if extra else dirs)


def test_no_gpu_is_exit_2_and_nothing_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without("nvidia-smi"), "OUT": str(tmp_path)}

    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)

    assert proc.returncode == 2, proc.stderr
    assert "nvidia-smi sees no GPU: nothing to run here" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_bundle_missing_a_part_is_exit_5_before_anything_is_installed(tmp_path: Path) -> None:
    if shutil.which("xz") is None:
        pytest.skip("xz is not installed")
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "nvidia-smi").write_text('#!/bin/sh\necho "a stand-in for nvidia-smi"\n')
    (stub / "nvidia-smi").chmod(0o755)
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    packed = subprocess.run(["xz", "-c"], input=b"x" * 1000, capture_output=True, check=True).stdout
    (bundle / "ort.tar.xz.a").write_bytes(packed[:20])
    (bundle / "ort.tar.xz.b").write_bytes(packed[20:])
    whole = subprocess.run(["sha256sum"], input=packed, capture_output=True, check=True).stdout.split()[0]
    (bundle / "ort.sha256").write_text(whole.decode() + "\n")
    (bundle / "ort.tar.xz.b").unlink()  # the second part never arrived
    env = {**os.environ, "PATH": _path_without("nvidia-smi", stub)}

    proc = subprocess.run(
        ["bash", str(SCRIPT), "--bundle", str(bundle)], capture_output=True, text=True, env=env, timeout=60
    )

    assert proc.returncode == 5, (proc.stdout, proc.stderr)
    assert "onnxruntime-gpu's parts do not add up" in proc.stderr
    assert f"not {whole.decode()}): a part is missing or cut" in proc.stderr
    assert not (bundle / "site").exists()
