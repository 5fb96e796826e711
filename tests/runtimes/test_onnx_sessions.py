"""An ONNX Runtime session's options and execution providers: threads, spinning, CUDA asked for and its options."""

from __future__ import annotations

import logging
from pathlib import Path

import onnxruntime
import pytest

from localserve.config.options import ApiOptions
from localserve.errors import ModelLoadError
from localserve.runtimes.onnx import OnnxModel
from tests.runtimes.test_onnx import linear, load, models

__all__ = ["linear", "models"]  # the fixtures, shared with test_onnx.py

HAS_CUDA = "CUDAExecutionProvider" in onnxruntime.get_available_providers()  # the package is onnxruntime-gpu


def test_session_options(linear: OnnxModel) -> None:
    options = linear.session.get_session_options()
    assert options.inter_op_num_threads == 1
    assert options.intra_op_num_threads >= 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"  # one replica
    assert options.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert load(Path(linear.path), threads=3).session.get_session_options().intra_op_num_threads == 3


def test_replicas_share_cores_and_do_not_spin(linear: OnnxModel) -> None:
    import os

    options = load(Path(linear.path), replicas=2).session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == max(1, len(os.sched_getaffinity(0)) // 2)


def test_an_api_with_several_threads_does_not_spin(linear: OnnxModel) -> None:
    options = load(Path(linear.path), api_threads=2).session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


@pytest.mark.skipif(HAS_CUDA, reason="this onnxruntime has CUDA")
def test_gpu_requested_with_the_cpu_package(models: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        load(models / "linear.onnx", gpu=True)
    message = str(info.value)
    assert message.startswith(
        f"A GPU was requested (compute.gpu) but this onnxruntime {onnxruntime.__version__} has no CUDA support"
    )
    assert "the CPU package 'onnxruntime' is installed instead of 'onnxruntime-gpu'" in message
    assert "pip uninstall onnxruntime && pip install onnxruntime-gpu" in message
    assert message.endswith("; or pass --allow-cpu-fallback to run on CPU.")


@pytest.mark.skipif(HAS_CUDA, reason="this onnxruntime has CUDA")
def test_gpu_fallback_runs_on_cpu(models: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="localserve"):
        model = load(models / "linear.onnx", gpu=True, allow_cpu_fallback=True)
    assert model.device == "CPUExecutionProvider"
    assert "has no CUDA support" in caplog.text
    assert "running on CPU (--allow-cpu-fallback)" in caplog.text


def test_cuda_options_reach_the_cuda_provider_over_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from localserve.runtimes.onnx_sessions import execution_providers as _providers

    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: providers)
    monkeypatch.setattr(onnxruntime, "preload_dlls", lambda: None, raising=False)
    assert _providers(ApiOptions(gpu=True)) == [
        ("CUDAExecutionProvider", {"cudnn_conv_algo_search": "HEURISTIC"}),
        ("CPUExecutionProvider", {}),
    ]
    options = ApiOptions(gpu=True, cuda_options={"cudnn_conv_algo_search": "DEFAULT", "use_tf32": "0"})
    assert _providers(options)[0] == ("CUDAExecutionProvider", {"cudnn_conv_algo_search": "DEFAULT", "use_tf32": "0"})
    assert _providers(ApiOptions(gpu=False)) == [("CPUExecutionProvider", {})]
