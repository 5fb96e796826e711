from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from localserve.config.options import ApiOptions
from localserve.errors import ModelLoadError, RequestError
from localserve.runtimes import load_model
from tests.models import linear_reference, tf_savedmodel

pytestmark = pytest.mark.slow

tf = pytest.importorskip("tensorflow")

from localserve.runtimes.tensorflow import TensorFlowModel  # noqa: E402

HAS_GPU = bool(tf.config.list_physical_devices("GPU"))


def load(path: Path, **options: Any) -> TensorFlowModel:
    return TensorFlowModel(path, ApiOptions(**options))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tf_savedmodel(tmp_path_factory.mktemp("tf") / "model")


@pytest.fixture(scope="module")
def model(saved: Path) -> TensorFlowModel:
    return load(saved)


def test_load_model_picks_tensorflow(saved: Path) -> None:
    loaded = load_model("tensorflow", saved, ApiOptions(threads=1))
    assert isinstance(loaded, TensorFlowModel)
    assert loaded.format == "tensorflow"
    assert loaded.device == "/CPU:0"


def test_signature_defs_are_real_protos(model: TensorFlowModel) -> None:
    from tensorflow.core.protobuf.meta_graph_pb2 import SignatureDef

    signatures = model.input_signature
    assert type(signatures) is dict
    assert sorted(signatures) == ["pair", "serving_default", "text"]
    assert model.output_signature is signatures
    pair = signatures["pair"]
    assert isinstance(pair, SignatureDef)
    assert sorted(pair.inputs) == ["ids", "scale"]
    assert [d.size for d in pair.inputs["ids"].tensor_shape.dim] == [-1, 2]
    assert pair.inputs["ids"].dtype == tf.int64.as_datatype_enum
    assert sorted(signatures["serving_default"].outputs) == ["label", "probabilities"]


def test_describe(model: TensorFlowModel) -> None:
    assert model.describe() == {
        "format": "tensorflow",
        "device": "/CPU:0",
        "signature_key": "serving_default",
        "inputs": [{"name": "x", "type": "float32", "shape": [None, 4]}],
        "outputs": [
            {"name": "label", "type": "int64", "shape": [None]},
            {"name": "probabilities", "type": "float32", "shape": [None, 3]},
        ],
    }


def test_predict_exact_outputs(model: TensorFlowModel) -> None:
    x = [[1, 2, 3, 4], [0, 0, 0, 0]]
    out = model.predict({"x": x})
    assert sorted(out) == ["label", "probabilities"]
    np.testing.assert_array_equal(out["label"], [0, 2])
    np.testing.assert_allclose(out["probabilities"], linear_reference(x)[0], rtol=1e-6)
    assert out["probabilities"].dtype == np.float32
    # run() takes an already coerced feed; a flat list of features fits [None, 4].
    feed = model.coerce([1, 2, 3, 4])
    assert feed["x"].shape == (1, 4)
    np.testing.assert_array_equal(model.run(feed)["label"], [0])


def test_other_signatures(model: TensorFlowModel) -> None:
    out = model.predict({"ids": [[1, 2], [3, 4]], "scale": [[0.5], [2]]}, "pair")
    np.testing.assert_array_equal(out["out"], [[0.5, 1], [6, 8]])
    text = model.predict(["abc", b"de"], "text")
    assert text["upper"].tolist() == [b"ABC", b"DE"]
    assert text["length"].tolist() == [3, 2]
    assert model.predict("one", "text")["length"].tolist() == [3]


def test_predict_from_threads(model: TensorFlowModel) -> None:
    results: list[Any] = [None] * 8

    def work(i: int) -> None:
        results[i] = model.predict({"ids": [[i, 1]], "scale": [[2]]}, "pair")["out"].tolist()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[[2 * i, 2]] for i in range(8)]


@pytest.mark.parametrize(
    ("value", "key", "message"),
    [
        ([1, 2, 3], None, "Input 'x' expects float32 of shape [-1, 4]; got a list of 3 numbers."),
        (
            {"y": [1, 2, 3, 4]},
            None,
            "Input 'x' is missing; signature 'serving_default' expects 'x' (float32 of shape [-1, 4]); got keys ['y'].",
        ),
        (
            {"x": [1, 2, 3, 4], "z": 0},
            None,
            "Unknown input 'z'; signature 'serving_default' expects 'x' (float32 of shape [-1, 4]).",
        ),
        (
            [1, "a", 3, 4],
            None,
            "Input 'x' expects float32 of shape [-1, 4]; the value 'a' at [1] is a string, not a number.",
        ),
        (
            {"ids": [1, 2]},
            "pair",
            "Input 'scale' is missing; signature 'pair' expects 'ids' (int64 of shape [-1, 2]), "
            "'scale' (float32 of shape [-1, 1]); got keys ['ids'].",
        ),
        (
            [1, 2],
            "pair",
            "Signature 'pair' has 2 inputs, so it needs a dict of input name -> value; it expects "
            "'ids' (int64 of shape [-1, 2]), 'scale' (float32 of shape [-1, 1]); got a list of 2 numbers.",
        ),
        (
            {"ids": [[1, 2.5]], "scale": [[1]]},
            "pair",
            "Input 'ids' expects int64 of shape [-1, 2]; the value 2.5 at [0, 1] is not a whole number.",
        ),
        ([1, 2], "text", "Input 'text' expects string of shape [-1]; the value 1 at [0] is not a string."),
        ([1], "nope", "Unknown signature 'nope'; the model has 'pair', 'serving_default', 'text'."),
    ],
)
def test_coercion_errors(model: TensorFlowModel, value: Any, key: str | None, message: str) -> None:
    with pytest.raises(RequestError) as info:
        model.predict(value, key)
    assert str(info.value) == message


def test_signature_key_option(saved: Path) -> None:
    chosen = load(saved, signature_key="pair")
    assert chosen.signature_key == "pair"
    assert [i["name"] for i in chosen.describe()["inputs"]] == ["ids", "scale"]
    with pytest.raises(ModelLoadError) as info:
        load(saved, signature_key="serve")
    assert str(info.value) == (
        f"TensorFlow model {saved} has no signature 'serve' (tf_signature_key); "
        "its signatures: 'pair', 'serving_default', 'text'."
    )


def test_signature_choice(tmp_path: Path) -> None:
    only = load(tf_savedmodel(tmp_path / "only", {"classify": "linear"}))
    assert only.signature_key == "classify"
    older = load(tf_savedmodel(tmp_path / "older", {"predict": "linear", "text": "text"}))
    assert older.signature_key == "predict"
    ambiguous = tf_savedmodel(tmp_path / "ambiguous", {"a": "linear", "b": "text"})
    several = load(ambiguous)  # loads: a TensorFlowPredictor names the key in predict(x, signature_key)
    assert several.signature_key is None
    assert several.describe()["signatures"] == ["a", "b"]
    np.testing.assert_allclose(
        several.predict([[1.0, 2.0, 3.0, 4.0]], "a")["probabilities"],
        load(ambiguous, signature_key="a").predict([[1.0, 2.0, 3.0, 4.0]])["probabilities"],
    )
    with pytest.raises(RequestError) as request_error:
        several.predict([[1.0, 2.0, 3.0, 4.0]])
    assert str(request_error.value) == (
        "TensorFlow model ambiguous has several signatures ('a', 'b') and none is chosen; pass the key as "
        "tensorflow_client.predict(model_input, signature_key=...) or set tf_signature_key."
    )
    with pytest.raises(ModelLoadError) as info:  # a request handler API runs one signature per request
        several.require_signature()
    assert str(info.value) == (
        f"TensorFlow model {ambiguous} has several signatures and none is 'serving_default'; "
        "set tf_signature_key to one of 'a', 'b'."
    )


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        load(tmp_path / "missing")
    assert str(info.value) == (
        f"Cannot load TensorFlow model {tmp_path / 'missing'}: it does not exist; expected a SavedModel directory "
        "(saved_model.pb and variables/), as tf.saved_model.save writes it."
    )
    with pytest.raises(ModelLoadError, match=r"it has no saved_model\.pb"):
        load(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"garbage")
    with pytest.raises(ModelLoadError, match=f"^Cannot load TensorFlow model {tmp_path}: "):
        load(tmp_path)


@pytest.mark.skipif(HAS_GPU, reason="a GPU is visible")
def test_gpu_requested_but_absent(saved: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ModelLoadError) as info:
        load(saved, gpu=True)
    message = str(info.value)
    assert message.startswith(f"A GPU was requested (compute.gpu) but TensorFlow {tf.__version__} sees no GPU (built")
    assert "pip install 'localserve[tensorflow-gpu]'" in message
    assert message.endswith("; or pass --allow-cpu-fallback to run on CPU.")
    with caplog.at_level(logging.WARNING, logger="localserve"):
        fallback = load(saved, gpu=True, allow_cpu_fallback=True)
    assert fallback.device == "/CPU:0"
    assert "sees no GPU" in caplog.text
    assert "running on CPU (--allow-cpu-fallback)" in caplog.text


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU visible to TensorFlow")
def test_gpu_runs_on_gpu(saved: Path) -> None:
    model = load(saved, gpu=True)
    assert model.device == "/GPU:0"
    out = model.predict([1, 2, 3, 4])
    np.testing.assert_allclose(out["probabilities"], linear_reference([1, 2, 3, 4])[0], rtol=1e-5)
