"""Tiny real models for the tests: ONNX graphs built with onnx.helper, SavedModels saved by TensorFlow.

Weights are fixed (small multiples of 1/4) so that tests can compute exact outputs with numpy:
``linear_reference(x)`` gives what ``onnx_linear`` and ``tf_savedmodel``'s ``linear`` signature return.
TensorFlow is imported only inside the TF builders, so ONNX-only tests never load it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8

Dim = int | str | None


def linear_weights(n_in: int = 4, n_out: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The fixed (W, b) of the linear builders: W[i, j] = (i - j) / 4, b[j] = j / 2."""
    w = np.array([[(i - j) / 4 for j in range(n_out)] for i in range(n_in)], dtype=np.float32)
    b = np.array([j / 2 for j in range(n_out)], dtype=np.float32)
    return w, b


def linear_reference(x: Any, n_in: int = 4, n_out: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities, logits) that the linear models return for ``x`` of shape [batch, n_in]."""
    w, b = linear_weights(n_in, n_out)
    logits = np.asarray(x, dtype=np.float32).reshape(-1, n_in) @ w + b
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32), logits.astype(np.float32)


def _save(graph: onnx.GraphProto, path: Path, opsets: Sequence[tuple[str, int]] = (("", OPSET),)) -> Path:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=IR_VERSION
    )
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _batch(symbolic_batch: bool, fixed_batch: int | None) -> Dim:
    if fixed_batch is not None:
        return fixed_batch
    return "batch" if symbolic_batch else None


def _linear_nodes(x: str, n_in: int, n_out: int, w: np.ndarray | None, b: np.ndarray | None) -> tuple[list, list]:
    default_w, default_b = linear_weights(n_in, n_out)
    w = default_w if w is None else np.asarray(w, dtype=np.float32)
    b = default_b if b is None else np.asarray(b, dtype=np.float32)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    nodes = [
        helper.make_node("MatMul", [x, "W"], ["xw"]),
        helper.make_node("Add", ["xw", "B"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    return nodes, inits


def onnx_linear(
    path: Path,
    n_in: int = 4,
    n_out: int = 3,
    *,
    symbolic_batch: bool = True,
    fixed_batch: int | None = None,
    input_name: str = "x",
    weights: Any = None,
    bias: Any = None,
) -> Path:
    """softmax(x @ W + b): input ``x`` float [batch, n_in]; outputs ``probabilities``, ``logits`` [batch, n_out].

    The batch dimension is symbolic ("batch"), fixed (``fixed_batch``) or unknown (``symbolic_batch=False``).
    """
    batch = _batch(symbolic_batch, fixed_batch)
    nodes, inits = _linear_nodes(input_name, n_in, n_out, weights, bias)
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [batch, n_in])],
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [batch, n_out]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, n_out]),
        ],
        inits,
    )
    return _save(graph, path)


def onnx_argmax(
    path: Path, n_in: int = 4, n_out: int = 3, *, input_name: str = "x", weights: Any = None, bias: Any = None
) -> Path:
    """The linear model with ``label`` (int64 argmax per row, [batch]) as first output, then ``probabilities``."""
    nodes, inits = _linear_nodes(input_name, n_in, n_out, weights, bias)
    nodes.append(helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0))
    graph = helper.make_graph(
        nodes,
        "argmax",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", n_in])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"]),
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", n_out]),
        ],
        inits,
    )
    return _save(graph, path)


def onnx_two_inputs(path: Path) -> Path:
    """out = float(ids) * scale: ``ids`` int64 [batch, 2], ``scale`` float [batch, 1] -> ``out`` float [batch, 2]."""
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["ids"], ["ids_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["ids_f", "scale"], ["out"]),
        ],
        "two_inputs",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 2]),
            helper.make_tensor_value_info("scale", TensorProto.FLOAT, ["batch", 1]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 2])],
    )
    return _save(graph, path)


def onnx_strings(path: Path) -> Path:
    """StringNormalizer (lower case): ``text`` string [n] -> ``normalized`` string [n]."""
    graph = helper.make_graph(
        [helper.make_node("StringNormalizer", ["text"], ["normalized"], case_change_action="LOWER", locale="C")],
        "strings",
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("normalized", TensorProto.STRING, ["n"])],
    )
    return _save(graph, path)


def onnx_identity(path: Path, elem_type: int = TensorProto.FLOAT, shape: Sequence[Dim] | None = ("batch", 4)) -> Path:
    """Identity of one input ``x`` (any ONNX element type, any shape; ``shape=None`` for unknown rank) -> ``y``."""
    dims = None if shape is None else list(shape)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", elem_type, dims)],
        [helper.make_tensor_value_info("y", elem_type, dims)],
    )
    return _save(graph, path)


# The request handler around onnx_batch_echo for the batching tests: a request with "block" holds its
# thread in pre_inference (started is set) until the test sets release; its rows come back as "y".
ECHO_HANDLER = """
import threading
started = threading.Event()
release = threading.Event()

def pre_inference(sample, metadata):
    if sample.get("block"):
        started.set()
        release.wait(120)
    return sample["x"]

def post_inference(prediction, metadata):
    return {"y": prediction[0].tolist()}
"""


def onnx_batch_echo(path: Path, width: int = 4) -> Path:
    """``y = x + N`` where N is the batch size the model ran at: each row shows the batch it was part of.

    ``x`` float [batch, width] -> ``y`` float [batch, width]. A test can read, from each answer, the
    exact batch size the model saw (padding rows included), as LitServe's tests record them.
    """
    graph = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
            helper.make_node("Cast", ["rows"], ["rows_f"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["x", "rows_f"], ["y"]),
        ],
        "batch_echo",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])],
        [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")],
    )
    return _save(graph, path)


def onnx_mlp(path: Path, sizes: Sequence[int] = (256, 1024, 1024, 10), *, seed: int = 0) -> Path:
    """A ReLU MLP with random (seeded) weights: ``x`` float [batch, sizes[0]] -> ``y`` float [batch, sizes[-1]]."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    current = "x"
    for k, (a, b) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{k}"), numpy_helper.from_array(np.zeros(b, np.float32), f"B{k}")]
        out = "y" if k == len(sizes) - 2 else f"h{k}"
        nodes.append(helper.make_node("Gemm", [current, f"W{k}", f"B{k}"], [out if out == "y" else f"g{k}"]))
        if out != "y":
            nodes.append(helper.make_node("Relu", [f"g{k}"], [out]))
        current = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", sizes[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", sizes[-1]])],
        inits,
    )
    return _save(graph, path)


# --- TensorFlow --------------------------------------------------------------------------------

TF_SIGNATURES = {"serving_default": "linear", "pair": "pair", "text": "text"}
"""tf_savedmodel's default: signature key -> kind of function (see ``tf_savedmodel``)."""


def tf_savedmodel(path: Path, signatures: Mapping[str, str] | None = None) -> Path:
    """Save a SavedModel (a tf.Module) at ``path`` with the given signature key -> kind:

    - ``linear``: ``x`` float32 [None, 4] -> ``probabilities`` float32 [None, 3] (as ``linear_reference``),
      ``label`` int64 [None]
    - ``pair``: ``ids`` int64 [None, 2], ``scale`` float32 [None, 1] -> ``out`` float32 [None, 2] = ids * scale
    - ``text``: ``text`` string [None] -> ``upper`` string [None], ``length`` int32 [None]
    """
    import tensorflow as tf

    w, b = linear_weights(4, 3)

    class Tiny(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.constant(w)
            self.b = tf.constant(b)

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def linear(self, x: Any) -> dict[str, Any]:
            logits = tf.matmul(x, self.w) + self.b
            return {"probabilities": tf.nn.softmax(logits), "label": tf.argmax(logits, axis=1)}

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, 2], tf.int64, name="ids"),
                tf.TensorSpec([None, 1], tf.float32, name="scale"),
            ]
        )
        def pair(self, ids: Any, scale: Any) -> dict[str, Any]:
            return {"out": tf.cast(ids, tf.float32) * scale}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def text(self, text: Any) -> dict[str, Any]:
            return {"upper": tf.strings.upper(text), "length": tf.strings.length(text)}

    module = Tiny()
    chosen = dict(TF_SIGNATURES if signatures is None else signatures)
    functions = {key: getattr(module, kind) for key, kind in chosen.items()}
    path = Path(path)
    tf.saved_model.save(module, str(path), signatures=functions)
    return path
