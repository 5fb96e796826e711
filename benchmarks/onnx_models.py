"""The two benchmark models, built with onnx.helper, and one request body for each."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class BenchModel:
    """A model file plus what a client sends and what it expects back."""

    name: str
    path: Path
    input_shape: tuple[int, ...]  # one sample's, without the batch dimension
    n_outputs: int  # numbers under output_key in a response
    body: bytes
    content_type: str = "application/json"
    output_key: str = "output"


IRIS_BODY = {"input": [5.1, 3.5, 1.4, 0.2]}


def _dense(name: str, x: str, n_in: int, n_out: int, rng: np.random.Generator, nodes: list, inits: list) -> str:
    from onnx import helper, numpy_helper

    w = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
    b = (rng.standard_normal(n_out) * 0.01).astype(np.float32)
    inits += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]
    nodes += [
        helper.make_node("MatMul", [x, f"{name}_w"], [f"{name}_mm"]),
        helper.make_node("Add", [f"{name}_mm", f"{name}_b"], [f"{name}_out"]),
    ]
    return f"{name}_out"


def _save(path: Path, nodes: list, inits: list, n_in: int, n_out: int, graph_name: str) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        graph_name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", n_out])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by any onnxruntime of the last years
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def build_iris(directory: Path) -> BenchModel:
    """4 → 3: MatMul + Add + Softmax."""
    from onnx import helper

    rng = np.random.default_rng(1)
    nodes: list = []
    inits: list = []
    logits = _dense("fc", "input", 4, 3, rng, nodes, inits)
    nodes.append(helper.make_node("Softmax", [logits], ["output"], axis=-1))
    path = directory / "iris.onnx"
    _save(path, nodes, inits, 4, 3, "iris")
    return BenchModel("iris", path, (4,), 3, json.dumps(IRIS_BODY).encode())


def build_mlp(directory: Path) -> BenchModel:
    """256 → 1024 → 1024 → 10 with Relu."""
    from onnx import helper

    rng = np.random.default_rng(2)
    nodes: list = []
    inits: list = []
    h = _dense("fc1", "input", 256, 1024, rng, nodes, inits)
    nodes.append(helper.make_node("Relu", [h], ["relu1"]))
    h = _dense("fc2", "relu1", 1024, 1024, rng, nodes, inits)
    nodes.append(helper.make_node("Relu", [h], ["relu2"]))
    h = _dense("fc3", "relu2", 1024, 10, rng, nodes, inits)
    nodes.append(helper.make_node("Identity", [h], ["output"]))
    path = directory / "mlp.onnx"
    _save(path, nodes, inits, 256, 10, "mlp")
    sample = random.Random(3)
    body = {"input": [round(sample.uniform(-1.0, 1.0), 4) for _ in range(256)]}
    return BenchModel("mlp", path, (256,), 10, json.dumps(body).encode())


BUILDERS = {"iris": build_iris, "mlp": build_mlp}


def build_models(names: list[str], directory: Path) -> dict[str, BenchModel]:
    return {name: BUILDERS[name](directory) for name in names}
