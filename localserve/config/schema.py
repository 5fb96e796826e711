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
DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m)?$")
_DURATION_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}

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
)
PREDICTOR_KEYS = ("type", "path", "model_path", "config")
PREDICTOR_CLASSES = {"python": "PythonPredictor", "onnx": "ONNXPredictor", "tensorflow": "TensorFlowPredictor"}
TRACKER_KEYS = ("key", "model_type")
COMPUTE_KEYS = ("min_replicas", "max_replicas", "init_replicas", "target_cpu_utilization", "cpu", "gpu", "mem")
BATCHING_KEYS = ("max_batch_size", "batch_interval")


@dataclass(frozen=True)
class PredictorConfig:
    type: str  # python | onnx | tensorflow
    path: str
    model_path: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def class_name(self) -> str:
        return PREDICTOR_CLASSES[self.type]


@dataclass(frozen=True)
class TrackerConfig:
    model_type: str  # classification | regression
    key: str | None = None


@dataclass(frozen=True)
class ComputeConfig:
    min_replicas: int = 1
    max_replicas: int = 100
    init_replicas: int | None = None
    target_cpu_utilization: int = 80
    cpu: str = "200m"
    gpu: int = 0
    mem: str | None = None

    @property
    def replicas(self) -> int:
        return self.init_replicas if self.init_replicas is not None else self.min_replicas


@dataclass(frozen=True)
class BatchingConfig:
    max_batch_size: int
    batch_interval: float  # seconds


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
        if self.predictor is not None and self.predictor.model_path:
            return self.predictor.model_path
        return self.model
