"""The statistics extension (protocols/v2/stats.py): every request counted once, the same way for V2 and native.

Triton's statistics count each successful request once in ``success``, ``queue`` and each of
``compute_input``, ``compute_infer``, ``compute_output``; perf_analyzer relies on it (it finds the
model's version by its ``queue`` count and stops when the compute counts differ). V2 requests skip
``pre_inference`` and ``post_inference``, so those counts cannot come from the user-code stages:
they come from the phases the engine observes for every request it answers.
"""

from __future__ import annotations

import numpy as np
import tritonclient.http as triton

from tests.models import onnx_batch_echo

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
