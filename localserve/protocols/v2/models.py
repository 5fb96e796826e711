"""Which APIs are V2 models, and what V2 says about them (metadata, Triton's model configuration).

An API is a V2 model when the engine itself runs its ONNX or TensorFlow model (a Cortex API with a
model and an optional request handler): V2 requests then feed that model directly, skipping
``pre_inference``/``post_inference``. ABEJA handlers and predictors (which call their model
themselves, if they have one) have no tensor interface, so V2 lists them nowhere and answers 404
for them with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from localserve.engine.api import ApiRuntime
from localserve.errors import LocalServeError, NotFound, NotReady, RequestError
from localserve.messages.version import LATEST, not_a_version, whole_number
from localserve.protocols.v2.multi import MultiModels, locate
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

    def check_rows(self, feed: Mapping[str, Any]) -> None:
        """A request of more rows than ``max_batch_size`` (what ``/config`` says) is a 400, as Triton refuses it."""
        if self.max_batch_size <= 0:
            return
        rows = max((len(value) for value in feed.values() if getattr(value, "ndim", 0) > 0), default=0)
        if rows > self.max_batch_size:
            raise RequestError(
                f"The request has a batch of {rows} rows, over model {self.name!r}'s max_batch_size of "
                f"{self.max_batch_size} (its configuration, GET /v2/models/{self.name}/config); send at most "
                f"{self.max_batch_size} rows per request."
            )

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


def not_a_model(rt: ApiRuntime) -> str | None:
    """Why API ``rt`` is no V2 model (None when it is one, loaded or not)."""
    api = rt.api
    if api.kind == "abeja":
        return (
            f"API {api.name!r} is an ABEJA handler, which takes requests, not tensors; the Open Inference Protocol "
            "serves only APIs whose ONNX or TensorFlow model localserve runs itself. Use its own route "
            f"(/{api.name})."
        )
    if api.predictor is not None and api.predictor.models is not None and api.predictor.type != "python":
        return (
            f"API {api.name!r} serves several models; over the Open Inference Protocol each is a model of its own, "
            f"named '{api.name}.<model>' (GET /v2/models/stats lists them)."
        )
    if api.predictor is not None:
        return (
            f"API {api.name!r} is a {api.predictor.type} predictor, whose predict() runs any model itself; the Open Inference "
            "Protocol serves only APIs whose ONNX or TensorFlow model localserve runs itself (a model with an "
            f"optional request_handler). Use its own route (/{api.name})."
        )
    if api.model_format not in PLATFORMS:
        return f"API {api.name!r} has no ONNX or TensorFlow model, so it has no tensors to serve over V2."
    return None


# What Triton's auto-completed configuration says of a model whose every first dimension is free and
# that has no configured batching (its --backend-config default-max-batch-size): perf_analyzer then
# profiles it unchanged, rows on the first dimension.
DEFAULT_MAX_BATCH_SIZE = 4


def v2_model(rt: ApiRuntime) -> V2Model | None:
    """The V2 view of a loaded API (None before it is loaded, or when it is no V2 model)."""
    model = getattr(rt.endpoint, "model", None)
    if rt.state != "ready" or model is None or not_a_model(rt) is not None:
        return None
    return view_of(rt, rt.api.name, model)


def view_of(rt: ApiRuntime, name: str, model: Any, **extra: Any) -> V2Model:
    """The V2 view of ``model`` (an API's, or one of a multi-model API's) served as ``name``."""
    described = model.describe()
    inputs = tuple(_spec(item) for item in described.get("inputs", []))
    every = tuple(_spec(item) for item in described.get("outputs", []))
    outputs = tuple(spec for spec in every if spec.datatype)
    batching = rt.api.batching
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


class V2Models:
    """The APIs of one replica seen as V2 models, for every transport (REST and gRPC): one lookup, one wording.

    ``find`` answers NotFound (404: no such API, an API without a tensor model, another version)
    or NotReady (503: not loaded yet); the V2 view of each loaded API is made once.
    """

    def __init__(self, apis: Mapping[str, ApiRuntime]) -> None:
        self.apis = apis
        self._models: dict[str, V2Model] = {}
        self.multi = MultiModels(apis, view_of)

    def names(self) -> list[str]:
        """The APIs that are V2 models (loaded or not), then the models of multi-model APIs (``<api>.<model>``)."""
        return [name for name, rt in self.apis.items() if not_a_model(rt) is None] + self.multi.names()

    def index(self) -> list[dict[str, str]]:
        """Every V2 model, each version of it, and its state (``READY`` or ``UNAVAILABLE``): Triton's repository index.

        Blocking: listing a remote model's versions may download its copy."""
        entries = []
        for name in self.names():
            multi = self.multi.split(name)
            if multi is not None:  # a model of a multi-model API: every version, loaded on first use
                try:
                    versions = [str(v) for v in sorted(multi[1].versions(multi[2]))]
                except (LocalServeError, OSError):  # its remote folder cannot be read now
                    entries.append({"name": name, "version": "", "state": "UNAVAILABLE"})
                    continue
                entries += [{"name": name, "version": v, "state": "READY"} for v in versions]
                continue
            try:
                self.find(name)
                entries.append({"name": name, "version": VERSION, "state": "READY"})
            except LocalServeError:  # not loaded (yet)
                entries.append({"name": name, "version": VERSION, "state": "UNAVAILABLE"})
        return entries

    def api_of(self, name: str) -> ApiRuntime | None:
        """The API that V2 model ``name`` belongs to (itself, or the multi-model API of ``<api>.<model>``)."""
        rt = self.apis.get(name)
        if rt is None and (found := self.multi.split(name)) is not None:
            rt = found[0]
        return rt

    async def locate(self, name: str, version: str | None = None) -> tuple[ApiRuntime, V2Model]:
        """``find``, loading a multi-model API's model (off the event loop) when it is not in memory."""
        return await locate(lambda: self.find(name, version))

    def no_model(self, name: str) -> NotFound:
        """The 404 for a model name that is no API."""
        listed = ", ".join(map(repr, self.names())) or "none"
        return NotFound(f"No model {name!r}; the models served over the Open Inference Protocol are: {listed}.")

    def find(self, name: str, version: str | None = None) -> tuple[ApiRuntime, V2Model]:
        """The API and its V2 model; NotFound (404) or NotReady (503) otherwise."""
        rt = self.apis.get(name)
        if rt is None:
            found = self.multi.find(name, version)
            if found is None:
                raise self.no_model(name)
            return found
        why = not_a_model(rt)
        if why is not None:
            raise NotFound(why)
        if version in LATEST:  # the highest of its one version
            version = None
        elif version is not None and whole_number(version) is None:
            raise not_a_version(version)
        if version is not None and version != VERSION:
            raise NotFound(f"Model {name!r} has no version {version!r}; localserve serves version {VERSION} only.")
        model = self._models.get(name)
        if model is None:
            model = v2_model(rt)
            if model is None:
                raise NotReady(name, rt.error)
            self._models[name] = model
        return rt, model
