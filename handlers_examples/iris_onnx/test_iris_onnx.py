"""The Cortex API as `localserve serve` runs it, in this test process: python -m pytest handlers_examples/iris_onnx"""

import json
from pathlib import Path

import localserve.testing

PROJECT = Path(__file__).parent
SAMPLE = json.loads((PROJECT / "sample.json").read_text())


def test_the_sample_is_a_setosa(localserve_client):
    client = localserve_client(PROJECT)  # cortex.yaml's APIs, each at /<name>
    response = client.post("/iris", json=SAMPLE)
    assert response.status_code == 200
    assert response.json()["class_label"] == "iris-setosa"


def test_the_model_over_the_open_inference_protocol(localserve_client):
    client = localserve_client(PROJECT)
    features = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": list(SAMPLE.values())}
    response = client.post("/v2/models/iris/infer", json={"inputs": [features]})
    assert response.status_code == 200
    assert response.json()["outputs"][0]["shape"] == [1, 3]


def test_run_prints_what_localserve_run_prints():
    result = localserve.testing.run(PROJECT, input=PROJECT / "sample.json")
    assert result.exit_code == 0
    assert json.loads(result.body)["class_index"] == 0
