"""The shape of an API config: the keys of each section and the frozen dataclasses they become."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CONFIG_FILES = ("localserve.yaml", "localserve.yml", "cortex.yaml", "cortex.yml")
RESERVED_NAMES = frozenset(
    {"healthz", "readyz", "metrics", "health_check", "v2", "predict", "stats", "docs", "dashboard"}
)
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
HANDLER_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
CPU_RE = re.compile(r"^\d+(\.\d+)?m?$")
MEM_RE = re.compile(r"^\d+(\.\d+)?(E|P|T|G|M|k|Ei|Pi|Ti|Gi|Mi|Ki)?$")
DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m|h|d)?$")
_DURATION_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}

# Cortex 0.8-0.11 (Cortex 0.8-0.11 docs, *APIs*), then Cortex 0.25-0.33 (Cortex 0.25-0.33 docs, *Predictors*)
KINDS = ("api", "RealtimeAPI", "AsyncAPI")
# Keys of both generations that localserve adds or shares.
_COMMON_KEYS = (
    "kind",
    "name",
    "tracker",
    "compute",
    "metadata",
    "context",
    "batching",
    "threads_per_process",
    "max_queue",
    "timeout",
    "model_threads",
    "cuda_options",
)
# kind: AsyncAPI only (localserve's own): where jobs live, and how long finished ones are kept.
ASYNC_KEYS = ("async_store", "async_retention")
DEFAULT_ASYNC_RETENTION = 7 * 86400.0  # seconds: 7 days
# kind: RealtimeAPI / AsyncAPI (Cortex 0.25-0.33): the model and its code live under 'predictor'.
REALTIME_KEYS = (*_COMMON_KEYS, "predictor", "autoscaling", "networking", "update_strategy", *ASYNC_KEYS)
API_KEYS = (
    "kind",
    "name",
    "model",
    "model_format",
    "request_handler",
    "handler",
    "predictor",
    "tf_signature_key",
    "tracker",
    "compute",
    "metadata",
    "context",
    "batching",
    "threads_per_process",
    "max_queue",
    "timeout",
    "model_threads",
    "cuda_options",
)
PREDICTOR_KEYS = (
    "type",
    "path",
    "model_path",
    "config",
    # Cortex 0.25-0.33
    "models",
    "multi_model_reloading",
    "signature_key",
    "server_side_batching",
    "processes_per_replica",
    "threads_per_process",
    "python_path",
    "env",
    "log_level",
    "image",
    "tensorflow_serving_image",
    "shm_size",
)
MODELS_KEYS = ("path", "paths", "dir", "signature_key", "cache_size", "disk_cache_size")
MULTI = "__models__"  # the parsed ModelsConfig travels from realtime_entry to parse_predictor under this key
SINGLE_MODEL_NAME = "_cortex_default"  # Cortex's name for the model of 'path'; refused as a name in 'paths'
AUTOSCALING_KEYS = (
    "min_replicas",
    "max_replicas",
    "init_replicas",
    "target_replica_concurrency",
    "max_replica_concurrency",
    "window",
    "downscale_stabilization_period",
    "upscale_stabilization_period",
    "max_downscale_factor",
    "max_upscale_factor",
    "downscale_tolerance",
    "upscale_tolerance",
)
NETWORKING_KEYS = ("endpoint", "api_gateway")
UPDATE_STRATEGY_KEYS = ("max_surge", "max_unavailable")
LOG_LEVELS = ("debug", "info", "warning", "error")
PREDICTOR_CLASSES = {"python": "PythonPredictor", "onnx": "ONNXPredictor", "tensorflow": "TensorFlowPredictor"}
TRACKER_KEYS = ("key", "model_type")
COMPUTE_KEYS = (
    "min_replicas",
    "max_replicas",
    "init_replicas",
    "target_cpu_utilization",
    "cpu",
    "gpu",
    "mem",
    "inf",
)
BATCHING_KEYS = ("max_batch_size", "batch_interval", "batch_sizes")
CUDA_OPTION_KEYS = (
    "cudnn_conv_algo_search",
    "cudnn_conv_use_max_workspace",
    "cudnn_conv1d_pad_to_nc1d",
    "arena_extend_strategy",
    "gpu_mem_limit",
    "do_copy_in_default_stream",
    "enable_cuda_graph",
    "use_tf32",
    "prefer_nhwc",
)
"""onnxruntime CUDA provider options that may be set per API (``cuda_options``)."""


@dataclass(frozen=True)
class ModelPath:
    """One entry of ``paths``: a model's name, where it is, and (TensorFlow) its signature key."""

    name: str
    path: str
    signature_key: str | None = None


@dataclass(frozen=True)
class ModelsConfig:
    """Several models served by one predictor: ``paths`` or ``dir`` (or ``path`` for a Python predictor's
    ``multi_model_reloading``), the default signature key and the two cache sizes."""

    paths: tuple[ModelPath, ...] = ()
    dir: str | None = None
    path: str | None = None
    signature_key: str | None = None
    cache_size: int | None = None  # models kept in memory (None: every model, loaded at start)
    disk_cache_size: int | None = None  # models kept on disk

    @property
    def caching(self) -> bool:
        """Cortex's dynamic model caching: models load on first use and the least recently used leave."""
        return self.cache_size is not None


@dataclass(frozen=True)
class PredictorConfig:
    """Cortex's ``predictor`` block: the predictor class's type and file, its config and model."""

    type: str  # python | onnx | tensorflow
    path: str
    model_path: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    python_path: str | None = None  # Cortex 0.25+: a project folder put on sys.path before the predictor loads
    env: Mapping[str, str] = field(default_factory=dict)  # Cortex 0.25+: environment of the API's process
    log_level: str | None = None  # Cortex 0.25+: level of the user logger (debug | info | warning | error)
    image: str | None = None  # Cortex 0.25+: the platform's image; localserve uses the current environment
    models: ModelsConfig | None = None  # Cortex 0.25+: several models (paths, dir) or a python predictor's

    @property
    def class_name(self) -> str:
        """The class the predictor file must define: PythonPredictor, ONNXPredictor or TensorFlowPredictor."""
        return PREDICTOR_CLASSES[self.type]


@dataclass(frozen=True)
class TrackerConfig:
    """Cortex's ``tracker`` block: what ``key`` of the response to track, as a class or a number."""

    model_type: str  # classification | regression
    key: str | None = None


@dataclass(frozen=True)
class ComputeConfig:
    """Cortex's ``compute`` and ``autoscaling`` settings: replicas, CPU, GPU and memory."""

    min_replicas: int = 1
    max_replicas: int = 100
    init_replicas: int | None = None
    target_cpu_utilization: int = 80
    cpu: str = "200m"
    gpu: int = 0
    mem: str | None = None
    target_cpu_utilization_given: bool = False  # set in the config, not the default: a GPU API's HPA keeps it

    @property
    def replicas(self) -> int:
        """How many replicas start: ``init_replicas`` when given, else ``min_replicas``."""
        return self.init_replicas if self.init_replicas is not None else self.min_replicas


@dataclass(frozen=True)
class BatchingConfig:
    """Server-side batching: the largest batch, how long to wait for one, the sizes a model sees."""

    max_batch_size: int
    batch_interval: float  # seconds
    batch_sizes: tuple[int, ...] | None = None  # the sizes a model sees; None: powers of two up to max_batch_size


@dataclass(frozen=True)
class ApiConfig:
    """One API: an ABEJA handler, a request handler around a model, a raw model, or a predictor."""

    name: str
    model: str | None = None
    model_format: str | None = None  # onnx | tensorflow, inferred from model
    request_handler: str | None = None
    handler: str | None = None  # ABEJA "module:function"
    predictor: PredictorConfig | None = None
    tf_signature_key: str | None = None
    tracker: TrackerConfig | None = None
    compute: ComputeConfig = field(default_factory=ComputeConfig)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    batching: BatchingConfig | None = None
    threads_per_process: int = 1
    max_queue: int = 100
    timeout: float = 60.0
    model_threads: int | None = None  # intra-op threads of the model runtime; None = from the cores
    cuda_options: Mapping[str, str] = field(default_factory=dict)  # onnxruntime CUDA provider options
    api_kind: str = "api"  # the config's 'kind' as written: api | RealtimeAPI | AsyncAPI
    processes_per_replica: int = 1  # Cortex 0.25+: processes per replica; localserve runs replicas x this
    max_replica_concurrency: int | None = None  # Cortex 0.25+ autoscaling key, as given (max_queue follows it)
    target_replica_concurrency: float | None = None  # Cortex 0.25+ autoscaling key, kept for export
    async_store: str | None = None  # AsyncAPI: job store URL (sqlite:///PATH, redis://...); None: SQLite in the cache
    async_retention: float = DEFAULT_ASYNC_RETENTION  # AsyncAPI: seconds a finished job's result is kept

    @property
    def is_async(self) -> bool:
        """``kind: AsyncAPI``: POST answers an id at once, a worker runs the job, the result is polled."""
        return self.api_kind == "AsyncAPI"

    @property
    def processes(self) -> int:
        """Server processes on one machine: the replicas times ``processes_per_replica``."""
        return self.compute.replicas * self.processes_per_replica

    @property
    def kind(self) -> str:
        """abeja | predictor | request_handler (a model with or without pre/post_inference)."""
        if self.handler is not None:
            return "abeja"
        if self.predictor is not None:
            return "predictor"
        return "request_handler"

    @property
    def model_location(self) -> str | None:
        """Where the API's model is: the predictor's ``model_path`` or the API's ``model``."""
        if self.predictor is not None and self.predictor.model_path:
            return self.predictor.model_path
        return self.model
