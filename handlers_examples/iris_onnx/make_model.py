"""Write iris.onnx: a linear + softmax iris classifier with hand-set weights (no training needed).

Input ``input`` float [batch, 4] (sepal_length, sepal_width, petal_length, petal_width);
first output ``probabilities`` float [batch, 3] (setosa, versicolor, virginica).
Run: python handlers_examples/iris_onnx/make_model.py
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Petals decide: small (length + width < 3.3) is setosa, large (> 6.6) virginica, between versicolor.
WEIGHTS = np.array([[0, 0, 0], [0, 0, 0], [-2, 0, 2], [-2, 0, 2]], dtype=np.float32)
BIAS = np.array([6.6, 0, -13.2], dtype=np.float32)


def main(path: Path = Path(__file__).with_name("iris.onnx")) -> Path:
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input", "W"], ["xw"]),
            helper.make_node("Add", ["xw", "B"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        ],
        "iris",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(WEIGHTS, "W"), numpy_helper.from_array(BIAS, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


if __name__ == "__main__":
    print(main())
