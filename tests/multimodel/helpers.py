"""Multi-model projects for the tests: a ``dir`` of tiny ONNX models in version folders, and their predictor."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.models import linear_reference, onnx_linear

ONNX_PREDICTOR = """
class ONNXPredictor:
    def __init__(self, onnx_client, config):
        self.client = onnx_client

    def predict(self, payload, query_params):
        name = query_params.get("model")
        version = query_params.get("version")
        if version is None:
            outputs = self.client.predict(payload, name)
        else:
            outputs = self.client.predict(payload, name, version)
        return {"logits": outputs[1].tolist()}
"""

X = [[1.0, 2.0, 3.0, 4.0]]


def bias_of(model: str, version: int) -> list[float]:
    """Each model and version adds its own bias, so an answer tells which one ran."""
    return [float(ord(model[0]) - ord("a") + 1), float(version), 0.0]


def expected(model: str, version: int, x: list[list[float]] = X) -> list[list[float]]:
    """The logits model ``model`` version ``version`` answers for ``x``."""
    logits = (
        linear_reference(x)[1]
        + np.asarray(bias_of(model, version), dtype=np.float32)
        - np.asarray([0.0, 0.5, 1.0], dtype=np.float32)
    )
    return logits.tolist()


def add_version(root: Path, model: str, version: int) -> Path:
    """``root/model/version/model.onnx``: the linear model with the bias of (model, version)."""
    return onnx_linear(root / model / str(version) / "model.onnx", bias=bias_of(model, version))


def models_dir(root: Path, versions: dict[str, list[int]]) -> Path:
    """A ``dir`` of models: ``{name: [versions]}``."""
    for model, numbers in versions.items():
        for version in numbers:
            add_version(root, model, version)
    return root


def project_yaml(models: str, *, extra: str = "", predictor_extra: str = "") -> str:
    """A ``kind: RealtimeAPI`` ONNX predictor named ``multi`` with the ``models`` block ``models``."""
    return f"""
- name: multi
  kind: RealtimeAPI
  predictor:
    type: onnx
    path: predictor.py
{predictor_extra}    models:
{models}
{extra}"""
