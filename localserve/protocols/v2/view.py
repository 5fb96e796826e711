"""What V2 says about one model (its metadata, Triton's model configuration), read from the loaded model that
will run: ``view_of`` makes a ``V2Model`` from a runtime's ``describe()``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from localserve.config import ApiConfig
from localserve.errors import RequestError
from localserve.messages.version import LATEST
from localserve.protocols.v2.tensors import TensorSpec, datatype_of_name

Route = Callable[[], tuple[tuple[str, int], Any, Callable[[float], None]]]
"""A model of a multi-model API: () -> ((model, version), the loaded model, where its call time goes)."""

PLATFORMS = {
    "onnx": "onnxruntime_onnx",
    "tensorflow": "tensorflow_savedmodel",
}  # Triton's names; backend: the first word
VERSION = "1"  # localserve serves one version of each model


@dataclass(frozen=True)
class V2Model:
    """One API seen as a V2 model (read from the loaded model)."""

    name: str
    platform: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]  # the tensor outputs (an ONNX sequence or map has no V2 datatype)
    output_order: tuple[str, ...]  # every output's name, in the order a list-returning runtime (ONNX) gives them
    # Triton's meaning: the rows one request may carry on a free first dimension (0: dims are whole shapes).
    max_batch_size: int
    dynamic_batching: bool  # the API batches requests together (its ``batching``)
    keep_bytes: bool  # BYTES stay bytes (TensorFlow) or are decoded as UTF-8 (onnxruntime)
    versions: tuple[str, ...] = (VERSION,)  # a model of a multi-model API: its version folders
    route: Route | None = None  # a model of a multi-model API: the model version each request runs

    def metadata(self) -> dict[str, Any]:
        """The V2 model metadata response: name, versions, platform, inputs, outputs."""
        return {
            "name": self.name,
            "versions": list(self.versions),
            "platform": self.platform,
            "inputs": [spec.metadata() for spec in self.inputs],
            "outputs": [spec.metadata() for spec in self.outputs],
        }

    def shown_version(self, asked: str | None) -> str:
        """The version a statistics entry names: the one asked for, else (or for ``latest``) the highest."""
        return asked if asked and asked not in LATEST else self.versions[-1]

    def check_rows(self, feed: Mapping[str, Any]) -> int:
        """The request's inferences: the rows on its first dimension when the model takes a batch (``/config``'s
        ``max_batch_size`` > 0), else 1, as Triton counts them; more rows than ``max_batch_size`` is a 400, as
        Triton refuses it."""
        if self.max_batch_size <= 0:
            return 1
        rows = max((len(value) for value in feed.values() if getattr(value, "ndim", 0) > 0), default=1)
        if rows > self.max_batch_size:
            raise RequestError(
                f"The request has a batch of {rows} rows, over model {self.name!r}'s max_batch_size of "
                f"{self.max_batch_size} (its configuration, GET /v2/models/{self.name}/config); send at most "
                f"{self.max_batch_size} rows per request."
            )
        return rows

    def config(self) -> dict[str, Any]:
        """Triton's model configuration (what perf_analyzer and tritonclient read)."""
        batched = self.max_batch_size > 0

        def tensor(spec: TensorSpec) -> dict[str, Any]:
            dims = list(spec.shape or [-1])
            return {
                "name": spec.name,
                "data_type": f"TYPE_{_config_type(spec.datatype)}",
                "dims": dims[1:] if batched else dims,
            }

        return {
            "name": self.name,
            "platform": self.platform,
            "backend": self.platform.split("_")[0],
            "version_policy": {"latest": {"num_versions": 1}} if self.route is None else {"all": {}},
            "max_batch_size": self.max_batch_size,
            "input": [tensor(spec) for spec in self.inputs],
            "output": [tensor(spec) for spec in self.outputs],
            **({"dynamic_batching": {}} if self.dynamic_batching else {}),
        }


def _config_type(datatype: str) -> str:
    return "STRING" if datatype == "BYTES" else datatype


# What Triton's auto-completed configuration says of a model whose every first dimension is free and
# that has no configured batching (its --backend-config default-max-batch-size): perf_analyzer then
# profiles it unchanged, rows on the first dimension.
DEFAULT_MAX_BATCH_SIZE = 4


def view_of(api: ApiConfig, name: str, model: Any, **extra: Any) -> V2Model:
    """The V2 view of ``model`` (an API's, or one of a multi-model API's) served as ``name``."""
    described = model.describe()
    inputs = tuple(_spec(item) for item in described.get("inputs", []))
    every = tuple(_spec(item) for item in described.get("outputs", []))
    outputs = tuple(spec for spec in every if spec.datatype)
    batching = api.batching
    batchable = all(spec.shape is not None and spec.shape and spec.shape[0] == -1 for spec in inputs + outputs)
    rows = batching.max_batch_size if batching is not None else DEFAULT_MAX_BATCH_SIZE
    return V2Model(
        name=name,
        platform=PLATFORMS[model.format],
        inputs=inputs,
        outputs=outputs,
        output_order=tuple(spec.name for spec in every),
        max_batch_size=rows if batchable else 0,
        dynamic_batching=batching is not None and batchable,
        keep_bytes=model.format == "tensorflow",
        **extra,
    )


def _spec(item: dict[str, Any]) -> TensorSpec:
    """A TensorSpec from ``Model.describe``'s {"name", "type", "shape", "unsized"}: named or unsized dimensions are -1.

    A type V2 has no datatype for (an ONNX sequence or map) gets the empty datatype; such outputs
    are left out, and such an input makes every request fail with a message naming it.
    """
    shape, unsized = item.get("shape"), item.get("unsized") or ()
    dims = (
        None
        if shape is None
        else tuple(d if isinstance(d, int) and d >= 0 and i not in unsized else -1 for i, d in enumerate(shape))
    )
    return TensorSpec(str(item["name"]), datatype_of_name(str(item["type"])) or "", dims)
