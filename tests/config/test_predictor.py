"""The ``predictor`` section of a ``kind: api`` entry: its type, file, config and model; the keys only the
``kind: RealtimeAPI`` form takes are refused with what ``kind: api`` spells instead."""

from __future__ import annotations

from typing import Any

import pytest

from localserve.config.predictor import parse_predictor
from localserve.config.schema import PredictorConfig
from localserve.errors import ConfigError

WHERE = "cortex.yaml: api 'p'"


def test_a_file_name_is_a_python_predictor() -> None:
    predictor = parse_predictor("predictor.py", WHERE)
    assert predictor == PredictorConfig(type="python", path="predictor.py")
    assert predictor is not None and predictor.class_name == "PythonPredictor"
    assert parse_predictor(None, WHERE) is None


def test_every_field_is_read() -> None:
    raw = {
        "type": "onnx",
        "path": "p.py",
        "model_path": "m.onnx",
        "config": {"k": 1},
        "python_path": "src",
        "env": {"A": 1, "B": None},
        "log_level": "debug",
        "tensorflow_serving_image": "img:1",
    }
    predictor = parse_predictor(raw, WHERE)
    assert predictor == PredictorConfig(
        "onnx", "p.py", "m.onnx", {"k": 1}, "src", {"A": "1", "B": ""}, "debug", "img:1"
    )
    assert predictor is not None and predictor.class_name == "ONNXPredictor"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (["p.py"], "'predictor' must be a mapping with 'type' and 'path', got list."),
        (
            {"type": "pyhton", "path": "p.py"},
            "invalid value 'pyhton' for 'type' in 'predictor'; expected one of 'python', 'onnx', 'tensorflow'. Did you mean 'python'?",
        ),
        ({"type": "tensorflow"}, "'path' in 'predictor' is required (the file holding TensorFlowPredictor)."),
        ({"path": "p.py", "model_path": 3}, "'model_path' in 'predictor' must be a string, got int 3."),
        ({"path": "p.py", "config": [1]}, "'config' in 'predictor' must be a mapping, got list."),
        ({"path": "p.py", "env": {1: "x"}}, "'env' in 'predictor' must be a mapping of names to values, got dict."),
        (
            {"path": "p.py", "log_level": "loud"},
            "invalid value 'loud' for 'log_level' in 'predictor'; expected one of 'debug', 'info', 'warning', 'error'.",
        ),
        ({"path": "p.py", "pth": "x"}, "unknown key 'pth' in 'predictor'. Did you mean 'path'?"),
        (
            {"path": "p.py", "server_side_batching": {"max_batch_size": 2}},
            "'server_side_batching' in 'predictor' belongs to 'kind: RealtimeAPI' or 'kind: AsyncAPI' (Cortex 0.25+); "
            "with 'kind: api' use 'batching'.",
        ),
        (
            {"path": "p.py", "processes_per_replica": 2},
            "'processes_per_replica' in 'predictor' belongs to 'kind: RealtimeAPI' or 'kind: AsyncAPI' (Cortex 0.25+); "
            "with 'kind: api' use 'compute: {init_replicas: N}'.",
        ),
    ],
)
def test_refusals_name_the_key_and_what_was_expected(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_predictor(raw, WHERE)
    assert str(caught.value) == f"{WHERE}: {message}"
