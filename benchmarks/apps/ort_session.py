"""One onnxruntime session on the CPU or the GPU, as the peer apps and raw.py open it."""

from __future__ import annotations

from typing import Any

PROVIDERS = {"cpu": ["CPUExecutionProvider"], "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"]}


def open_session(model_path: str, device: str, intra_op_threads: int | None = None) -> Any:
    """An InferenceSession on ``device``; raises when CUDA was asked for and onnxruntime cannot use it."""
    import onnxruntime as ort

    if device == "cuda" and hasattr(ort, "preload_dlls"):
        try:  # finds CUDA and cuDNN installed from pip (onnxruntime-gpu[cuda,cudnn]) without LD_LIBRARY_PATH
            ort.preload_dlls()
        except Exception as exc:  # a system-wide CUDA is still found the usual way
            print(f"onnxruntime.preload_dlls() failed: {exc}")
    options = ort.SessionOptions()
    if intra_op_threads:
        options.intra_op_num_threads = intra_op_threads
    session = ort.InferenceSession(model_path, options, providers=PROVIDERS[device])
    if session.get_providers()[0] != PROVIDERS[device][0]:
        raise RuntimeError(
            f"device {device!r}: onnxruntime {ort.__version__} runs on {session.get_providers()}, "
            f"not {PROVIDERS[device][0]} (is onnxruntime-gpu installed, and CUDA with it?)"
        )
    return session
