"""Each example's model, loaded with our runtimes, gives the documented answer for its sample.json.

The handlers are called directly here; the server tests drive the same folders through the app.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import yaml

from localserve.config.options import ApiOptions
from localserve.runtimes import load_model

EXAMPLES = Path(__file__).resolve().parents[2] / "handlers_examples"


def import_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample(name: str) -> Any:
    return json.loads((EXAMPLES / name / "sample.json").read_text())


def api(name: str) -> dict[str, Any]:
    (entry,) = yaml.safe_load((EXAMPLES / name / "cortex.yaml").read_text())
    assert isinstance(entry, dict)
    return entry


def test_every_example_has_a_readme_with_its_command() -> None:
    for folder in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
        readme = (folder / "README.md").read_text()
        assert f"--project handlers_examples/{folder.name}" in readme


def test_iris_onnx() -> None:
    config = api("iris_onnx")
    assert config["tracker"] == {"key": "class_label", "model_type": "classification"}
    model = load_model("onnx", EXAMPLES / "iris_onnx" / config["model"], ApiOptions())
    handler = import_file(EXAMPLES / "iris_onnx" / config["request_handler"])
    feed = handler.pre_inference(sample("iris_onnx"), model.input_signature)
    result = handler.post_inference(model.run(model.coerce(feed)), model.output_signature)
    assert result["class_label"] == "iris-setosa"
    assert result["class_index"] == 0
    assert result["probabilities"].shape == (3,)
    assert result["probabilities"][0] > 0.9
    for features, label in [([5.9, 2.8, 4.3, 1.3], "iris-versicolor"), ([6.6, 3.0, 5.6, 2.0], "iris-virginica")]:
        keys = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
        prediction = model.run(
            model.coerce(handler.pre_inference(dict(zip(keys, features, strict=True)), model.input_signature))
        )
        assert handler.post_inference(prediction, model.output_signature)["class_label"] == label


def test_iris_labels() -> None:
    config = api("iris_labels")
    model = load_model("onnx", EXAMPLES / "iris_labels" / config["model"], ApiOptions())
    handler = import_file(EXAMPLES / "iris_labels" / config["request_handler"])
    metadata = config["metadata"]
    feed = handler.pre_inference(sample("iris_labels"), model.input_signature, metadata)
    prediction = model.run(model.coerce(feed))
    assert prediction[0].dtype == np.int64
    assert handler.post_inference(prediction, model.output_signature, metadata) == "iris-virginica"


def test_python_predictor(monkeypatch: pytest.MonkeyPatch) -> None:
    config = api("python_predictor")["predictor"]
    assert config["type"] == "python"
    monkeypatch.chdir(EXAMPLES / "python_predictor")
    predictor = import_file(EXAMPLES / "python_predictor" / config["path"]).PythonPredictor(config["config"])
    assert predictor.predict(sample("python_predictor")) == {"total": 1320.0, "currency": "JPY"}


@pytest.mark.slow
def test_tf_savedmodel() -> None:
    config = api("tf_savedmodel")
    model = load_model("tensorflow", EXAMPLES / "tf_savedmodel" / config["model"], ApiOptions())
    handler = import_file(EXAMPLES / "tf_savedmodel" / config["request_handler"])
    metadata = config["metadata"]
    feed = handler.pre_inference(sample("tf_savedmodel"), model.input_signature, metadata)
    result = handler.post_inference(model.run(model.coerce(feed)), model.output_signature, metadata)
    assert result["class_label"] == "iris-versicolor"
    assert len(result["probabilities"]) == 3
    assert json.loads(json.dumps(result)) == result


@pytest.mark.slow
def test_tf_predictor() -> None:
    config = api("tf_predictor")["predictor"]
    assert config["type"] == "tensorflow"
    model = load_model("tensorflow", EXAMPLES / "tf_predictor" / config["model_path"], ApiOptions())
    predictor = import_file(EXAMPLES / "tf_predictor" / config["path"]).TensorFlowPredictor(config["config"], model)
    assert predictor.predict(sample("tf_predictor")) == {"text": "HELLO LOCALSERVE!", "length": 16}


class _Request(dict[str, Any]):
    """Just enough of the ABEJA request for a handler that reads its body."""

    def __init__(self, body: bytes) -> None:
        super().__init__(http_method="POST", content_type="application/json")
        self._body = io.BytesIO(body)

    def read(self, size: int = -1) -> bytes:
        return self._body.read(size)


@pytest.mark.slow
def test_keras_training_result(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = EXAMPLES / "keras_training_result"
    monkeypatch.setenv("ABEJA_TRAINING_RESULT_DIR", str(folder / "abejainc_training_result"))
    handler = import_file(folder / "main.py").handler
    response = handler(_Request((folder / "sample.json").read_bytes()), {})
    assert response["status_code"] == 200
    assert response["content_type"] == "application/json"
    assert response["content"]["label"] == "iris-virginica"
    assert len(response["content"]["probabilities"]) == 3
    bad = handler(_Request(b'{"features": [1, 2]}'), {})
    assert bad["status_code"] == 400
