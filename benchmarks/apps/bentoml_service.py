"""BentoML 1.4 services serving an ONNX model with onnxruntime: ``Plain`` and ``Batched`` (``batchable``).

    BENCH_MODEL=mlp.onnx bentoml serve bentoml_service:Plain --host 127.0.0.1 --port 8000

One worker (BentoML's default), as its docs write a service; ``Batched`` takes a batch of samples per
request (``{"input": [[...]]}``), which BentoML's adaptive batching merges across requests.
"""

from __future__ import annotations

import os

import bentoml
import numpy as np


def _session():  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(os.environ["BENCH_MODEL"], options, providers=["CPUExecutionProvider"])


@bentoml.service(workers=1)
class Plain:
    def __init__(self) -> None:
        self.session = _session()
        self.input_name = self.session.get_inputs()[0].name

    @bentoml.api
    def predict(self, input: list[float]) -> dict:
        batch = np.asarray(input, dtype=np.float32)[None, :]
        return {"output": self.session.run(None, {self.input_name: batch})[0][0].tolist()}


@bentoml.service(workers=1)
class Batched:
    def __init__(self) -> None:
        self.session = _session()
        self.input_name = self.session.get_inputs()[0].name

    @bentoml.api(batchable=True, max_batch_size=32, max_latency_ms=1000)
    def predict(self, input: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: input.astype(np.float32, copy=False)})[0]
