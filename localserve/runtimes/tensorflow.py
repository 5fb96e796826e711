"""TensorFlow SavedModels, in process (no TF Serving): one concrete function per signature."""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from localserve.config.options import ApiOptions
from localserve.errors import HandlerError, ModelLoadError, RequestError
from localserve.messages.arrays import STRING, expectation, to_array
from localserve.runtimes import Feed, default_threads, fixed_rest, no_gpu, summarize_value
from localserve.runtimes.feed import coerce_feed

logger = logging.getLogger("localserve")

FALLBACK_KEYS = ("serving_default", "predict")  # Cortex's default, then older Cortex's


class _Signature:
    """One signature's concrete function and its inputs, as coerce needs them."""

    def __init__(self, key: str, function: Any) -> None:
        self.key = key
        self.function = function
        self.inputs: dict[str, Any] = dict(sorted(function.structured_input_signature[1].items()))
        self.outputs: dict[str, Any] = dict(function.structured_outputs)
        self.expected = ", ".join(
            f"{name!r} ({expectation(_numpy_dtype(spec.dtype), _dims(spec.shape))})"
            for name, spec in self.inputs.items()
        )
        self.coercers = {
            name: functools.partial(
                to_array, name, dtype=_numpy_dtype(spec.dtype), shape=_dims(spec.shape), keep_bytes=True
            )
            for name, spec in self.inputs.items()
        }

    def coerce(self, value: Any) -> Feed:
        """Cortex's model input (a dict of input name -> value, or the value alone) -> the function's feed."""
        return coerce_feed(value, self.coercers, self.expected, self.key)


class TensorFlowModel:
    """A SavedModel loaded with ``tf.saved_model.load``; ``run`` is safe from any worker thread."""

    format = "tensorflow"

    def __init__(self, path: Path, options: ApiOptions) -> None:
        self.path = Path(path)
        _require_saved_model(self.path)
        self.device = _choose_device(options)
        try:
            with tf.device(self.device):
                self._loaded = tf.saved_model.load(str(self.path))
        except Exception as exc:
            raise ModelLoadError(f"Cannot load TensorFlow model {self.path}: {exc}") from None
        self._signature_defs = _read_signature_defs(self.path)
        available = sorted(self._loaded.signatures.keys())
        # None when the model has several signatures and none is the default: a TensorFlowPredictor
        # then names one in tensorflow_client.predict(x, signature_key); a request handler API cannot load.
        self.signature_key = _choose_signature(available, options.signature_key, self.path)
        self._signatures = {key: _Signature(key, self._loaded.signatures[key]) for key in available}
        self._default_signature = None if self.signature_key is None else self._signatures[self.signature_key]

    @property
    def _default(self) -> _Signature:
        if self._default_signature is None:
            raise RequestError(
                f"TensorFlow model {self.path.name} has several signatures "
                f"({', '.join(map(repr, self._signatures))}) and none is chosen; pass the key as "
                "tensorflow_client.predict(model_input, signature_key=...) or set tf_signature_key."
            )
        return self._default_signature

    def require_signature(self) -> None:
        """ModelLoadError unless one signature is chosen (APIs that run the model on each request need one)."""
        if self._default_signature is None:
            raise _none_chosen(self.path, list(self._signatures))

    @property
    def input_signature(self) -> dict[str, Any]:
        """The SavedModel's SignatureDef protos by key (``map<string, SignatureDef>``, as Cortex gave it)."""
        return self._signature_defs

    @property
    def output_signature(self) -> dict[str, Any]:
        """The signatures' outputs, as ``post_inference`` gets them."""
        return self._signature_defs

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: format, device, signature key, inputs and outputs."""
        if self._default_signature is None:
            return {
                "format": self.format,
                "device": self.device,
                "signature_key": None,
                "signatures": sorted(self._signatures),
            }
        sig = self._default_signature
        return {
            "format": self.format,
            "device": self.device,
            "signature_key": sig.key,
            "inputs": [_describe_spec(name, spec) for name, spec in sorted(sig.inputs.items())],
            "outputs": [_describe_spec(name, spec) for name, spec in sorted(sig.outputs.items())],
        }

    def coerce(self, value: Any) -> Feed:
        """Cortex's model input -> the feed of the API's signature."""
        return self._default.coerce(value)

    def run(self, feed: Feed, bucket: int | None = None) -> dict[str, np.ndarray[Any, Any]]:
        """Run the API's signature once; output name -> array."""
        # A signature's concrete function takes any batch size without retracing: no state per size.
        return self._run(self._default, feed)

    def batch_inputs(self) -> dict[str, tuple[np.dtype[Any], tuple[int, ...]]] | None:
        """Input name -> (dtype, shape without the batch dimension) when the signature can be batched; else None."""
        return fixed_rest(
            [(name, _numpy_dtype(spec.dtype), _dims(spec.shape)) for name, spec in self._default.inputs.items()]
        )

    def predict(self, value: Any, signature_key: str | None = None) -> dict[str, np.ndarray[Any, Any]]:
        """Coerce and run against ``signature_key`` (default: the API's signature): ``tensorflow_client.predict``."""
        sig = self._default if signature_key is None else self._signatures.get(signature_key)
        if sig is None:
            raise RequestError(
                f"Unknown signature {signature_key!r}; the model has {', '.join(map(repr, self._signatures))}."
            )
        return self._run(sig, sig.coerce(value))

    def _run(self, sig: _Signature, feed: Feed) -> dict[str, np.ndarray[Any, Any]]:
        try:
            with tf.device(self.device):
                tensors = {name: tf.constant(feed[name], dtype=spec.dtype) for name, spec in sig.inputs.items()}
                outputs = sig.function(**tensors)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as exc:
            got = ", ".join(f"{k!r} as {summarize_value(v)}" for k, v in feed.items())
            raise RequestError(
                f"Signature {sig.key!r} expects {sig.expected}; got {got}. TensorFlow said: {_first_line(exc)}"
            ) from None
        except Exception as exc:
            raise HandlerError(f"TensorFlow failed to run {self.path.name}: {_first_line(exc)}") from exc
        return {name: tensor.numpy() for name, tensor in outputs.items()}


def _choose_device(options: ApiOptions) -> str:
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        try:
            # Grab memory as needed, so replicas and other processes can share the card.
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # the runtime is already initialised (a second model): growth was set then
            pass
    try:
        tf.config.threading.set_intra_op_parallelism_threads(options.threads or default_threads(options.replicas))
    except RuntimeError:
        pass
    if not options.gpu:
        return "/CPU:0"
    if gpus:
        return "/GPU:0"
    why = (
        f"TensorFlow {tf.__version__} sees no GPU (built with CUDA: {tf.test.is_built_with_cuda()}); install "
        "'tensorflow[and-cuda]' (pip install 'localserve[tensorflow-gpu]') on a machine with an NVIDIA driver, "
        "and check that CUDA_VISIBLE_DEVICES does not hide the card"
    )
    no_gpu(why, options)
    return "/CPU:0"


def inspect_saved_model(path: Path, signature_key: str | None, *, needs_signature: bool) -> None:
    """What loading the SavedModel at ``path`` would refuse about it, read from saved_model.pb alone (no graph is
    loaded: ``localserve check``): ModelLoadError when it is no SavedModel, has no signature ``signature_key``, or,
    ``needs_signature`` (an API that runs it on each request), has several and none is chosen."""
    _require_saved_model(path)
    available = sorted(_read_signature_defs(path))
    if _choose_signature(available, signature_key, path) is None and needs_signature:
        raise _none_chosen(path, available)


def _require_saved_model(path: Path) -> None:
    if not (path / "saved_model.pb").is_file():
        what = "does not exist" if not path.exists() else "has no saved_model.pb"
        raise ModelLoadError(
            f"Cannot load TensorFlow model {path}: it {what}; expected a SavedModel directory "
            "(saved_model.pb and variables/), as tf.saved_model.save writes it."
        )


def _none_chosen(path: Path, available: list[str]) -> ModelLoadError:
    return ModelLoadError(
        f"TensorFlow model {path} has several signatures and none is 'serving_default'; "
        f"set tf_signature_key to one of {', '.join(map(repr, available))}."
    )


def _choose_signature(available: list[str], wanted: str | None, path: Path) -> str | None:
    listed = ", ".join(map(repr, available)) or "none"
    if wanted is not None:
        if wanted not in available:
            raise ModelLoadError(
                f"TensorFlow model {path} has no signature {wanted!r} (tf_signature_key); its signatures: {listed}."
            )
        return wanted
    if len(available) == 1:
        return available[0]
    for key in FALLBACK_KEYS:
        if key in available:
            return key
    return None


def _read_signature_defs(path: Path) -> dict[str, Any]:
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((path / "saved_model.pb").read_bytes())
    if not saved.meta_graphs:
        return {}
    defs = saved.meta_graphs[0].signature_def
    # __saved_model_init_op is TF's own initialiser, not a signature a user can call.
    return {key: defs[key] for key in sorted(defs) if not key.startswith("__")}


def _numpy_dtype(dtype: Any) -> np.dtype[Any]:
    return STRING if dtype == tf.string else np.dtype(dtype.as_numpy_dtype)


def _dims(shape: Any) -> list[int | None] | None:
    return None if shape.rank is None else list(shape.as_list())


def _describe_spec(name: str, spec: Any) -> dict[str, Any]:
    dtype = "string" if spec.dtype == tf.string else spec.dtype.name
    return {"name": name, "type": dtype, "shape": _dims(spec.shape)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0] if text else text
