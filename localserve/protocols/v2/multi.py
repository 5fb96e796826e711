"""The models of a multi-model API (Cortex's ``models: {paths | dir}``) as V2 models of their own.

Model ``m`` of API ``multi`` is the V2 model ``multi.m`` (API names have no dot), its version folders its versions, and
a request without a version runs the highest. Reading a model's metadata, configuration or readiness loads it off the
loop, as a request would; each request looks its version up again, so an evicted version is loaded again and a new
highest one is used at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from localserve.engine.api import ApiRuntime
from localserve.engine.routing import ModelFeed
from localserve.errors import LocalServeError, NotReady, WouldFetch
from localserve.protocols.v2.view import V2Model

SEPARATOR = "."


def model_set(rt: ApiRuntime) -> Any:
    """The ModelSet of an ONNX or TensorFlow predictor with several models; None for any other API."""
    predictor = rt.api.predictor
    if predictor is None or predictor.models is None or predictor.type == "python":
        return None
    return rt.endpoint.models


class NeedsLoad(Exception):
    """The model a V2 name means is not described yet: ``load`` (blocking) loads and describes it."""

    def __init__(self, name: str, load: Callable[[], None]) -> None:
        super().__init__(f"model {name!r}: load first")
        self.name = name
        self.load = load


class MultiModels:
    """The V2 names of the models of every multi-model API of a replica."""

    def __init__(self, apis: Mapping[str, ApiRuntime], describe: Callable[..., V2Model]) -> None:
        self.apis = apis
        self.describe = describe  # view.view_of: (api, name, model, **fields) -> V2Model
        self._views: dict[tuple[str, int], tuple[object, V2Model]] = {}  # (the loaded model described, its view)

    def names(self) -> list[str]:
        """``<api>.<model>`` for each model of each loaded multi-model API."""
        out: list[str] = []
        for name, rt in self.apis.items():
            models = model_set(rt)
            if models is not None and rt.state == "ready":
                out += [f"{name}{SEPARATOR}{model}" for model in models.names()]
        return out

    def split(self, name: str) -> tuple[ApiRuntime, Any, str] | None:
        """(the API, its ModelSet, the model's name) for a V2 name ``<api>.<model>``; None for any other name."""
        api, sep, model = name.partition(SEPARATOR)
        rt = self.apis.get(api)
        models = None if rt is None or not sep else model_set(rt)
        if rt is None or models is None:
            return None
        return rt, models, model

    def find(self, name: str, version: str | None) -> tuple[ApiRuntime, V2Model] | None:
        """The API and the V2 view of the model version; None when ``name`` is no model of a multi-model API.

        NotFound (404) for an unknown model or version, NotReady before the API is loaded, NeedsLoad
        when the version has not been described yet.
        """
        found = self.split(name)
        if found is None:
            return None
        rt, models, model = found
        if rt.state != "ready" or models is None:
            raise NotReady(rt.api.name, rt.error)
        try:  # never a download here (the event loop): a remote copy to fetch first is fetched on a thread
            _, number, _ = models.pick(model, version or "latest", fetch=False)
        except WouldFetch:
            raise NeedsLoad(name, lambda: models.pick(model, version or "latest")) from None
        # The view of the very model in memory: a version replaced in place (a live update) is described again.
        loaded = models.in_memory(model, number)
        cached = self._views.get((name, number))
        if cached is None or loaded is None or cached[0] is not loaded:
            raise NeedsLoad(name, lambda: self._describe(rt, models, name, model, number))
        return rt, cached[1]

    def _describe(self, rt: ApiRuntime, models: Any, name: str, model: str, number: int) -> None:
        _, _, loaded = models.get(model, number)
        versions = tuple(str(v) for v in sorted(models.versions(model)))

        def route() -> tuple[tuple[str, int], Any, Callable[[float], None]]:
            key_name, key_version, current = models.get(model, number)
            return (key_name, key_version), current, lambda s: models.ran(key_name, key_version, s)

        self._views[(name, number)] = (loaded, self.describe(rt.api, name, loaded, versions=versions, route=route))


async def locate(find: Callable[[], tuple[ApiRuntime, V2Model]], need: NeedsLoad) -> tuple[ApiRuntime, V2Model]:
    """``find()`` once the model it needs (``need``, which ``find`` raised) is loaded off the event loop; a 503 (retry)
    when it is still not in memory after that (its copy trimmed, or it evicted, by other requests meanwhile)."""
    for _ in range(2):  # a remote copy to fetch, then the version to load
        await asyncio.to_thread(need.load)
        try:
            return find()
        except NeedsLoad as again:
            need = again
    raise LocalServeError(
        f"Model {need.name!r} is not ready: it changed while it loaded (a new version, or its copy deleted); retry.",
        status_code=503,
    )


def routed(model: V2Model, feed: Any) -> tuple[Any, int, tuple[str, str] | None]:
    """The feed as the engine runs it (for a model of a multi-model API, tagged with its model version), its rows
    (``V2Model.check_rows``: a batch past the model's ``max_batch_size`` is a 400) and the model version it runs
    (``(model, version)`` of a multi-model API, for its answer and its statistics; None for a one-version model)."""
    rows = model.check_rows(feed)
    if model.route is None:
        return feed, rows, None
    key, loaded, ran = model.route()
    return ModelFeed(key, loaded, feed, ran), rows, (key[0], str(key[1]))
