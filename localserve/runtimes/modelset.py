"""Several models of one API (Cortex's ``models: {paths | dir}``), their versions and the model cache.

A model is a folder (or, unversioned, a file or folder) named by ``paths`` or found at the top of
``dir``; its versions are its sub-folders named by whole numbers, the highest being ``latest``. A
model without version folders has the one version 1.

The cache (``cache_size``): at most that many versions in memory; a version not in memory is loaded
on first use, and the least recently used one leaves at once when a load passes the limit (Cortex
checked every 10 s, so its limits could be passed for a while; here they never are). A load holds
only that version's lock: a thread loading model A never blocks a thread answering model B, and two
threads asking for the same model wait for one load. A request holds the model it started with: a
version evicted or removed while it runs stays alive until that request lets it go.
Without ``cache_size`` every version is loaded at start, as Cortex did.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from localserve.config.schema import SINGLE_MODEL_NAME, ModelsConfig
from localserve.errors import ModelLoadError, NotFound, RequestError

log = logging.getLogger("localserve")

EVENTS_KEPT = 200  # the latest load / eviction events kept for /stats and `get`
LATEST = ("latest", "highest")


class ModelObserver(Protocol):
    """Where a model set's figures go (the metrics of the API): loads, evictions, model calls."""

    def loaded(self, model: str, version: int, seconds: float) -> None:
        """Version ``version`` of ``model`` was loaded in ``seconds``."""

    def evicted(self, model: str, version: int, reason: str) -> None:
        """It left memory: ``cache`` (least recently used), ``removed`` or ``replaced`` (its files went or changed)."""

    def ran(self, model: str, version: int, seconds: float) -> None:
        """One call of it took ``seconds``."""


@dataclass(frozen=True)
class Source:
    """One model as configured: its name, where it is, its TensorFlow signature key."""

    name: str
    location: str
    signature_key: str | None = None


Opener = Callable[[Path, Source], Any]
"""Opens one version of a model: its file or folder (already local) -> the loaded model."""


def versions_in(folder: Path) -> dict[int, Path]:
    """The version folders of a model (sub-folders named by whole numbers); ``{1: folder}`` when it has none."""
    if folder.is_dir():
        found = {int(p.name): p for p in folder.iterdir() if p.is_dir() and p.name.isdigit() and any(p.iterdir())}
        if found:
            return found
    return {1: folder}


class ModelSet:
    """The models of one API: names, versions, the loaded ones (least recently used first), the events."""

    def __init__(
        self,
        config: ModelsConfig,
        opener: Opener,
        resolve: Callable[[str], Path],
        observer: ModelObserver | None = None,
    ) -> None:
        self.config = config
        self.opener = opener
        self.resolve = resolve  # a location -> a local path (fetched into the download cache when remote)
        self.observer = observer
        self.capacity = config.cache_size  # None: every version stays loaded
        self._lock = threading.Lock()  # held briefly: the maps below, never during a load
        self._loaded: collections.OrderedDict[tuple[str, int], Any] = collections.OrderedDict()
        self._stamps: dict[tuple[str, int], float] = {}  # the modification time of each loaded version's files
        self._loading: dict[tuple[str, int], threading.Lock] = {}
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=EVENTS_KEPT)
        self._sources = self._configured()
        self._listing: dict[str, Any] = {}  # what the folders held when last read; cleared by ``refresh``
        self._resolved: dict[str, Path] = {}  # remote locations, fetched once (until ``refresh``)

    # -- what there is ---------------------------------------------------------------------------
    def _configured(self) -> dict[str, Source]:
        config = self.config
        if config.path is not None:
            return {SINGLE_MODEL_NAME: Source(SINGLE_MODEL_NAME, config.path, config.signature_key)}
        if config.paths:
            return {p.name: Source(p.name, p.path, p.signature_key or config.signature_key) for p in config.paths}
        return {}

    @property
    def single(self) -> bool:
        """``path``: one model, whatever name the caller gives."""
        return self.config.path is not None

    def _local(self, location: str) -> Path:
        if "://" not in location:
            return self.resolve(location)
        path = self._resolved.get(location)
        if path is None:
            path = self._resolved[location] = self.resolve(location)
        return path

    def sources(self) -> dict[str, Source]:
        """Every model there is (a ``dir`` as last read: ``refresh`` reads it again)."""
        if self.config.dir is None:
            return self._sources
        found: dict[str, Source] | None = self._listing.get("")
        if found is None:
            root = self._local(self.config.dir)
            if not root.is_dir():
                raise ModelLoadError(f"The models folder {self.config.dir!r} is not a folder.")
            found = self._listing[""] = {
                p.name: Source(p.name, str(p), self.config.signature_key)
                for p in sorted(root.iterdir())
                if not p.name.startswith(".") and (p.is_dir() or p.suffix == ".onnx")
            }
        return found

    def _versions(self, source: Source) -> dict[int, Path]:
        found: dict[int, Path] | None = self._listing.get("/" + source.name)
        if found is None:
            found = self._listing["/" + source.name] = versions_in(self._local(source.location))
        return found

    def names(self) -> list[str]:
        """The names of the models, sorted."""
        return sorted(self.sources())

    def versions(self, name: str) -> dict[int, Path]:
        """The versions of model ``name`` and where each is."""
        return self._versions(self._source(name))

    def loaded(self) -> list[tuple[str, int]]:
        """The versions in memory, the least recently used first."""
        with self._lock:
            return list(self._loaded)

    # -- use --------------------------------------------------------------------------------------
    def _source(self, name: str | None) -> Source:
        sources = self.sources()
        if self.single:
            return next(iter(sources.values()))
        if name is None:
            raise RequestError(
                f"model_name was not specified; choose one of the following: {', '.join(sorted(sources))}.",
            )
        found = sources.get(name)
        if found is None:
            listed = ", ".join(map(repr, sorted(sources))) or "none"
            raise NotFound(f"Model {name!r} wasn't found in the list of available models; the models are: {listed}.")
        return found

    def pick(self, name: str | None, version: str | int = "latest") -> tuple[Source, int, Path]:
        """The model, version and files a call names (Cortex's rules); NotFound (404) or RequestError (400)."""
        source = self._source(name)
        versions = self._versions(source)
        if isinstance(version, str) and version in LATEST:
            number = max(versions)
        elif (isinstance(version, int) and not isinstance(version, bool)) or (
            isinstance(version, str) and version.isdigit()
        ):
            number = int(version)
        else:
            raise RequestError(f"model_version must be a whole number or 'latest' (or 'highest'); got {version!r}.")
        if number not in versions:
            listed = ", ".join(str(v) for v in sorted(versions))
            raise NotFound(f"Model {source.name!r} has no version {number}; its versions are: {listed}.")
        return source, number, versions[number]

    def get(self, name: str | None, version: str | int = "latest") -> tuple[str, int, Any]:
        """(model name, version, the loaded model), loading it on first use and evicting what the cache must."""
        source, number, files = self.pick(name, version)
        key = (source.name, number)
        with self._lock:
            model = self._loaded.get(key)
            if model is not None:
                self._loaded.move_to_end(key)
                return source.name, number, model
            lock = self._loading.setdefault(key, threading.Lock())
        with lock:  # only callers of this same version wait here
            with self._lock:
                model = self._loaded.get(key)
                if model is not None:
                    self._loaded.move_to_end(key)
                    return source.name, number, model
            model = self._load(source, number, files)
            evicted = self._keep(key, model, files)
        for old in evicted:
            self._evicted(old, "cache")
        return source.name, number, model

    def _load(self, source: Source, number: int, files: Path) -> Any:
        start = time.perf_counter()
        model = self.opener(files, source)
        seconds = time.perf_counter() - start
        self.events.append({"event": "load", "model": source.name, "version": number, "seconds": round(seconds, 6)})
        log.info("model %r version %d loaded in %.3f s", source.name, number, seconds)
        if self.observer is not None:
            self.observer.loaded(source.name, number, seconds)
        return model

    def _keep(self, key: tuple[str, int], model: Any, files: Path) -> list[tuple[str, int]]:
        """Put a freshly loaded version in memory; the least recently used ones past the capacity leave."""
        with self._lock:
            self._loaded[key] = model
            self._stamps[key] = stamp_of(files)
            evicted: list[tuple[str, int]] = []
            while self.capacity is not None and len(self._loaded) > self.capacity:
                old, _ = self._loaded.popitem(last=False)
                self._stamps.pop(old, None)
                evicted.append(old)
            return evicted

    def _evicted(self, key: tuple[str, int], reason: str) -> None:
        self.events.append({"event": "evict", "model": key[0], "version": key[1], "reason": reason})
        log.info("model %r version %d left memory (%s)", key[0], key[1], reason)
        if self.observer is not None:
            self.observer.evicted(key[0], key[1], reason)

    def ran(self, name: str, version: int, seconds: float) -> None:
        """One call of a model took ``seconds`` (the clients report it)."""
        if self.observer is not None:
            self.observer.ran(name, version, seconds)

    # -- start and reload ---------------------------------------------------------------------------
    def load_all(self) -> None:
        """Without the cache: every version of every model, at start (Cortex's behaviour)."""
        for name in self.names():
            for number in sorted(self.versions(name)):
                self.get(name, number)

    def refresh(self, *, remote: bool = False) -> list[dict[str, Any]]:
        """After the files changed: versions gone or changed leave memory (in-flight calls keep theirs);
        without the cache, new versions are loaded; ``remote``: fetch remote locations again. Returns what changed."""
        changes: list[dict[str, Any]] = []
        self._listing = {}
        if remote:
            self._resolved = {}
        with self._lock:
            loaded = dict(self._stamps)
        for key, stamp in loaded.items():
            try:
                files = self.pick(key[0], key[1])[2]
            except (NotFound, RequestError, ModelLoadError):
                files = None
            if files is None or stamp_of(files) != stamp:
                reason = "removed" if files is None else "replaced"
                with self._lock:
                    gone = self._loaded.pop(key, None) is not None
                    self._stamps.pop(key, None)
                if gone:
                    self._evicted(key, reason)
                    changes.append({"model": key[0], "version": key[1], "change": reason})
        if self.capacity is None:
            before = set(self.loaded())
            self.load_all()
            changes += [{"model": k[0], "version": k[1], "change": "added"} for k in self.loaded() if k not in before]
        return changes


def stamp_of(files: Path) -> float:
    """The latest modification time of a version's files (a changed file is a changed model); -1 when gone."""
    try:
        if files.is_file():
            return float(files.stat().st_mtime_ns)
        return float(max([files.stat().st_mtime_ns, *(p.stat().st_mtime_ns for p in files.rglob("*"))]))
    except OSError:
        return -1.0
