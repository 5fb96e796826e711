"""Model runtimes, one module per format, behind the Model protocol.

Heavy imports (onnxruntime, tensorflow, boto3) happen only inside the modules named in
RUNTIMES, when an API that needs them is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from localserve.config.options import ApiOptions
from localserve.errors import ModelLoadError, NoGpu, RequestError
from localserve.messages.lists import Feed as Feed
from localserve.messages.lists import summarize_value as summarize_value
from localserve.runtimes.preinit import tf_preinit_lines

RUNTIMES = {
    "onnx": "localserve.runtimes.onnx:OnnxModel",
    "tensorflow": "localserve.runtimes.tensorflow:TensorFlowModel",
}


class Model(Protocol):
    """A loaded model, callable from any worker thread."""

    format: str  # "onnx" | "tensorflow"
    device: str  # where it runs, for logs and GET /<api>: "CPUExecutionProvider", "CUDAExecutionProvider", "/GPU:0"

    @property
    def input_signature(self) -> Any:
        """What pre_inference gets: list[onnxruntime.NodeArg] (ONNX), map<str, SignatureDef> (TF)."""

    @property
    def output_signature(self) -> Any:
        """What post_inference gets: list[onnxruntime.NodeArg] (ONNX), map<str, SignatureDef> (TF)."""

    def describe(self) -> dict[str, Any]:
        """JSON-able {"inputs": [{"name", "type", "shape"}], "outputs": [...], "device": ...}."""

    def coerce(self, value: Any) -> Feed:
        """pre_inference's return (or the raw sample) -> arrays; RequestError (400) naming input, type, shape."""

    def run(self, feed: Feed, bucket: int | None = None) -> Any:
        """Run once. ONNX: list of arrays in output order; TensorFlow: dict output name -> array.

        ``bucket`` is the batch size of a padded batch (one of the engine's fixed sizes): a runtime
        that must keep one state per input shape (onnxruntime's CUDA provider) picks it by this.
        """

    def batch_inputs(self) -> dict[str, tuple[np.dtype[Any], tuple[int, ...]]] | None:
        """Input name -> (dtype, shape without the batch dimension) when every input has a free batch
        dimension and fixed other ones (so each batch size can be warmed up); else None."""


# The package each runtime imports, looked for (never imported) by ``require_runtime``.
RUNTIME_PACKAGES = {"onnx": "onnxruntime", "tensorflow": "tensorflow"}


def require_runtime(model_format: str) -> str:
    """The runtime of ``model_format`` ("module:Class"); ModelLoadError when the format is unknown or its package
    is not installed. Looks for the package without importing it: ``serve`` and ``localserve check`` both ask."""
    try:
        target = RUNTIMES[model_format]
    except KeyError:
        raise ModelLoadError(f"Unknown model format {model_format!r}; expected one of {', '.join(RUNTIMES)}.") from None
    package = RUNTIME_PACKAGES[model_format]
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a parent package that fails, or a module without a spec
        found = False
    if not found:
        raise _not_installed(model_format, f"No module named {package!r}")
    return target


def _not_installed(model_format: str, reason: object) -> ModelLoadError:
    extra = "onnx" if model_format == "onnx" else "tensorflow"
    return ModelLoadError(
        f"The {model_format} runtime is not installed ({reason}); install it with: pip install 'localserve[{extra}]'."
    )


def load_model(model_format: str, path: Path, options: ApiOptions) -> Model:
    """Open the model at ``path`` (already fetched locally) with the runtime for ``model_format``."""
    module_name, _, class_name = require_runtime(model_format).partition(":")
    try:
        if model_format == "tensorflow":
            with _FIRST_TF_IMPORT:  # two first loads at once would each save and restore descriptor 2 (stderr)
                module = _import_tensorflow_runtime(module_name)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _not_installed(model_format, exc) from None
    model: Model = getattr(module, class_name)(path, options)
    return model


_FIRST_TF_IMPORT = threading.Lock()


def _import_tensorflow_runtime(module_name: str) -> Any:
    """Our TensorFlow runtime's module; TensorFlow's first import with its pre-init lines filtered."""
    if "tensorflow" in sys.modules:
        return importlib.import_module(module_name)
    with tf_preinit_lines(os.environ.get("TF_CPP_MIN_LOG_LEVEL")):  # its first lines obey it too
        return importlib.import_module(module_name)


def no_gpu(why: str, options: ApiOptions) -> None:
    """A GPU was requested but ``why`` it cannot be used: NoGpu, or a warning with ``--allow-cpu-fallback``."""
    error = NoGpu(why)
    if not options.allow_cpu_fallback:
        raise error
    logging.getLogger("localserve").warning("%s", error.fallback)


def default_threads(replicas: int = 1) -> int:
    """Intra-op threads for one replica: the cores this process may use, divided among ``replicas``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, replicas))


def spinning(replicas: int = 1, api_threads: int = 1) -> bool:
    """Whether intra-op threads may spin-wait between calls: only when one replica and one API thread own the cores.

    Spinning spares a small model's call the pool's wake-up, but burns cores other busy threads need: several replicas'
    spinning pools starve each other, and with ``threads_per_process`` > 1 the pool takes the core the API's other
    threads decode on (benchmarks/README.md).
    """
    return replicas <= 1 and api_threads <= 1


SPIN_SECONDS = 0.002
SPIN_LIMIT = 0.02


def spin_duration_us(batch_interval: float = 0.0) -> int:
    """How long a spinning intra-op thread spins after its work before it sleeps, in microseconds.

    onnxruntime's own spin keeps a core busy at light load. The bound covers the gaps between calls under load
    (``SPIN_SECONDS``, plus the ``batch_interval`` a batcher waits) up to ``SPIN_LIMIT``, past which a wake-up costs
    less than a busy core (benchmarks/README.md, "a bounded spin"); an older onnxruntime ignores it.
    """
    return round(min(SPIN_SECONDS + max(0.0, batch_interval), SPIN_LIMIT) * 1_000_000)


def fixed_rest(
    inputs: Sequence[tuple[str, np.dtype[Any] | None, Sequence[int | None] | None]],
) -> dict[str, tuple[np.dtype[Any], tuple[int, ...]]] | None:
    """``batch_inputs`` from (name, dtype, dims) triples; free dimensions are None or negative."""
    found: dict[str, tuple[np.dtype[Any], tuple[int, ...]]] = {}
    for name, dtype, dims in inputs:
        if dtype is None or not dims or (dims[0] is not None and dims[0] >= 0):
            return None
        rest = dims[1:]
        if any(d is None or d < 0 for d in rest):
            return None
        found[name] = (dtype, tuple(int(d) for d in rest if d is not None))
    return found


def shared_dims(
    inputs: Sequence[tuple[str, Sequence[Any] | None]],
) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """The dimensions that several inputs name alike in the model (``ids [batch, 2]``, ``scale [batch, 1]``):
    (dimension name, ((input, axis), ...)) for each name found at two places or more."""
    places: dict[str, list[tuple[str, int]]] = {}
    for input_name, dims in inputs:
        for axis, dim in enumerate(dims or ()):
            if isinstance(dim, str) and dim:
                places.setdefault(dim, []).append((input_name, axis))
    return tuple((dim, tuple(where)) for dim, where in places.items() if len(where) > 1)


def check_shared(feed: Mapping[str, Any], shared: Sequence[tuple[str, Sequence[tuple[str, int]]]]) -> None:
    """A RequestError when the inputs of ``feed`` give different sizes to a dimension the model names alike
    (the runtime would fail on it deep inside, as an error of its own)."""
    for dim, places in shared:
        sizes = [
            (name, arr.shape[axis])
            for name, axis in places
            if (arr := feed.get(name)) is not None and getattr(arr, "ndim", 0) > axis
        ]
        if len({size for _, size in sizes}) > 1:
            given = ", ".join(f"{name!r} has {size}" for name, size in sizes)
            raise RequestError(
                f"The inputs must agree on dimension {dim!r}, which the model gives to each of them; {given}. "
                "Send the same size in every input that has it."
            )
