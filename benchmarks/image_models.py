"""The image models: ResNet-50 exported by torch with random weights, or a tiny conv net built with onnx.helper.

Both take float32 [batch, 3, 224, 224] named "input" and return [batch, 1000] named "logits"; a
client POSTs handlers_examples/image_flip/cat.jpg as image/jpeg and gets {"top5": [5 class ids]}.
Nothing is downloaded: ResNet-50's weights are torch's random initialisation.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from onnx_models import BenchModel

JPEG = Path(__file__).resolve().parent.parent / "handlers_examples" / "image_flip" / "cat.jpg"
SHAPE = (3, 224, 224)
CLASSES = 1000


def torch_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "torchvision"))


def _bench_model(name: str, path: Path) -> BenchModel:
    return BenchModel(name, path, SHAPE, 5, JPEG.read_bytes(), content_type="image/jpeg", output_key="top5")


def build_tinynet(directory: Path) -> BenchModel:
    """A 4x4/4 convolution to 16 channels, Relu, global average pool, 16 -> 1000: about 2.5 M multiply-adds."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    conv_w = (rng.standard_normal((16, 3, 4, 4)) / np.sqrt(48)).astype(np.float32)
    fc_w = (rng.standard_normal((16, CLASSES)) / 4).astype(np.float32)
    fc_b = np.zeros(CLASSES, np.float32)
    nodes = [
        helper.make_node("Conv", ["input", "conv_w"], ["conv"], kernel_shape=[4, 4], strides=[4, 4]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tinynet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *SHAPE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        [numpy_helper.from_array(a, n) for a, n in ((conv_w, "conv_w"), (fc_w, "fc_w"), (fc_b, "fc_b"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = directory / "tinynet.onnx"
    onnx.save(model, str(path))
    return _bench_model("tinynet", path)


def export_resnet50(directory: Path) -> BenchModel:
    """torchvision's resnet50(weights=None) through torch.onnx.export, opset 17, a dynamic batch axis."""
    import torch
    import torchvision

    model = torchvision.models.resnet50(weights=None).eval()
    path = directory / "resnet50.onnx"
    options = {
        "input_names": ["input"],
        "output_names": ["logits"],
        "dynamic_axes": {"input": {0: "batch"}, "logits": {0: "batch"}},
        "opset_version": 17,
    }
    example = (torch.randn(1, *SHAPE),)
    with torch.no_grad():
        try:  # the TorchScript exporter: no onnxscript needed, dynamic_axes honoured as given
            torch.onnx.export(model, example, str(path), dynamo=False, **options)
        except TypeError:  # torch before 2.5 has no dynamo argument
            torch.onnx.export(model, example, str(path), **options)
        except Exception as exc:  # a torch whose TorchScript exporter is gone: torch.export's (needs onnxscript)
            print(f"the TorchScript exporter failed ({type(exc).__name__}: {exc}); exporting with dynamo=True")
            torch.onnx.export(model, example, str(path), dynamo=True, **options)
    return _bench_model("resnet50", path)


IMAGE_BUILDERS = {"resnet50": export_resnet50, "tinynet": build_tinynet}


def build_image_model(name: str, directory: Path) -> BenchModel:
    """``name`` is resnet50, tinynet, or auto (resnet50 where torch and torchvision are installed)."""
    if name == "auto":
        name = "resnet50" if torch_available() else "tinynet"
    return IMAGE_BUILDERS[name](directory)
