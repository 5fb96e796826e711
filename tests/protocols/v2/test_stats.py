"""The statistics extension (protocols/v2/stats.py): every request counted once, the same way for V2 and native.

Triton's statistics count each successful request once in ``success``, ``queue`` and each of
``compute_input``, ``compute_infer``, ``compute_output``; perf_analyzer relies on it (it finds the
model's version by its ``queue`` count and stops when the compute counts differ). V2 requests skip
``pre_inference`` and ``post_inference``, so those counts cannot come from the user-code stages:
they come from the phases the engine observes for every request it answers.
"""

from __future__ import annotations

import concurrent.futures
import sys
from typing import Any

import numpy as np
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton

from localserve.config.options import ServeOptions
from tests.conftest import free_port
from tests.models import onnx_batch_echo, onnx_identity

HANDLER = """
def pre_inference(sample, metadata):
    return sample["x"]

def post_inference(prediction, metadata):
    return {"y": prediction[0].tolist()}
"""
CONFIG = """
- kind: api
  name: single
  model: echo.onnx
  request_handler: h.py
- kind: api
  name: batched
  model: echo.onnx
  request_handler: h.py
  batching: {max_batch_size: 8, batch_interval: 1ms}
"""


def v2_body(row: list[float]) -> tuple[bytes, dict[str, str]]:
    given = triton.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(np.array([row], dtype=np.float32), binary_data=True)
    body, length = triton.InferenceServerClient.generate_request_body([given])
    return bytes(body), {"Inference-Header-Content-Length": str(length)}


def test_v2_and_native_requests_count_once_in_every_statistic(serve, make_project) -> None:
    project = make_project({"cortex.yaml": CONFIG, "h.py": HANDLER})
    onnx_batch_echo(project / "echo.onnx")
    with serve(project) as client:
        for api in ("single", "batched"):
            for i in range(3):
                body, headers = v2_body([float(i), 1.0, 2.0, 3.0])
                assert client.post(f"/v2/models/{api}/infer", content=body, headers=headers).status_code == 200
            for i in range(2):
                assert client.post(f"/{api}", json={"x": [[float(i), 0.0, 0.0, 0.0]]}).status_code == 200
            bad = client.post(f"/v2/models/{api}/infer", json={"inputs": [{"name": "x"}]})
            assert bad.status_code == 400, bad.text
        v2 = {entry["name"]: entry for entry in client.get("/v2/models/stats").json()["model_stats"]}
        stats = {entry["api"]: entry for entry in client.get("/stats").json()}
        dashboard = {entry["name"]: entry for entry in client.get("/dashboard/data").json()["apis"]}
    for api in ("single", "batched"):
        figures = v2[api]["inference_stats"]
        counts = {key: value["count"] for key, value in figures.items()}
        assert counts == {
            "success": 5,
            "fail": 1,
            "queue": 5,
            "compute_input": 5,
            "compute_infer": 5,
            "compute_output": 5,
            "cache_hit": 0,
            "cache_miss": 0,
        }, api
        for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
            assert figures[key]["ns"] > 0, (api, key, figures)
        # The views read the same figures.
        assert stats[api]["requests"] == {"2xx": 5, "4xx": 1, "5xx": 0}
        assert dashboard[api]["figures"]["codes"] == {"200": 5.0, "400": 1.0}
        assert dashboard[api]["figures"]["latency"]["count"] == 6
    assert v2["single"]["execution_count"] == v2["single"]["inference_count"] == 5  # one model call per request
    assert v2["batched"]["execution_count"] == v2["batched"]["inference_count"] == 5  # sent one after another


# post_inference holds a native request's thread once its model has run, until the test sets release.
HOLDING_HANDLER = """
import threading
entered, release = threading.Event(), threading.Event()

def pre_inference(sample, metadata):
    return sample["x"]

def post_inference(prediction, metadata):
    entered.set()
    release.wait(60)
    return {"y": prediction[0].tolist()}
"""
ROWS_CONFIG = """
- kind: api
  name: single
  model: echo.onnx
  request_handler: holding.py
- kind: api
  name: batched
  model: echo.onnx
  batching: {max_batch_size: 8, batch_interval: 1ms}
- kind: api
  name: fixed
  model: fixed.onnx
"""


def rows_body(rows: int, width: int = 4) -> dict[str, Any]:
    """A V2 JSON body of ``rows`` rows of input x."""
    return {"inputs": [{"name": "x", "shape": [rows, width], "datatype": "FP32", "data": [0.5] * rows * width}]}


def counts(client: Any, model: str) -> tuple[int, int, int]:
    """(success, inference_count, execution_count) of ``model``'s statistics."""
    (entry,) = client.get(f"/v2/models/{model}/stats").json()["model_stats"]
    return entry["inference_stats"]["success"]["count"], entry["inference_count"], entry["execution_count"]


def test_inference_count_counts_the_rows_of_each_request_as_triton_does(serve, make_project) -> None:
    """Triton's *Statistics Extension*: each inference of a batched request counts (a request of 64 rows adds 64);
    a model without a batch dimension (``max_batch_size`` 0) counts one per request."""
    project = make_project({"cortex.yaml": ROWS_CONFIG, "holding.py": HOLDING_HANDLER})
    onnx_batch_echo(project / "echo.onnx")
    onnx_identity(project / "fixed.onnx", shape=(3, 4))
    port = free_port()
    with serve(project, ServeOptions(grpc_port=port)) as client:
        assert client.get("/v2/models/fixed/config").json()["max_batch_size"] == 0
        for model, rows in (("single", 3), ("single", 1), ("batched", 2), ("fixed", 3)):
            answer = client.post(f"/v2/models/{model}/infer", json=rows_body(rows))
            assert answer.status_code == 200, answer.text
        assert counts(client, "single") == (2, 4, 2)  # unbatched: one model call per request, all its rows
        assert counts(client, "batched") == (1, 2, 1)
        assert counts(client, "fixed") == (1, 1, 1)  # its first dimension is no batch
        every = {e["name"]: e["inference_count"] for e in client.get("/v2/models/stats").json()["model_stats"]}
        assert every == {"single": 4, "batched": 2, "fixed": 1}
        grpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            given = triton_grpc.InferInput("x", [4, 4], "FP32")
            given.set_data_from_numpy(np.full((4, 4), 0.5, dtype=np.float32))
            grpc.infer("single", [given])
            (entry,) = grpc.get_inference_statistics("single").model_stats
        finally:
            grpc.close()
        assert (entry.inference_stats.success.count, entry.inference_count, entry.execution_count) == (3, 8, 3)
        assert counts(client, "single") == (3, 8, 3)  # REST reads the same figures


def test_inference_count_moves_with_success_never_ahead_of_it(serve, make_project) -> None:
    """A request's rows are counted with its success, once it is answered: not when its model ran."""
    project = make_project({"cortex.yaml": ROWS_CONFIG, "holding.py": HOLDING_HANDLER})
    onnx_batch_echo(project / "echo.onnx")
    onnx_identity(project / "fixed.onnx", shape=(3, 4))
    with serve(project) as client:
        holding = next(
            m for m in list(sys.modules.values()) if m.__dict__.get("__file__") == str(project / "holding.py")
        )
        assert client.post("/v2/models/single/infer", json=rows_body(1)).status_code == 200
        assert counts(client, "single") == (1, 1, 1)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            native = pool.submit(client.post, "/single", json={"x": [[1.0, 2.0, 3.0, 4.0]]})
            try:
                assert holding.entered.wait(30)
                # Its model has run (one more execution); it is not answered yet: neither a success nor an inference.
                assert counts(client, "single") == (1, 1, 2)
            finally:
                holding.release.set()
            assert native.result(30).status_code == 200
        assert counts(client, "single") == (2, 2, 2)
