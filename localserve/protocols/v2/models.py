"""Which APIs are V2 models, and what V2 says about them (metadata, Triton's model configuration).

An API is a V2 model when the engine itself runs its ONNX or TensorFlow model (a Cortex API with a model): V2 requests
feed that model directly, skipping ``pre_inference``/``post_inference``. ABEJA handlers and predictors have no tensor
interface: V2 lists them nowhere and answers 404 for them with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping

from localserve.engine.api import ApiRuntime
from localserve.errors import LocalServeError, NotFound, NotReady
from localserve.messages.version import LATEST, not_a_version, whole_number
from localserve.protocols.v2.multi import MultiModels, NeedsLoad, locate
from localserve.protocols.v2.view import PLATFORMS, VERSION, V2Model, view_of


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


def v2_model(rt: ApiRuntime) -> V2Model | None:
    """The V2 view of a loaded API (None before it is loaded, or when it is no V2 model)."""
    model = rt.endpoint.model
    if rt.state != "ready" or model is None or not_a_model(rt) is not None:
        return None
    return view_of(rt.api, rt.api.name, model)


class V2Models:
    """The APIs of one replica seen as V2 models, for every transport (REST and gRPC): one lookup, one wording.

    ``find`` answers NotFound (404: no such API, an API without a tensor model, another version)
    or NotReady (503: not loaded yet); the V2 view of each loaded API is made once per load of it.
    """

    def __init__(self, apis: Mapping[str, ApiRuntime]) -> None:
        self.apis = apis
        self._models: dict[str, tuple[object, V2Model]] = {}  # API -> (the endpoint described, its view)
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
                failed = multi[1].failures.of(multi[2])  # versions that did not load: not ready until replaced
                entries += [
                    {"name": name, "version": v, "state": "UNAVAILABLE", "reason": failed[int(v)]}
                    if int(v) in failed
                    else {"name": name, "version": v, "state": "READY"}
                    for v in versions
                ]
                continue
            try:
                self.find(name)
                entries.append({"name": name, "version": VERSION, "state": "READY"})
            except LocalServeError:  # not loaded (yet)
                entries.append({"name": name, "version": VERSION, "state": "UNAVAILABLE"})
        return entries

    def where(self, name: str) -> tuple[str, str] | None:
        """Where V2 model ``name``'s figures are: ``(api, model)`` for a model of a multi-model API, else None."""
        found = self.multi.split(name)
        return None if found is None else (found[0].api.name, found[2])

    def api_of(self, name: str) -> ApiRuntime | None:
        """The API that V2 model ``name`` belongs to (itself, or the multi-model API of ``<api>.<model>``)."""
        rt = self.apis.get(name)
        if rt is None and (found := self.multi.split(name)) is not None:
            rt = found[0]
        return rt

    async def locate(self, name: str, version: str | None = None) -> tuple[ApiRuntime, V2Model]:
        """``find``, loading a multi-model API's model (off the event loop) when it is not in memory."""
        try:
            return self.find(name, version)
        except NeedsLoad as need:
            return await locate(lambda: self.find(name, version), need)

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
        # The view of the endpoint serving now: after a reload (serve --reload) its model may differ.
        endpoint = rt.endpoint
        cached = self._models.get(name)
        if cached is not None and cached[0] is endpoint:
            return rt, cached[1]
        model = v2_model(rt)
        if model is None:
            raise NotReady(name, rt.error)
        self._models[name] = (endpoint, model)
        return rt, model
