"""ONNX models on onnxruntime: CPU by default, CUDA when the API asks for a GPU."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

from localserve.config.options import ApiOptions
from localserve.errors import HandlerError, ModelLoadError, RequestError
from localserve.messages.arrays import STRING, expectation, to_array
from localserve.runtimes import (
    Feed,
    check_shared,
    fixed_rest,
    no_gpu,
    shared_dims,
    spinning,
    summarize_value,
)
from localserve.runtimes.feed import coerce_feed
from localserve.runtimes.onnx_sessions import CPU, CUDA, execution_providers, in_thread, quiet_options, session_options

logger = logging.getLogger("localserve")

DTYPES: dict[str, np.dtype[Any]] = {
    "tensor(float)": np.dtype(np.float32),
    "tensor(double)": np.dtype(np.float64),
    "tensor(float16)": np.dtype(np.float16),
    "tensor(int8)": np.dtype(np.int8),
    "tensor(int16)": np.dtype(np.int16),
    "tensor(int32)": np.dtype(np.int32),
    "tensor(int64)": np.dtype(np.int64),
    "tensor(uint8)": np.dtype(np.uint8),
    "tensor(uint16)": np.dtype(np.uint16),
    "tensor(uint32)": np.dtype(np.uint32),
    "tensor(uint64)": np.dtype(np.uint64),
    "tensor(bool)": np.dtype(np.bool_),
    "tensor(string)": STRING,
}
"""NodeArg.type -> the numpy dtype of the array fed to session.run."""

INPUT_ERRORS = (ort_state.InvalidArgument, ort_state.Fail)  # onnxruntime's: the feed does not fit the graph
# ...except a FAIL from the device ("CUDA failure 2: out of memory"): the server's problem, a 500.
DEVICE_FAILURE = re.compile(r"CUDA|CUDNN|CUBLAS|out of memory", re.IGNORECASE)


class _Input:
    """What coerce needs to know about one NodeArg, computed once at load."""

    def __init__(self, arg: Any) -> None:
        self.name: str = arg.name
        self.type: str = arg.type
        self.dtype: np.dtype[Any] | None = DTYPES.get(arg.type)
        dims = arg.shape if isinstance(arg.shape, list) else None
        # Symbolic dimensions are free (-1); unnamed unknown ones are taken as 1 (Cortex did so).
        self.shape: list[int] | None = None if dims is None else cortex_dims(dims)
        self.unsized = unsized_dims(dims)
        self.text = expectation(self.dtype, self.shape) if self.dtype is not None else arg.type

    def coerce(self, value: Any) -> Any:
        if self.dtype is None:  # sequences, maps, or a tensor type numpy lacks: onnxruntime decides
            return value
        # More than one free dimension: the array keeps its shape and onnxruntime judges it (Cortex did so).
        if not self.unsized:
            return to_array(self.name, value, self.dtype, self.shape, check_shape=False)
        try:
            return to_array(self.name, value, self.dtype, self.shape, check_shape=False)
        except RequestError as exc:
            if " of shape " not in str(exc).partition("; got ")[2]:
                raise
            which = ", ".join(map(str, self.unsized))
            raise RequestError(
                f"{str(exc).rstrip('.')}. Dimension {which} has no size in the model; as on Cortex it is taken as 1 "
                "(name it in the model, or send one row)."
            ) from None


class OnnxModel:
    """An ONNX model in an onnxruntime InferenceSession; ``run`` is safe from any thread."""

    format = "onnx"

    def __init__(self, path: Path, options: ApiOptions) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise ModelLoadError(f"Cannot load ONNX model {self.path}: the file does not exist.")
        if self.path.is_dir():
            raise ModelLoadError(f"Cannot load ONNX model {self.path}: it is a directory; expected an .onnx file.")
        self._providers = execution_providers(options)
        providers = [p for p, _ in self._providers]
        # Spin-waiting threads burn the cores that the HTTP side needs (see ``spinning``).
        spin = spinning(options.replicas, options.api_threads)
        self._sess_options = session_options(options, spin)
        # A batching CPU API's second session (``quiet_options``) is made beside the first, on a thread of its own:
        # onnxruntime builds a session mostly without the GIL, so with a core free the two take about the time of one.
        cpu_only = providers == [CPU]
        self._quiet = quiet_options(self.path, options, spin, CPU) if cpu_only else None
        self._stacked: Any = None  # the stacked calls' session
        beside = None if self._quiet is None else in_thread(self._new_session, self._quiet, "localserve-onnx-session")
        try:
            self.session = self._open_first(options)
        except BaseException:
            if beside is not None:
                beside.exception()  # waited for: the same model's error, of which the first session's is said
            raise
        self.device: str = self.session.get_providers()[0]
        # onnxruntime's CUDA provider re-plans every convolution when the input shape changes, even back
        # to a shape it has seen, and that pause outlasts many batches: on a GPU each batch size the
        # engine uses gets a session of its own, made and warmed before traffic.
        self._per_bucket = self.device == CUDA
        self._buckets: dict[int, Any] = {}
        self._bucket_lock = threading.Lock()
        if beside is not None:
            self._stacked = beside.result()
        elif not cpu_only:  # the GPU asked for, and the CPU serving: made on the first stacked call
            self._quiet = quiet_options(self.path, options, spin, self.device)
        self._lone = True  # the last bucketed call was of one row: the next lone one may run on the spinning pool
        self._inputs = [_Input(arg) for arg in self.session.get_inputs()]
        self._shared = shared_dims(
            [(a.name, a.shape if isinstance(a.shape, list) else None) for a in self.session.get_inputs()]
        )
        self._output_names = [o.name for o in self.session.get_outputs()]
        self._coercers = {i.name: i.coerce for i in self._inputs}
        self._expected = ", ".join(f"{i.name!r} ({i.text})" for i in self._inputs)

    @property
    def input_signature(self) -> list[Any]:
        """The session's inputs as onnxruntime.NodeArg (``.name``, ``.type``, ``.shape``)."""
        return list(self.session.get_inputs())

    @property
    def output_signature(self) -> list[Any]:
        """The session's outputs as onnxruntime.NodeArg."""
        return list(self.session.get_outputs())

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: format, device, inputs and outputs (name, type, shape)."""
        return {
            "format": self.format,
            "device": self.device,
            "inputs": [_describe_arg(a) for a in self.session.get_inputs()],
            "outputs": [_describe_arg(a) for a in self.session.get_outputs()],
        }

    def coerce(self, value: Any) -> Feed:
        """Cortex's model input (a dict of input name -> value, or the value alone) -> the session's feed."""
        return coerce_feed(value, self._coercers, self._expected)

    def batch_inputs(self) -> dict[str, tuple[np.dtype[Any], tuple[int, ...]]] | None:
        """Input name -> (dtype, shape without the batch dimension) when the model can be batched; else None."""
        return fixed_rest([(i.name, i.dtype, i.shape) for i in self._inputs])

    def _open_first(self, options: ApiOptions) -> Any:
        """The model's own session: on CUDA when asked and it starts, else on the CPU (``no_gpu`` decides)."""
        providers = [p for p, _ in self._providers]
        try:
            session = self._open()
        except Exception as exc:
            if CUDA not in providers:
                raise ModelLoadError(f"Cannot load ONNX model {self.path}: {_reason(exc)}") from None
            # onnxruntime would have fallen back to the CPU on its own, printing why on stdout; here
            # the CPU tells whether the model or the GPU failed, and the GPU's reason is kept.
            self._providers, providers = [(CPU, {})], [CPU]
            session = self._new_session()  # the model's own error, if it is the model
            no_gpu(
                f"onnxruntime-gpu {onnxruntime.__version__} could not start CUDA for {self.path.name}: {_reason(exc)}",
                options,
            )
        used = session.get_providers()
        if options.gpu and CUDA in providers and CUDA not in used:
            no_gpu(
                f"onnxruntime-gpu {onnxruntime.__version__} could not start CUDA for {self.path.name} (the session "
                f"came up with {used}): the NVIDIA driver or the CUDA/cuDNN libraries it needs are missing or do not "
                "match; onnxruntime's log above names the library that failed to load. Install the driver and the "
                f"CUDA and cuDNN versions listed for onnxruntime-gpu {onnxruntime.__version__} "
                "(e.g. pip install 'onnxruntime-gpu[cuda,cudnn]')",
                options,
            )
        return session

    def _open(self, sess_options: Any = None) -> Any:
        """A session on ``_providers``, never onnxruntime's silent CPU fallback: ``enable_fallback=0``.

        On a CUDA failure, at creation or in a run, onnxruntime would switch to the CPU by itself,
        saying so on stdout only, while the API still said CUDA.
        """
        return onnxruntime.InferenceSession(
            str(self.path), sess_options or self._sess_options, providers=self._providers, enable_fallback=0
        )

    def _new_session(self, sess_options: Any = None) -> Any:
        try:
            return self._open(sess_options)
        except Exception as exc:
            raise ModelLoadError(f"Cannot load ONNX model {self.path}: {_reason(exc)}") from None

    def _stacked_session(self) -> Any:
        """The session of the stacked calls (``quiet_options``): made at load beside the model's own, or, where
        the CPU serves an API that asked for the GPU, on the first stacked call (the batch sizes' warm-up at load
        when the input shapes are known)."""
        session = self._stacked
        if session is None:
            with self._bucket_lock:
                if self._stacked is None:
                    self._stacked = self._new_session(self._quiet)
                session = self._stacked
        return session

    def _session_for(self, bucket: int) -> Any:
        """The session of batch size ``bucket`` (on a GPU). ``self.session`` is not one of them: it takes
        the calls of any other shape (``predict``, feeds that cannot be stacked), which would make a
        bucket's session re-plan."""
        session = self._buckets.get(bucket)
        if session is None:
            with self._bucket_lock:
                session = self._buckets.get(bucket)
                if session is None:
                    session = self._buckets[bucket] = self._new_session()
        return session

    def run(self, feed: Feed, bucket: int | None = None) -> list[Any]:
        """Run the session once (the bucket's own session on a GPU, the stacked calls' own on a batching CPU API:
        ``quiet_options``); onnxruntime's input errors are 400s."""
        if bucket is None:
            session = self.session
        elif self._per_bucket:
            session = self._session_for(bucket)
        else:  # the spinning pool for lone calls in a row (concurrency 1), the quiet one once calls are stacked
            after_lone, self._lone = self._lone, bucket == 1
            session = self.session if self._quiet is None or (after_lone and self._lone) else self._stacked_session()
        if self._shared:  # the inputs' agreement on a dimension they share: a 400, not the runtime's failure
            check_shared(feed, self._shared)
        try:
            outputs: list[Any] = self._call(session, feed)
        except INPUT_ERRORS as exc:
            if self.device == CUDA and DEVICE_FAILURE.search(str(exc)):  # FAIL is also what CUDA's errors are
                raise HandlerError(f"onnxruntime failed to run {self.path.name} on the GPU: {_reason(exc)}") from None
            got = ", ".join(f"{k!r} as {summarize_value(v)}" for k, v in feed.items())
            raise RequestError(
                f"The model expects {self._expected}; got {got}. onnxruntime said: {_reason(exc)}"
            ) from None
        except Exception as exc:
            raise HandlerError(f"onnxruntime failed to run {self.path.name}: {_reason(exc)}") from exc
        return outputs

    def _call(self, session: Any, feed: Feed) -> list[Any]:
        """``session.run(None, feed)``, past the checks of onnxruntime's Python wrapper where they cannot fail.

        The wrapper checks every call's inputs, a share of a small model's call (benchmarks/README.md). Our feeds hold
        every input as numpy arrays (``coerce``, V2's decoding): they go to the compiled session the wrapper calls last
        (its ``_sess``, named by ``tests/runtimes/test_onnx.py``), other feeds through the wrapper.
        """
        compiled = getattr(session, "_sess", None)
        if compiled is None or len(feed) != len(self._inputs) or any(type(v) is not np.ndarray for v in feed.values()):
            return session.run(None, feed)  # type: ignore[no-any-return]
        return compiled.run(self._output_names, feed, None)  # type: ignore[no-any-return]

    def predict(self, value: Any, signature_key: str | None = None) -> list[Any]:
        """Coerce and run: Cortex's ``onnx_client.predict(model_input)``."""
        if signature_key is not None:
            raise RequestError(f"ONNX models have no signatures; got signature_key {signature_key!r}.")
        return self.run(self.coerce(value))


def _reason(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def cortex_dims(dims: list[Any]) -> list[int]:
    """ONNX dimensions as Cortex's ONNX client took them: a named one is free (-1), one with no size is 1."""
    return [-1 if isinstance(d, str) else 1 if d is None else int(d) for d in dims]


def unsized_dims(dims: list[Any] | None) -> list[int]:
    """The positions of the dimensions with neither a size nor a name (skl2onnx's default batch dimension)."""
    return [i for i, d in enumerate(dims or []) if d is None]


def _describe_arg(arg: Any) -> dict[str, Any]:
    """An input or output for GET /<api>: the shape the Cortex routes take (a dimension with no size is 1 there;
    ``unsized`` lists them, which the V2 routes take as any size, -1, as Triton does)."""
    dtype = DTYPES.get(arg.type)
    type_name = arg.type if dtype is None else ("string" if dtype == STRING else dtype.name)
    dims = arg.shape if isinstance(arg.shape, list) else None
    shape = None if dims is None else [d if isinstance(d, str) else 1 if d is None else int(d) for d in dims]
    described = {"name": arg.name, "type": type_name, "shape": shape}
    if unsized := unsized_dims(dims):
        described["unsized"] = unsized
    return described
