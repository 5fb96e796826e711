"""Write the models of this example: models/<name>/<version>/model.onnx, tiny linear + softmax classifiers.

- ``iris`` version 1: the iris_onnx example's classifier (petal length + width decide);
  version 2: the same, twice as sure of itself (weights and bias doubled).
- ``sepals`` version 1: a classifier that looks at the sepals only (sepal length decides).

Input ``input`` float [batch, 4] (sepal_length, sepal_width, petal_length, petal_width);
output ``probabilities`` float [batch, 3] (setosa, versicolor, virginica).
Run: python handlers_examples/iris_models/make_models.py
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PETALS = (np.array([[0, 0, 0], [0, 0, 0], [-2, 0, 2], [-2, 0, 2]], dtype=np.float32), np.array([6.6, 0, -13.2]))
SEPALS = (np.array([[-4, 0, 4], [0, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=np.float32), np.array([22.0, 0, -25.0]))
MODELS = {("iris", 1): (PETALS, 1.0), ("iris", 2): (PETALS, 2.0), ("sepals", 1): (SEPALS, 1.0)}


def build(path: Path, weights: np.ndarray, bias: np.ndarray) -> Path:
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input", "W"], ["xw"]),
            helper.make_node("Add", ["xw", "B"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        ],
        "iris",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(weights, "W"), numpy_helper.from_array(bias.astype(np.float32), "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def main(root: Path = Path(__file__).with_name("models")) -> list[Path]:
    return [
        build(root / name / str(version) / "model.onnx", weights * scale, bias * scale)
        for (name, version), ((weights, bias), scale) in MODELS.items()
    ]


if __name__ == "__main__":
    for written in main():
        print(written)
