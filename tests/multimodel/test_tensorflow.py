"""A TensorFlowPredictor with several SavedModels in version folders (``models: {paths}``), each with its own
``signature_key``; ``tensorflow_client.predict(x, model_name, model_version)`` as on Cortex."""

from __future__ import annotations

import pytest

from tests.models import linear_reference, tf_savedmodel

pytestmark = pytest.mark.slow

PREDICTOR = """
class TensorFlowPredictor:
    def __init__(self, tensorflow_client, config):
        self.client = tensorflow_client

    def predict(self, payload, query_params):
        model = query_params["model"]
        if model == "text":
            return {"upper": self.client.predict([payload], model, "1")["upper"][0].decode()}
        return {"label": self.client.predict(payload, model)["label"].tolist()}
"""

CONFIG = """
- name: tf
  kind: RealtimeAPI
  predictor:
    type: tensorflow
    path: predictor.py
    models:
      signature_key: lin
      paths:
        - {name: linear, path: saved/linear}
        - {name: text, path: saved/text, signature_key: txt}
      cache_size: 1
      disk_cache_size: 2
"""


def test_tensorflow_models_in_version_folders(serve, make_project) -> None:
    project = make_project({"cortex.yaml": CONFIG, "predictor.py": PREDICTOR})
    tf_savedmodel(project / "saved" / "linear" / "1", {"lin": "linear", "txt": "text"})
    tf_savedmodel(project / "saved" / "text" / "1", {"lin": "linear", "txt": "text"})
    x = [[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]]
    with serve(project) as client:
        labels = client.post("/tf?model=linear", json=x)
        assert labels.status_code == 200, labels.text
        assert labels.json() == {"label": linear_reference(x)[1].argmax(axis=1).tolist()}
        assert client.post("/tf?model=text", json="Hello").json() == {"upper": "HELLO"}
        missing = client.post("/tf?model=other", json=x)
        events = client.get("/tf").json()["models"]["events"]
    assert (missing.status_code, missing.json()["error"]) == (
        404,
        "Model 'other' wasn't found in the list of available models; the models are: 'linear', 'text'.",
    )
    assert [(e["event"], e["model"]) for e in events] == [("load", "linear"), ("load", "text"), ("evict", "linear")]
