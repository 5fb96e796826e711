"""V2 has no tracker (the model's tensors, no post_inference): its requests on an API with one leave it alone,
with no warning, while the native route of the same API still feeds it."""

from __future__ import annotations

import logging

import numpy as np
import tritonclient.grpc as triton

from localserve.config.options import ServeOptions
from tests.conftest import EXAMPLES, free_port
from tests.protocols.v2.test_routes import sample


def test_v2_requests_over_rest_and_grpc_never_reach_the_tracker(serve, caplog) -> None:
    port = free_port()
    x = [[5.1, 3.5, 1.4, 0.2]]
    with serve(EXAMPLES / "iris_onnx", ServeOptions(grpc_port=port)) as client, caplog.at_level(logging.INFO):
        body = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": x[0]}]}
        for _ in range(3):
            assert client.post("/v2/models/iris/infer", json=body).status_code == 200
        with triton.InferenceServerClient(f"127.0.0.1:{port}") as grpc_client:
            given = triton.InferInput("input", [1, 4], "FP32")
            given.set_data_from_numpy(np.array(x, dtype=np.float32))
            for _ in range(3):
                assert grpc_client.infer("iris", [given]).as_numpy("probabilities").shape == (1, 3)
        assert [r.getMessage() for r in caplog.records if "tracker" in r.getMessage()] == []
        metrics = client.get("/metrics").text
        assert sample(metrics, "localserve_requests_total", api="iris", code="200") == 6
        assert "localserve_tracker_class_total{" not in metrics
        native = client.post(
            "/iris", json={"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
        )
        assert native.status_code == 200
        label = native.json()["class_label"]
        assert (
            sample(client.get("/metrics").text, "localserve_tracker_class_total", api="iris", **{"class": label}) == 1
        )
