"""The clients a Cortex predictor gets: ``onnx_client`` / ``tensorflow_client`` and ``python_client``.

``predict(model_input, model_name=None, model_version="highest")`` as Cortex's ``lib/client/onnx.py`` and
``tensorflow.py`` take it, positionally too (``"latest"`` means ``"highest"``); ``signature_key`` is keyword-only. With
several models (``models: {paths | dir}``) an unknown name or version is a 404 naming what there is.
``python_client.get_model(model_name, model_version)`` calls the predictor's ``load_model(model_path)`` on first use,
through the same model cache.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from localserve.config import ApiConfig
from localserve.config.options import ApiOptions
from localserve.config.schema import ModelsConfig
from localserve.errors import ModelLoadError, WouldFetch
from localserve.messages.version import whole_number
from localserve.runtimes import Model, load_model
from localserve.runtimes.cache import model_root
from localserve.runtimes.modelset import ModelSet
from localserve.runtimes.sources import cache_entry, resolve_model
from localserve.runtimes.versions import ModelObserver, Opener, Source
from localserve.runtimes.watch import watch_models


class ModelClient:
    """``onnx_client`` / ``tensorflow_client`` of an API with one model."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def predict(
        self,
        model_input: Any,
        model_name: str | None = None,
        model_version: str | int = "highest",
        *,
        signature_key: str | None = None,
    ) -> Any:
        """Coerce ``model_input`` as a request handler's return would be, and run the model."""
        return self.model.predict(model_input, signature_key)  # type: ignore[attr-defined]

    @property
    def input_signature(self) -> Any:
        """The model's inputs, as ``pre_inference`` gets them."""
        return self.model.input_signature


class MultiModelClient:
    """``onnx_client`` / ``tensorflow_client`` of an API with several models (``paths`` or ``dir``)."""

    def __init__(self, models: ModelSet) -> None:
        self.models = models

    def predict(
        self,
        model_input: Any,
        model_name: str | None = None,
        model_version: str | int = "highest",
        *,
        signature_key: str | None = None,
    ) -> Any:
        """Run model ``model_name`` (version ``model_version``) on ``model_input``, loading it on first use."""
        name, version, model = self.models.get(model_name, model_version)
        start = time.perf_counter()
        try:
            return model.predict(model_input, signature_key)
        finally:
            self.models.ran(name, version, time.perf_counter() - start)

    def get_model(self, model_name: str | None = None, model_version: str | int = "highest") -> Any:
        """The loaded model itself (as ``python_client.get_model``)."""
        return self.models.get(model_name, model_version)[2]


class PythonClient:
    """``python_client`` of a python predictor with ``multi_model_reloading``."""

    def __init__(self, models: ModelSet) -> None:
        self.models = models

    def get_model(self, model_name: str | None = None, model_version: str | int = "highest") -> Any:
        """What the predictor's ``load_model(model_path)`` returned for that model and version (cached)."""
        return self.models.get(model_name, model_version)[2]


def model_opener(api: ApiConfig, options: ApiOptions) -> Opener:
    """Opens one version of an ONNX or TensorFlow model with the API's runtime options."""
    model_format = api.model_format
    assert model_format is not None

    def open_version(files: Path, source: Source) -> Model:
        if model_format == "onnx" and files.is_dir():
            found = sorted(files.glob("*.onnx"))
            if len(found) != 1:
                raise ModelLoadError(
                    f"Model {source.name!r}: {files.name!r} must hold exactly one .onnx file; it holds {len(found)}."
                )
            files = found[0]
        elif model_format == "tensorflow":
            files = model_root(files)
        if source.signature_key is not None:
            return load_model(model_format, files, replace(options, signature_key=source.signature_key))
        return load_model(model_format, files, options)

    return open_version


def open_models(api: ApiConfig, options: ApiOptions, opener: Opener, observer: ModelObserver | None = None) -> ModelSet:
    """The ModelSet of a predictor with several models; remote locations are fetched into the download cache."""
    assert api.predictor is not None and api.predictor.models is not None

    def resolve(location: str) -> Path:
        return resolve_model(location, options.project, cache_root=options.cache_dir, s3_endpoint=options.s3_endpoint)

    def entry(path: Path) -> Path:
        return cache_entry(path, options.cache_dir)

    return ModelSet(api.predictor.models, opener, resolve, observer, entry)


def versioned_api(api: ApiConfig, options: ApiOptions) -> ApiConfig | None:
    """``api`` with its one model (``models: {path: ...}``) as a ModelSet when that folder holds version folders
    (Cortex's ``<path>/<version>/``: the highest serves, new ones are picked up); None for a plain model."""
    location, predictor = api.model_location, api.predictor
    if location is None or predictor is None:
        return None
    path = resolve_model(location, options.project, cache_root=options.cache_dir, s3_endpoint=options.s3_endpoint)
    if not path.is_dir() or not any(p.is_dir() and whole_number(p.name) is not None for p in path.iterdir()):
        return None
    models = ModelsConfig(path=location, signature_key=api.tf_signature_key)
    return replace(api, predictor=replace(predictor, models=models))


def start_watching(models: ModelSet) -> None:
    """Live reloading: local model folders are watched, remote ones polled (``runtimes/watch.py``)."""
    models.watcher = watch_models(models, lambda location: None if "://" in location else models.resolve(location))


def describe_models(models: ModelSet) -> dict[str, Any]:
    """For GET /<api>: each model's versions, which are in memory, the cache's size, the latest events.

    It runs on the event loop, so it downloads nothing: a remote model never fetched has ``null`` versions."""
    loaded = models.loaded()
    return {
        "cache_size": models.capacity,
        "disk_cache_size": models.config.disk_cache_size,
        "available": {name: _listed_versions(models, name) for name in models.names()},
        "in_memory": [{"model": name, "version": version} for name, version in loaded],
        "events": list(models.events),
    }


def _listed_versions(models: ModelSet, name: str) -> list[int] | None:
    """Model ``name``'s versions as last read; None when reading them would download its copy."""
    try:
        return sorted(models.versions(name, fetch=False))
    except WouldFetch:
        return None
