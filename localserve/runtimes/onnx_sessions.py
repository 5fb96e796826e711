"""How localserve configures onnxruntime's sessions: execution providers, threads and the intra-op pool's spin."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import onnxruntime

from localserve.config.options import ApiOptions
from localserve.runtimes import default_threads, no_gpu, spin_duration_us

logger = logging.getLogger("localserve")

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
STACKED_COPY_LIMIT = 32 * 1024 * 1024
"""The largest weights (``weights_size``) a batching CPU API holds twice (a second session, whose pool never
spins, for its stacked calls). The spin's cost is the gaps between short calls, so it is small models that
gain; a model larger than this keeps one session and its memory."""
CUDA_DEFAULTS = {"cudnn_conv_algo_search": "HEURISTIC"}
"""cuDNN's algorithm search: with one session per batch size, HEURISTIC runs convolutions as fast as onnxruntime's
default EXHAUSTIVE or faster, and warms a new batch size several times sooner (benchmarks/README.md)."""


def session_options(options: ApiOptions, spin: bool) -> Any:
    """Intra-op threads from the cores (or ``model_threads``), one inter-op thread, all graph optimisations,
    and the pool spinning for a bounded time (``spin_duration_us``) or not at all."""
    sess_options = onnxruntime.SessionOptions()
    sess_options.intra_op_num_threads = options.threads or default_threads(options.replicas)
    sess_options.inter_op_num_threads = 1
    sess_options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    if spin:
        sess_options.add_session_config_entry(
            "session.intra_op.spin_duration_us", str(spin_duration_us(options.batch_interval))
        )
    sess_options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return sess_options


def quiet_options(path: Path, options: ApiOptions, spin: bool, device: str) -> Any:
    """The options of a second, never-spinning session for a batching CPU API's calls under load; None if not needed.

    A spinning pool saves a lone call its threads' wake-up, but under load it spins through every gap between
    stacked calls on a core the event loop and the API's thread need (benchmarks/README.md, "the spin"), and a
    lone call among stacked ones would start that spin again. The weights are held twice, so a model whose
    weights pass ``STACKED_COPY_LIMIT`` keeps the one session.
    """
    if not (spin and options.batching) or device != CPU or weights_size(path) > STACKED_COPY_LIMIT:
        return None
    return session_options(options, spin=False)


def in_thread(make: Callable[[Any], Any], arg: Any, name: str) -> Future[Any]:
    """``make(arg)`` on a thread of its own, from now: its result (or what it raised) in the future returned."""
    future: Future[Any] = Future()

    def run() -> None:
        try:
            future.set_result(make(arg))
        except BaseException as exc:  # handed to whoever waits for the future
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def execution_providers(options: ApiOptions) -> list[tuple[str, dict[str, str]]]:
    """The execution providers of a session: CUDA (with its options over ``CUDA_DEFAULTS``) then the CPU,
    or the CPU alone; ``no_gpu`` decides what happens when a GPU was asked for and CUDA is not there."""
    if not options.gpu:
        return [(CPU, {})]
    preload = getattr(onnxruntime, "preload_dlls", None)
    if preload is not None:  # CUDA and cuDNN installed from pip (onnxruntime-gpu[cuda,cudnn]): no LD_LIBRARY_PATH
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said):  # it prints what it could not load, and raises nothing
                preload()
        except Exception as exc:
            said.write(f"failed: {exc}")
        if said.getvalue().strip():  # the libraries may come from the system instead: the session tells
            logger.info("onnxruntime.preload_dlls(): %s", " ".join(said.getvalue().split()))
    available = onnxruntime.get_available_providers()
    if CUDA not in available:
        no_gpu(
            f"this onnxruntime {onnxruntime.__version__} has no CUDA support (its providers: {', '.join(available)}); "
            "the CPU package 'onnxruntime' is installed instead of 'onnxruntime-gpu'. Fix: pip uninstall onnxruntime "
            "&& pip install onnxruntime-gpu (or pip install 'localserve[gpu]')",
            options,
        )
        return [(CPU, {})]
    return [(CUDA, {**CUDA_DEFAULTS, **options.cuda_options}), (CPU, {})]


def weights_size(path: Path) -> int:
    """The bytes of a model's weights: its file, and the files beside it that it names (ONNX external data,
    ``location`` in the model) when the file itself is within ``STACKED_COPY_LIMIT`` (else that is enough).

    Part of every batching CPU API's start: a model that names no ``location`` (most) costs one plain search of its
    bytes; only one that does is searched, once, for all the names beside it (a pattern of many alternatives, tens
    of times slower over a model of megabytes)."""
    size = path.stat().st_size
    if size > STACKED_COPY_LIMIT:
        return size
    siblings = {s.name.encode(): s for s in path.parent.iterdir() if s != path and s.is_file()}
    if not siblings:
        return size
    data = path.read_bytes()
    if b"location" not in data:  # the key of every external data entry (TensorProto.external_data)
        return size
    names = re.compile(b"|".join(re.escape(name) for name in sorted(siblings, key=len, reverse=True)))
    named = set(names.findall(data))
    return size + sum(siblings[name].stat().st_size for name in named)
