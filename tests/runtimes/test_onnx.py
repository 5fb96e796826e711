from __future__ import annotations

import json
import logging
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

from localserve.config.options import ApiOptions
from localserve.errors import HandlerError, ModelLoadError, RequestError
from localserve.runtimes import load_model
from localserve.runtimes.onnx import OnnxModel
from tests.models import (
    linear_reference,
    onnx_argmax,
    onnx_batch_echo,
    onnx_identity,
    onnx_linear,
    onnx_mlp,
    onnx_strings,
    onnx_two_inputs,
)


def load(path: Path, **options: Any) -> OnnxModel:
    return OnnxModel(path, ApiOptions(**options))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("onnx")
    onnx_linear(d / "linear.onnx")
    onnx_linear(d / "fixed.onnx", fixed_batch=2)
    onnx_linear(d / "unknown.onnx", symbolic_batch=False)
    onnx_two_inputs(d / "two.onnx")
    onnx_strings(d / "strings.onnx")
    onnx_argmax(d / "argmax.onnx")
    return d


@pytest.fixture(scope="module")
def linear(models: Path) -> OnnxModel:
    return load(models / "linear.onnx")


@pytest.fixture(scope="module")
def two(models: Path) -> OnnxModel:
    return load(models / "two.onnx")


def test_load_model_picks_onnx_runtime(models: Path) -> None:
    model = load_model("onnx", models / "linear.onnx", ApiOptions(threads=1))
    assert isinstance(model, OnnxModel)
    assert model.format == "onnx"
    assert model.device == "CPUExecutionProvider"


def test_the_pool_spins_for_a_bounded_time_covering_the_batch_interval(linear: OnnxModel) -> None:
    # onnxruntime's own default spins tens of milliseconds: a lightly loaded server would keep a core busy.
    options = linear.session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.spin_duration_us") == "2000"
    batched = load(Path(linear.path), batch_interval=0.005).session.get_session_options()
    assert batched.get_session_config_entry("session.intra_op.spin_duration_us") == "7000"  # 2 ms + the interval
    slow = load(Path(linear.path), batch_interval=1.0).session.get_session_options()
    assert slow.get_session_config_entry("session.intra_op.spin_duration_us") == "20000"  # at most 20 ms


def test_a_batching_model_runs_its_stacked_calls_on_a_session_whose_pool_never_spins(linear: OnnxModel) -> None:
    # Lone calls (concurrency 1) keep the spinning pool; stacked ones, back to back under load, must not
    # spin through the gaps on the cores the event loop needs.
    assert linear._quiet is None  # no batching: one session
    model = load(Path(linear.path), batching=True, batch_interval=0.005)
    one, four = np.ones((1, 4), np.float32), np.ones((4, 4), np.float32)
    stacked = model._stacked  # made at load, beside the model's own session
    assert stacked is not None and stacked is not model.session
    lone = model.run({"x": one}, 1)
    model.run({"x": one})  # no bucket: a call of any shape (onnx_client.predict, a feed that cannot be stacked)
    np.testing.assert_allclose(model.run({"x": four}, 4)[0][:1], lone[0])
    assert stacked.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert model.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "1"
    model.run({"x": four}, 4)
    assert model._stacked is stacked
    assert load(Path(linear.path), batching=True, replicas=2)._quiet is None  # not spinning: nothing to spare


def test_a_batching_models_two_sessions_are_made_at_once_on_two_threads(
    linear: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # onnxruntime builds a session mostly without the GIL: the quiet one, made on a thread of its own while the
    # loading thread makes the model's own, adds little to the API's start where a core is free.
    opened: list[tuple[str, str]] = []
    real = OnnxModel._open

    def spied(self: OnnxModel, sess_options: Any = None) -> Any:  # the real open, and on which thread for which pool
        spins = (sess_options or self._sess_options).get_session_config_entry("session.intra_op.allow_spinning")
        opened.append(("spinning" if spins == "1" else "quiet", threading.current_thread().name))
        return real(self, sess_options)

    monkeypatch.setattr(OnnxModel, "_open", spied)
    model = load(Path(linear.path), batching=True, batch_interval=0.005)
    assert sorted(opened) == [("quiet", "localserve-onnx-session"), ("spinning", threading.current_thread().name)]
    assert model._stacked is not None
    opened.clear()
    load(Path(linear.path))  # no batching: one session, on the loading thread
    assert opened == [("spinning", threading.current_thread().name)]


def test_a_lone_call_among_stacked_ones_runs_on_the_quiet_pool(
    linear: OnnxModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under load a lone call comes between stacked ones (a gap in the arrivals): on the spinning pool it would
    # start the spin again, through the stacked calls that follow. Lone calls in a row (concurrency 1) spin.
    model = load(Path(linear.path), batching=True, batch_interval=0.005)
    ran: list[str] = []
    call = model._call

    def spied(session: Any, feed: Any) -> Any:  # the real call, and which of the two sessions made it
        ran.append("spinning" if session is model.session else "quiet" if session is model._stacked else "?")
        return call(session, feed)

    monkeypatch.setattr(model, "_call", spied)
    one, four = np.ones((1, 4), np.float32), np.ones((4, 4), np.float32)
    for rows, bucket in [(one, 1), (one, 1), (four, 4), (one, 1), (one, 1), (one, 1), (four, 4), (four, 4), (one, 1)]:
        model.run({"x": rows}, bucket)
    assert ran == ["spinning", "spinning", "quiet", "quiet", "spinning", "spinning", "quiet", "quiet", "quiet"]
    model.run({"x": four})  # no bucket: a call of any shape (onnx_client.predict) takes the model's own session
    assert ran[-1] == "spinning"


def test_a_model_whose_weights_pass_the_limit_keeps_one_session(
    linear: OnnxModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx

    from localserve.runtimes import onnx_sessions as runtime
    from localserve.runtimes.onnx_sessions import weights_size

    path = tmp_path / "external.onnx"  # its weights in a file beside it, as large models keep them
    onnx.save_model(onnx.load(linear.path), path, save_as_external_data=True, location="w.bin", size_threshold=0)
    (tmp_path / "other.bin").write_bytes(b"\0" * 1000)  # beside it, not named by it
    weights = path.stat().st_size + (tmp_path / "w.bin").stat().st_size
    assert weights_size(path) == weights > path.stat().st_size
    monkeypatch.setattr(runtime, "STACKED_COPY_LIMIT", weights - 1)
    assert load(path, batching=True)._quiet is None
    monkeypatch.setattr(runtime, "STACKED_COPY_LIMIT", weights)
    assert load(path, batching=True)._quiet is not None


def test_a_model_that_only_mentions_a_file_beside_it_weighs_its_own_size(linear: OnnxModel, tmp_path: Path) -> None:
    # Only external data (a "location" entry) makes a file beside the model part of its weights: a name in the
    # model's text (a doc string, a node's name) is not one.
    import onnx

    from localserve.runtimes.onnx_sessions import weights_size

    model = onnx.load(linear.path)
    model.doc_string = "trained on data.csv; see notes.txt"
    path = tmp_path / "model.onnx"
    onnx.save_model(model, path)
    (tmp_path / "data.csv").write_bytes(b"\0" * 1000)
    (tmp_path / "notes.txt").write_bytes(b"\0" * 10)
    assert weights_size(path) == path.stat().st_size


def test_signatures_are_real_node_args(linear: OnnxModel) -> None:
    (arg,) = linear.input_signature
    assert isinstance(arg, onnxruntime.NodeArg)
    assert (arg.name, arg.type, arg.shape) == ("x", "tensor(float)", ["batch", 4])
    assert [o.name for o in linear.output_signature] == ["probabilities", "logits"]


def test_describe(models: Path, linear: OnnxModel) -> None:
    assert linear.describe() == {
        "format": "onnx",
        "device": "CPUExecutionProvider",
        "inputs": [{"name": "x", "type": "float32", "shape": ["batch", 4]}],
        "outputs": [
            {"name": "probabilities", "type": "float32", "shape": ["batch", 3]},
            {"name": "logits", "type": "float32", "shape": ["batch", 3]},
        ],
    }
    unknown = load(models / "unknown.onnx").describe()
    assert unknown["inputs"] == [{"name": "x", "type": "float32", "shape": [1, 4], "unsized": [0]}]  # as Cortex took it
    assert json.loads(json.dumps(unknown)) == unknown
    assert load(models / "strings.onnx").describe()["inputs"] == [{"name": "text", "type": "string", "shape": ["n"]}]


def test_predict_exact_outputs(linear: OnnxModel) -> None:
    x = [[1, 2, 3, 4], [0, 0, 0, 0]]
    probabilities, logits = linear.predict(x)
    expected_p, expected_logits = linear_reference(x)
    np.testing.assert_array_equal(logits, [[5, 3, 1], [0, 0.5, 1]])
    np.testing.assert_array_equal(logits, expected_logits)
    np.testing.assert_allclose(probabilities, expected_p, rtol=1e-6)
    assert probabilities.dtype == np.float32


def test_flat_list_is_reshaped_to_the_input_shape(linear: OnnxModel, models: Path) -> None:
    feed = linear.coerce([1, 2, 3, 4])
    assert feed["x"].shape == (1, 4)
    assert feed["x"].dtype == np.float32
    assert linear.coerce({"x": np.arange(8.0)})["x"].shape == (2, 4)
    assert load(models / "fixed.onnx").coerce(list(range(8)))["x"].shape == (2, 4)
    # An unnamed unknown dimension counts as 1 (Cortex did so).
    assert load(models / "unknown.onnx").coerce([1, 2, 3, 4])["x"].shape == (1, 4)


def test_run_returns_outputs_in_order(models: Path) -> None:
    labels, probabilities = load(models / "argmax.onnx").predict([[1, 2, 3, 4], [0, 0, 0, 0]])
    np.testing.assert_array_equal(labels, [0, 2])
    assert labels.dtype == np.int64
    assert probabilities.shape == (2, 3)


def test_two_inputs(two: OnnxModel) -> None:
    (out,) = two.predict({"ids": [[1, 2], [3, 4]], "scale": [[0.5], [2]]})
    np.testing.assert_array_equal(out, [[0.5, 1], [6, 8]])
    feed = two.coerce({"ids": [1, 2], "scale": 3})
    assert feed["ids"].dtype == np.int64
    assert feed["scale"].shape == (1, 1)


def test_strings(models: Path) -> None:
    model = load(models / "strings.onnx")
    (out,) = model.predict(["Hello", b"WORLD"])
    assert out.tolist() == ["hello", "world"]
    assert model.coerce(np.array(["A"]))["text"].dtype == object


@pytest.mark.parametrize(
    ("onnx_type", "dtype", "value", "expected"),
    [
        (TensorProto.DOUBLE, np.float64, [1, 2.5], [1.0, 2.5]),
        (TensorProto.FLOAT16, np.float16, [0.5], [0.5]),
        (TensorProto.INT32, np.int32, [1, 2.0], [1, 2]),
        (TensorProto.INT8, np.int8, [-128, 127], [-128, 127]),
        (TensorProto.UINT8, np.uint8, [0, 255], [0, 255]),
        (TensorProto.BOOL, np.bool_, [True, 0, 1], [True, False, True]),
    ],
)
def test_dtypes(tmp_path: Path, onnx_type: int, dtype: type, value: list[Any], expected: list[Any]) -> None:
    model = load(onnx_identity(tmp_path / "id.onnx", onnx_type, ["n"]))
    (out,) = model.predict(value)
    assert out.dtype == dtype
    assert out.tolist() == expected


def test_many_symbolic_dims_keep_the_shape(tmp_path: Path) -> None:
    model = load(onnx_identity(tmp_path / "id.onnx", shape=["a", "b"]))
    assert model.coerce([[1, 2, 3]])["x"].shape == (1, 3)
    with pytest.raises(RequestError) as info:
        model.predict([1, 2])
    assert str(info.value).startswith(
        "The model expects 'x' (float32 of shape [-1, -1]); got 'x' as a float32 array of shape [2]. "
        "onnxruntime said: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Invalid rank for input: x Got: 1 Expected: 2"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1, 2, 3], "Input 'x' expects float32 of shape [-1, 4]; got a list of 3 numbers."),
        (
            np.zeros((2, 3)),
            "Input 'x' expects float32 of shape [-1, 4]; got a float64 array of shape [2, 3].",
        ),
        (
            {"y": [1, 2, 3, 4]},
            "Input 'x' is missing; the model expects 'x' (float32 of shape [-1, 4]); got keys ['y'].",
        ),
        (
            {"x": [1, 2, 3, 4], "z": 1},
            "Unknown input 'z'; the model expects 'x' (float32 of shape [-1, 4]).",
        ),
        (
            [1, "a", 3, 4],
            "Input 'x' expects float32 of shape [-1, 4]; the value 'a' at [1] is a string, not a number.",
        ),
        (
            [[1, 2, 3, 4], [1, None, 3, 4]],
            "Input 'x' expects float32 of shape [-1, 4]; the value None at [1, 1] could not be converted to float32.",
        ),
        (
            [[1, 2, 3, 4], [1, 2]],
            "Input 'x' expects float32 of shape [-1, 4]; got a nested list whose rows have different lengths "
            "(a nested list of shape [2]).",
        ),
        ("abc", "Input 'x' expects float32 of shape [-1, 4]; the value 'abc' is a string, not a number."),
        (None, "Input 'x' expects float32 of shape [-1, 4]; the value None could not be converted to float32."),
    ],
)
def test_coercion_errors(linear: OnnxModel, value: Any, message: str) -> None:
    with pytest.raises(RequestError) as info:
        linear.coerce(value)
    assert str(info.value) == message
    assert info.value.status_code == 400


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            [1, 2],
            "The model has 2 inputs, so it needs a dict of input name -> value; it expects "
            "'ids' (int64 of shape [-1, 2]), 'scale' (float32 of shape [-1, 1]); got a list of 2 numbers.",
        ),
        (
            {"ids": [1, 2]},
            "Input 'scale' is missing; the model expects 'ids' (int64 of shape [-1, 2]), "
            "'scale' (float32 of shape [-1, 1]); got keys ['ids'].",
        ),
        (
            {"ids": [1.5, 2], "scale": 1},
            "Input 'ids' expects int64 of shape [-1, 2]; the value 1.5 at [0] is not a whole number.",
        ),
        (
            {"ids": [1, 2**70], "scale": 1},
            "Input 'ids' expects int64 of shape [-1, 2]; the value 1180591620717411303424 at [1] "
            "is out of range for int64.",
        ),
        (
            {"ids": [1, 2, 3], "scale": [1, 2, 3]},
            "Input 'ids' expects int64 of shape [-1, 2]; got a list of 3 numbers.",
        ),
    ],
)
def test_coercion_errors_two_inputs(two: OnnxModel, value: Any, message: str) -> None:
    with pytest.raises(RequestError) as info:
        two.coerce(value)
    assert str(info.value) == message


def test_integer_range_and_bool_errors(tmp_path: Path) -> None:
    uint8 = load(onnx_identity(tmp_path / "u8.onnx", TensorProto.UINT8, ["n"]))
    with pytest.raises(RequestError, match=r"^Input 'x' expects uint8 of shape \[-1\]; the value 256 at \[1\] is out"):
        uint8.coerce([1, 256])
    boolean = load(onnx_identity(tmp_path / "b.onnx", TensorProto.BOOL, ["n"]))
    with pytest.raises(RequestError) as info:
        boolean.coerce([1, 2])
    assert str(info.value) == (
        "Input 'x' expects bool of shape [-1]; the value 2 at [1] is not a boolean (true/false or 0/1)."
    )


def nested(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = [value]
    return value


def test_lists_past_32_levels_and_values_of_any_depth_are_400s_that_say_so(tmp_path: Path, models: Path) -> None:
    """numpy walks no array of more than 32 dimensions element by element, nor makes one past 64; repr() of a value
    ~1,000 levels deep fails: each was a 500 (RuntimeError, RecursionError), or called ragged."""
    uint8 = load(onnx_identity(tmp_path / "u8.onnx", TensorProto.UINT8, ["batch", 4]))
    with pytest.raises(RequestError) as info:
        uint8.coerce(nested([1, 2, 3, 4], 32))
    assert str(info.value) == (
        "Input 'x' expects uint8 of shape [-1, 4]; got a list nested 33 levels deep, past the 32 an input may have."
    )
    strings = load(models / "strings.onnx")
    with pytest.raises(RequestError) as info:
        strings.coerce(nested(["a"], 32))
    assert str(info.value).endswith("got a list nested 33 levels deep, past the 32 an input may have.")
    with pytest.raises(RequestError) as info:  # an object array stops at numpy's 64 dimensions
        strings.coerce(nested(["a"], 99))
    assert str(info.value) == "Input 'text' expects string of shape [-1]; got a list nested more than 32 levels deep."
    with pytest.raises(RequestError) as info:
        uint8.coerce(nested([1, 2, 3, 4], 69))
    assert str(info.value) == "Input 'x' expects uint8 of shape [-1, 4]; got a list nested more than 32 levels deep."
    with pytest.raises(RequestError) as info:
        uint8.coerce(np.zeros([1] * 33, dtype=np.uint8))
    assert str(info.value).endswith("got an array of 33 dimensions, past the 32 an input may have.")
    deep: Any = 1
    for _ in range(1020):
        deep = {"a": deep}
    with pytest.raises(RequestError) as info:
        uint8.coerce([deep, 2, 3, 4])
    assert str(info.value) == (
        "Input 'x' expects uint8 of shape [-1, 4]; the value {'a': {'a': {'a': {...}}}} at [0] could not be "
        "converted to uint8."
    )


def test_integers_mixed_with_floats_keep_every_digit(models: Path) -> None:
    """One float in the list made numpy hold every number as a float64, which has 53 bits: 2**53 + 1 became
    2**53, and 2**63 - 1 was refused as out of range (docs/reference/models.md: values are not silently changed)."""
    two = load(models / "two.onnx")
    feed = two.coerce({"ids": [[2**53 + 1, 1.0], [2**63 - 1, -(2**63)]], "scale": [[1], [1]]})
    assert feed["ids"].dtype == np.int64
    assert feed["ids"].tolist() == [[2**53 + 1, 1], [2**63 - 1, -(2**63)]]
    assert two.coerce({"ids": [[2**53 + 1, 1.0]], "scale": [[1]]})["ids"].tolist() == [[2**53 + 1, 1]]
    with pytest.raises(RequestError) as info:
        two.coerce({"ids": [[2**63, 1.0]], "scale": [[1]]})
    assert str(info.value) == (
        "Input 'ids' expects int64 of shape [-1, 2]; the value 9223372036854775808 at [0, 0] is out of range for int64."
    )
    with pytest.raises(RequestError) as info:  # the value as it came, not an int made of it
        two.coerce({"ids": [[1e19, 1.0]], "scale": [[1]]})
    assert (
        str(info.value)
        == "Input 'ids' expects int64 of shape [-1, 2]; the value 1e+19 at [0, 0] is out of range for int64."
    )
    with pytest.raises(RequestError) as info:
        two.coerce({"ids": [[3, 2.5]], "scale": [[1]]})
    assert (
        str(info.value) == "Input 'ids' expects int64 of shape [-1, 2]; the value 2.5 at [0, 1] is not a whole number."
    )


def test_string_input_errors(models: Path) -> None:
    model = load(models / "strings.onnx")
    with pytest.raises(RequestError) as info:
        model.coerce(["a", 3])
    assert str(info.value) == "Input 'text' expects string of shape [-1]; the value 3 at [1] is not a string."
    with pytest.raises(RequestError) as info:
        model.coerce([b"\xff"])
    assert str(info.value) == "Input 'text' expects string of shape [-1]; the value b'\\xff' at [0] is not valid UTF-8."


@pytest.mark.parametrize("given", [["ok", "a\ud800"], np.array(["ok", "a\ud800"])], ids=["list", "numpy"])
def test_a_lone_surrogate_in_a_string_input_is_a_request_error(models: Path, given: Any) -> None:
    """JSON's "\\ud800" decodes to a str UTF-8 cannot carry: onnxruntime would fail on it as the model ran."""
    with pytest.raises(RequestError) as info:
        load(models / "strings.onnx").coerce(given)
    assert str(info.value) == (
        "Input 'text' expects string of shape [-1]; the value 'a\\ud800' at [1] holds '\\ud800' at 1, a lone "
        "surrogate (half a UTF-16 pair), which UTF-8 cannot carry."
    )


def test_wrong_fixed_size(models: Path) -> None:
    with pytest.raises(RequestError) as info:
        load(models / "fixed.onnx").coerce([1, 2, 3, 4])
    assert str(info.value) == "Input 'x' expects float32 of shape [2, 4]; got a list of 4 numbers."


def test_signature_key_is_a_request_error(linear: OnnxModel) -> None:
    with pytest.raises(RequestError) as info:
        linear.predict([1, 2, 3, 4], "serving_default")
    assert str(info.value) == "ONNX models have no signatures; got signature_key 'serving_default'."


def test_runtime_failure_is_a_handler_error(models: Path) -> None:
    model = load(models / "linear.onnx")

    class Session:
        def run(self, names: Any, feed: Any) -> Any:
            raise ort_state.RuntimeException("device lost")

    model.session = Session()
    with pytest.raises(HandlerError) as info:
        model.predict([1, 2, 3, 4])
    assert str(info.value) == "onnxruntime failed to run linear.onnx: device lost"


def test_a_run_goes_past_the_python_wrapper_to_the_compiled_session_and_answers_as_it(models: Path) -> None:
    """``OnnxModel._call`` calls ``InferenceSession._sess.run`` (onnxruntime's own wrapper calls it last): an
    onnxruntime that renamed it would leave every request on the slower way, so this names it."""
    model = load(models / "argmax.onnx")  # two outputs
    compiled = model.session._sess
    assert callable(compiled.run), "onnxruntime's InferenceSession has no _sess.run() any more"
    calls: list[tuple[Any, ...]] = []

    class Counting:
        def run(self, *args: Any) -> Any:
            calls.append(args)
            return compiled.run(*args)

    model.session._sess = Counting()
    feed = model.coerce([[1, 2, 3, 4], [0, 0, 0, 0]])
    outputs = model.run(feed)
    assert [len(call) for call in calls] == [3]
    names, fed, options = calls[0]
    assert (names, fed, options) == ([o.name for o in model.session.get_outputs()], feed, None)
    model.session._sess = compiled
    expected = model.session.run(None, feed)  # the public way, its checks included
    assert len(outputs) == len(expected) == 2
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_feed_of_onnxruntime_s_own_values_takes_the_wrapper_s_way_and_its_checks(
    models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """User code may call the model with OrtValues (onnx_client): the wrapper checks that they fit the session."""
    model = load(models / "linear.onnx")
    feed = model.coerce([[1, 2, 3, 4]])
    through_the_wrapper: list[Any] = []
    wrapped = model.session.run

    def recorded(names: Any, given: Any) -> Any:
        through_the_wrapper.append(given)
        return wrapped(names, given)

    monkeypatch.setattr(model.session, "run", recorded)
    expected = model.run(feed)
    assert through_the_wrapper == []  # numpy arrays: straight to the compiled session
    got = model.run({"x": onnxruntime.OrtValue.ortvalue_from_numpy(feed["x"])})
    assert len(through_the_wrapper) == 1
    np.testing.assert_array_equal(got[0], expected[0])


def test_a_feed_short_of_an_input_takes_the_wrapper_s_way_and_its_check(models: Path) -> None:
    model = load(models / "two.onnx")
    feed = model.coerce({"ids": [[1, 2]], "scale": [[0.5]]})
    del feed["scale"]
    with pytest.raises(HandlerError) as info:  # a feed of ours always holds every input: a bug, a 500
        model.run(feed)
    assert "Required inputs (['scale']) are missing" in str(info.value)


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        load(tmp_path / "missing.onnx")
    assert str(info.value) == f"Cannot load ONNX model {tmp_path / 'missing.onnx'}: the file does not exist."
    with pytest.raises(ModelLoadError) as info:
        load(tmp_path)
    assert str(info.value) == f"Cannot load ONNX model {tmp_path}: it is a directory; expected an .onnx file."
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    with pytest.raises(ModelLoadError) as info:
        load(bad)
    assert str(info.value).startswith(f"Cannot load ONNX model {bad}: [ONNXRuntimeError] : ")
    with pytest.raises(ModelLoadError) as batched:  # two sessions made at once: the error said once, the same
        load(bad, batching=True)
    assert str(batched.value) == str(info.value)


def test_mlp_builder(tmp_path: Path) -> None:
    model = load(onnx_mlp(tmp_path / "mlp.onnx", sizes=(8, 16, 2)))
    (y,) = model.predict(np.ones((5, 8)))
    assert y.shape == (5, 2)
    assert model.input_signature[0].shape == ["batch", 8]


# --- GPU -----------------------------------------------------------------------------------------

HAS_CUDA = "CUDAExecutionProvider" in onnxruntime.get_available_providers()  # the package is onnxruntime-gpu


def cuda_runs() -> bool:
    """Whether a session really comes up on CUDA (onnxruntime-gpu lists CUDA on a machine without a GPU too)."""
    if not HAS_CUDA:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        probe = str(onnx_identity(Path(tmp) / "probe.onnx"))
        try:
            session = onnxruntime.InferenceSession(probe, providers=["CUDAExecutionProvider"], enable_fallback=0)
        except Exception:
            return False
    return "CUDAExecutionProvider" in session.get_providers()


CUDA_RUNS = cuda_runs()


@pytest.mark.skipif(HAS_CUDA, reason="this onnxruntime has CUDA")
@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider' is not in available provider names")
def test_gpu_package_without_cuda_libraries(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # onnxruntime-gpu without a driver: CUDA is "available" but the session comes up on CPU only.
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: providers)
    with pytest.raises(ModelLoadError) as info:
        load(models / "linear.onnx", gpu=True)
    assert "could not start CUDA for linear.onnx (the session came up with ['CPUExecutionProvider'])" in str(info.value)
    assert "NVIDIA driver or the CUDA/cuDNN libraries" in str(info.value)
    assert load(models / "linear.onnx", gpu=True, allow_cpu_fallback=True).device == "CPUExecutionProvider"


@pytest.fixture
def cuda_fails(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """onnxruntime-gpu on a machine where the CUDA provider fails to start: the session raises for CUDA.

    What onnxruntime raises there (a CUDA library that does not load, no device, an option it
    refuses); it would then make a CPU session by itself, unless told ``enable_fallback=0``.
    """
    made: list[dict[str, Any]] = []
    real = onnxruntime.InferenceSession

    def session(path: str, options: Any = None, providers: Any = None, **kwargs: Any) -> Any:
        made.append({"providers": [p for p, _ in providers], **kwargs})
        if providers[0][0] == "CUDAExecutionProvider":
            raise RuntimeError("CUDA_PATH is set but CUDA wasn't able to be loaded")
        return real(path, options, providers=providers, **kwargs)

    monkeypatch.setattr(
        onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    monkeypatch.setattr(onnxruntime, "InferenceSession", session)
    return made


def test_a_cuda_provider_that_fails_to_start_is_named_not_run_on_cpu(
    models: Path, cuda_fails: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ModelLoadError) as info:
        load(models / "linear.onnx", gpu=True)
    assert str(info.value).startswith(
        f"A GPU was requested (compute.gpu) but onnxruntime-gpu {onnxruntime.__version__} could not start CUDA for "
        "linear.onnx: CUDA_PATH is set but CUDA wasn't able to be loaded"
    )
    assert all(made["enable_fallback"] == 0 for made in cuda_fails)
    with caplog.at_level(logging.WARNING, logger="localserve"):
        assert load(models / "linear.onnx", gpu=True, allow_cpu_fallback=True).device == "CPUExecutionProvider"
    assert caplog.text.count("could not start CUDA") == 1  # once, with onnxruntime's reason
    assert "could not start CUDA for linear.onnx: CUDA_PATH is set" in caplog.text
    (models / "broken.onnx").write_bytes(b"not a model")  # the model's own error stays the model's
    with pytest.raises(ModelLoadError) as info:
        load(models / "broken.onnx", gpu=True)
    assert str(info.value).startswith(f"Cannot load ONNX model {models / 'broken.onnx'}: ")


def test_a_cuda_failure_in_a_run_is_a_500_not_the_client_s_input(models: Path) -> None:
    """CUDA's errors come as FAIL, which onnxruntime also raises for a feed that does not fit the graph."""
    model = load(models / "linear.onnx")

    class Session:
        def run(self, names: Any, feed: Any) -> Any:
            raise ort_state.Fail("[ONNXRuntimeError] : 1 : FAIL : CUDA failure 2: out of memory ; GPU=0")

    model.session, model.device = Session(), "CUDAExecutionProvider"
    with pytest.raises(HandlerError) as info:
        model.predict([1, 2, 3, 4])
    assert str(info.value) == (
        "onnxruntime failed to run linear.onnx on the GPU: [ONNXRuntimeError] : 1 : FAIL : CUDA failure 2: out of "
        "memory ; GPU=0"
    )
    model.device = "CPUExecutionProvider"  # the same FAIL on the CPU is about the input, as before
    with pytest.raises(RequestError):
        model.predict([1, 2, 3, 4])


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_RUNS, reason="needs onnxruntime-gpu and a CUDA GPU")
def test_gpu_runs_on_cuda(models: Path) -> None:
    model = load(models / "linear.onnx", gpu=True)
    assert model.device == "CUDAExecutionProvider"
    probabilities, _ = model.predict([1, 2, 3, 4])
    np.testing.assert_allclose(probabilities, linear_reference([1, 2, 3, 4])[0], rtol=1e-5)


def test_long_float_lists_are_checked_like_short_ones(tmp_path: Path) -> None:
    """Past 32 numbers the range is checked by numpy, not by Python's min and max: same answers."""
    model = load(onnx_identity(tmp_path / "id.onnx", shape=["n"]))
    numbers = [i / 7 for i in range(40)]
    assert model.coerce(numbers)["x"].tolist() == np.array(numbers, dtype=np.float32).tolist()
    with pytest.raises(RequestError) as info:
        model.coerce([*numbers[:35], 1e39, *numbers[36:]])
    assert (
        str(info.value)
        == "Input 'x' expects float32 of shape [-1]; the value 1e+39 at [35] is out of range for float32."
    )
    with_nan = model.coerce([*numbers[:35], float("nan"), float("inf"), 2**70, *numbers[38:]])["x"]
    assert np.isnan(with_nan[35]) and np.isinf(with_nan[36]) and with_nan[37] == np.float32(2**70)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_RUNS, reason="needs onnxruntime-gpu and a CUDA GPU")
def test_gpu_batch_sizes_each_have_a_warmed_session(tmp_path: Path) -> None:
    from localserve.engine.batcher import Batcher

    model = load(onnx_batch_echo(tmp_path / "echo.onnx"), gpu=True)
    assert model.device == "CUDAExecutionProvider" and model._per_bucket
    batcher = Batcher("echo", model, buckets=(1, 2, 4, 8), interval=0.0, deliver=lambda _: None)
    batcher.warm()
    sessions = dict(model._buckets)
    assert sorted(sessions) == [1, 2, 4, 8] and len({id(s) for s in sessions.values()}) == 4
    feeds = [{"x": np.full((n, 4), float(n), np.float32)} for n in (1, 2, 2)]  # 5 rows: run as 8
    for (_, out), feed in zip(batcher.run(list(enumerate(feeds))), feeds, strict=True):
        np.testing.assert_allclose(out[0], feed["x"] + 8)
    assert model._buckets == sessions


def test_inputs_that_disagree_on_a_dimension_they_share_are_a_400(models: Path) -> None:
    """``ids [batch, 2]`` and ``scale [batch, 1]``: 6 rows of one and 3 of the other would fail inside onnxruntime
    (a broadcast error, its RUNTIME_EXCEPTION: a 500); it is the request's fault (schemathesis found it)."""
    model = load_model("onnx", models / "two.onnx", ApiOptions())
    with pytest.raises(RequestError) as caught:
        model.run({"ids": np.zeros((6, 2), np.int64), "scale": np.zeros((3, 1), np.float32)})
    assert str(caught.value) == (
        "The inputs must agree on dimension 'batch', which the model gives to each of them; 'ids' has 6, "
        "'scale' has 3. Send the same size in every input that has it."
    )
    out = model.run({"ids": np.ones((3, 2), np.int64), "scale": np.full((3, 1), 2.0, np.float32)})
    assert out[0].tolist() == [[2.0, 2.0]] * 3


def test_a_batch_of_one_row_is_checked_in_place_like_any_other(tmp_path: Path) -> None:
    """A one-row batch, the common request, has its row's numbers checked without a copy: same answers."""
    model = load(onnx_identity(tmp_path / "id.onnx", shape=["batch", 3]))
    assert model.coerce([[1, 2.5, 3]])["x"].tolist() == [[1.0, 2.5, 3.0]]
    assert model.coerce(([1, 2.5, 3],))["x"].tolist() == [[1.0, 2.5, 3.0]]
    refusals = {
        "[[1.0, true, 3.0]]": "the value True at [0, 1] is a boolean, not a number",
        '[[1.0, "2", 3.0]]': "the value '2' at [0, 1] is a string, not a number",
        "[[1.0, 1e39, 3.0]]": "the value 1e+39 at [0, 1] is out of range for float32",
    }
    for body, why in refusals.items():
        with pytest.raises(RequestError) as info:
            model.coerce(json.loads(body))
        assert str(info.value) == f"Input 'x' expects float32 of shape [-1, 3]; {why}."
    with pytest.raises(RequestError) as info:
        model.coerce([[[1.0, 2.0], [3.0]]])  # a ragged row inside the one row
    assert "Input 'x' expects float32 of shape [-1, 3]; got " in str(info.value)
