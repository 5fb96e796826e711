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
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from localserve.config.schema import SINGLE_MODEL_NAME, ModelsConfig
from localserve.errors import LocalServeError, ModelLoadError, NotFound, RequestError
from localserve.runtimes.diskcache import DiskCache
from localserve.runtimes.versions import ModelObserver, Opener, Source, stamp_of, version_changes, versions_in

log = logging.getLogger("localserve")

EVENTS_KEPT = 200  # the latest load / eviction events kept for /stats and `get`
LATEST = ("latest", "highest")


class ModelSet:
    """The models of one API: names, versions, the loaded ones (least recently used first), the events."""

    def __init__(
        self,
        config: ModelsConfig,
        opener: Opener,
        resolve: Callable[[str], Path],
        observer: ModelObserver | None = None,
        cache_entry: Callable[[Path], Path] | None = None,
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
        self.generation = 0  # how many times the folders were read again (``refresh``); ``changed`` is notified
        self.changed = threading.Condition()
        self.watcher: Any = None  # the ModelWatcher of live reloading, once started
        self.listeners: list[Callable[[tuple[str, int]], None]] = []  # told of each version leaving memory
        self._sources = self._configured()
        self._listing: dict[str, Any] = {}  # what the folders held when last read; cleared by ``refresh``
        self._disk = DiskCache(config.disk_cache_size, resolve, cache_entry)  # remote locations' local copies

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
        path = self._disk.local(location)
        self._trim_disk(spare=location)  # a copy fetched to be read (listed, described) counts at once
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

    def fetches(self, name: str | None, *, use: bool = True) -> bool:
        """Whether reading model ``name``'s versions (``use``: to load one) would download a remote copy."""
        if self.config.dir is not None:
            return "://" in self.config.dir and "" not in self._listing
        source = next(iter(self._sources.values())) if self.single else self._sources.get(name or "")
        if source is None or "://" not in source.location:
            return False
        return "/" + source.name not in self._listing or (use and not self._disk.holds(source.location))

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
        if "://" in source.location and not self._disk.holds(source.location):
            self._listing.pop("/" + source.name, None)  # its copy was trimmed (or never fetched): fetch it now
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
        self._trim_disk()
        return source.name, number, model

    def _trim_disk(self, spare: str | None = None) -> None:
        if self._disk.limit is None or self.config.dir is not None:  # a remote dir is one copy: never trimmed
            return
        sources = self._sources
        keep = {sources[name].location for name, _ in self.loaded() if name in sources}
        if spare is not None:
            keep.add(spare)
        for location in self._disk.trim(keep):
            name = next((s.name for s in sources.values() if s.location == location), location)
            self.events.append({"event": "disk-evict", "model": name})
            log.info("model %r: its downloaded copy was deleted (disk_cache_size %s)", name, self._disk.limit)

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
        for listener in self.listeners:
            listener(key)

    def ran(self, name: str, version: int, seconds: float) -> None:
        """One call of a model took ``seconds`` (the clients report it)."""
        if self.observer is not None:
            self.observer.ran(name, version, seconds)

    # -- start and reload ---------------------------------------------------------------------------
    def load_all(self, *, skip_failures: bool = False) -> None:
        """Without the cache: every version of every model, at start (Cortex's behaviour); on a refresh a
        version that does not load yet (being copied in) is logged and skipped."""
        for name in self.names():
            for number in sorted(self.versions(name)):
                try:
                    self.get(name, number)
                except (LocalServeError, OSError) as exc:
                    if not skip_failures:
                        raise
                    log.warning("model %r version %d does not load (yet): %s", name, number, exc)

    def snapshot(self, skip: Collection[str] = ()) -> dict[str, set[int]] | None:
        """Every model's versions (but ``skip``'s) as the folders hold them now; None when they cannot be read."""
        try:
            return {name: set(self.versions(name)) for name in self.names() if name not in skip}
        except (LocalServeError, OSError) as exc:
            log.warning("models: the model folders cannot be read (%s); serving what was read before", exc)
            return None

    def refresh(self, *, remote: bool = False) -> list[dict[str, Any]]:
        """Read the folders again (``remote``: fetch remote locations again): versions gone or changed leave
        memory (calls in flight keep theirs); without the cache new versions load. Returns what changed."""
        # A remote model without a copy on disk (trimmed, or never used) is not fetched by a poll: its next use
        # fetches it, new versions included (Cortex's cache too fetched on demand).
        skip = {n for n, s in self._sources.items() if "://" in s.location and not self._disk.holds(s.location)}
        before = self.snapshot(skip) or {}
        listing = dict(self._listing)
        self._listing = {key: value for key, value in listing.items() if key[1:] in skip}
        if remote:
            self._disk.forget()
        after = self.snapshot(skip)
        if after is None:  # a folder unreadable for a moment (a remote error) changes nothing in memory
            self._listing = listing
            return []
        changes = version_changes(before, after)
        with self._lock:
            loaded = dict(self._stamps)
        for key, stamp in loaded.items():
            files = self.versions(key[0])[key[1]] if key[1] in after.get(key[0], ()) else None
            if files is None or stamp_of(files) != stamp:
                with self._lock:
                    gone = self._loaded.pop(key, None) is not None
                    self._stamps.pop(key, None)
                if gone:
                    self._evicted(key, "removed" if files is None else "replaced")
                    if files is not None:
                        changes.append({"model": key[0], "version": key[1], "change": "replaced"})
        if self.capacity is None:
            self.load_all(skip_failures=True)
        self.events.append({"event": "refresh", "changes": changes})
        with self.changed:
            self.generation += 1
            self.changed.notify_all()
        return changes

    def close(self) -> None:
        """Stop watching the folders (at shutdown)."""
        if self.watcher is not None:
            self.watcher.close()
