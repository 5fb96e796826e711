"""Several models of one API (Cortex's ``models: {paths | dir}``), their versions and the model cache.

A model's versions are its sub-folders named by whole numbers (the highest is ``latest``; none: the one version 1). With
``cache_size`` at most that many versions stay in memory: one loads on first use, and the least recently used leaves as
soon as a load passes the limit. A load holds only its version's lock; a request keeps the model it started with.
Without ``cache_size`` every version loads at start, as Cortex did.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from localserve.config.schema import ModelsConfig
from localserve.errors import LocalServeError, NotFound, RequestError, WouldFetch
from localserve.runtimes.diskcache import DiskCache
from localserve.runtimes.failures import FailedLoads
from localserve.runtimes.versions import (
    ModelObserver,
    Opener,
    Source,
    configured,
    models_in,
    stamp_of,
    version_changes,
    version_number,
    versions_in,
)

log = logging.getLogger("localserve")
EVENTS_KEPT = 200  # the latest load / eviction events kept for /stats and `get`
Reader = Callable[[str], Path]  # a location -> its local path (fetched when remote)
Versions = dict[int, Path]


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
        self.failures = FailedLoads()  # versions that did not load, not tried again until their files change
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=EVENTS_KEPT)
        self.generation = 0  # how many times the folders were read again (``refresh``); ``changed`` is notified
        self.changed = threading.Condition()
        self.watcher: Any = None  # the ModelWatcher of live reloading, once started
        self.listeners: list[Callable[[tuple[str, int]], None]] = []  # told of each version leaving memory
        self._sources = configured(config)
        self._listing: dict[str, Any] = {}  # what the folders held when last read; replaced whole by ``refresh``
        self._disk = DiskCache(config.disk_cache_size, resolve, cache_entry)  # remote locations' local copies

    # -- what there is ---------------------------------------------------------------------------
    @property
    def single(self) -> bool:
        """``path``: one model, whatever name the caller gives."""
        return self.config.path is not None

    def _local(self, location: str, fetch: bool = True) -> Path:
        if "://" not in location:
            return self.resolve(location)
        path = self._disk.local(location, fetch=fetch)
        self._trim_disk(spare=location)  # a copy fetched to be read (listed, described) counts at once
        return path

    def sources(self, listing: dict[str, Any] | None = None, local: Reader | None = None) -> dict[str, Source]:
        """Every model there is (a ``dir`` as last read: ``refresh`` reads it again into its own ``listing``)."""
        if self.config.dir is None:
            return self._sources
        listing = self._listing if listing is None else listing
        found: dict[str, Source] | None = listing.get("")
        if found is None:
            found = listing[""] = models_in((local or self._local)(self.config.dir), self.config)
        return found

    def _versions(self, source: Source, listing: dict[str, Any] | None = None, local: Reader | None = None) -> Versions:
        listing = self._listing if listing is None else listing
        found: dict[int, Path] | None = listing.get("/" + source.name)
        if found is None:
            found = listing["/" + source.name] = versions_in((local or self._local)(source.location))
        return found

    def names(self) -> list[str]:
        """The names of the models, sorted (a remote ``dir`` as last read: nothing is fetched after its load)."""
        return sorted(self.sources())

    def versions(self, name: str, *, fetch: bool = True) -> dict[int, Path]:
        """The versions of model ``name`` and where each is; without ``fetch``, WouldFetch rather than a download."""
        return self._versions(self._source(name, fetch), local=lambda at: self._local(at, fetch))

    def loaded(self) -> list[tuple[str, int]]:
        """The versions in memory, the least recently used first."""
        with self._lock:
            return list(self._loaded)

    # -- use --------------------------------------------------------------------------------------
    def _source(self, name: str | None, fetch: bool = True) -> Source:
        sources = self.sources(local=lambda at: self._local(at, fetch))
        if self.single:
            return next(iter(sources.values()))
        if name is None:
            listed = ", ".join(sorted(sources))
            raise RequestError(f"model_name was not specified; choose one of the following: {listed}.")
        found = sources.get(name)
        if found is None:
            listed = ", ".join(map(repr, sorted(sources))) or "none"
            raise NotFound(f"Model {name!r} wasn't found in the list of available models; the models are: {listed}.")
        return found

    def pick(self, name: str | None, version: str | int = "latest", *, fetch: bool = True) -> tuple[Source, int, Path]:
        """The model, version and files a call names (Cortex's rules); NotFound (404) or RequestError (400);
        without ``fetch``, WouldFetch when its copy must be downloaded first."""
        source = self._source(name, fetch)
        if "://" in source.location and not self._disk.holds(source.location):
            if not fetch:
                raise WouldFetch(source.location)
            with self._lock:  # (as ``refresh`` swaps the listings)
                self._listing.pop("/" + source.name, None)  # its copy was trimmed (or never fetched): fetch it now
        versions = self._versions(source, local=lambda at: self._local(at, fetch))
        number = version_number(source.name, version, versions)
        return source, number, versions[number]

    def in_memory(self, name: str, version: int) -> Any:
        """The loaded model of ``name`` ``version`` if it is in memory now (None otherwise); never loads."""
        with self._lock:
            return self._loaded.get((name, version))

    def get(self, name: str | None, version: str | int = "latest") -> tuple[str, int, Any]:
        """(model name, version, the loaded model), loading it on first use and evicting what the cache must."""
        with self._disk.using(self._source(name).location):  # from its fetch to the end of its load, its copy stays
            source, number, model, evicted = self._get(name, version)
        for old in evicted:
            self._evicted(old, "cache")
        self._trim_disk()
        return source.name, number, model

    def _get(self, name: str | None, version: str | int) -> tuple[Source, int, Any, list[tuple[str, int]]]:
        source, number, files = self.pick(name, version)
        key = (source.name, number)
        with self._lock:
            model = self._loaded.get(key)
            if model is not None:
                self._loaded.move_to_end(key)
                return source, number, model, []
            lock = self._loading.setdefault(key, threading.Lock())
        with lock:  # only callers of this same version wait here
            with self._lock:
                model = self._loaded.get(key)
                if model is not None:
                    self._loaded.move_to_end(key)
                    return source, number, model, []
            model = self.failures.load(key, files, lambda: self._load(source, number, files))
            return source, number, model, self._keep(key, model, files)

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
        """Every version of every model (without the cache, at start, as Cortex); ``skip_failures``: log what fails."""
        for name in self.names():
            for number in sorted(self.versions(name)):
                try:
                    self.get(name, number)
                except (LocalServeError, OSError) as exc:
                    if not skip_failures:
                        raise
                    if (name, number) not in self.failures:  # a failed load is logged once, where it failed
                        log.warning("model %r version %d does not load (yet): %s", name, number, exc)

    def snapshot(
        self, skip: Collection[str] = (), listing: dict[str, Any] | None = None, local: Reader | None = None
    ) -> dict[str, set[int]] | None:
        """Every model's versions (but ``skip``'s) as read now (into ``listing``); None when they cannot be read."""
        try:
            sources = self.sources(listing, local)
            return {n: set(self._versions(s, listing, local)) for n, s in sources.items() if n not in skip}
        except (LocalServeError, OSError) as exc:
            log.warning("models: the model folders cannot be read (%s); serving what was read before", exc)
            return None

    def refresh(self, *, remote: bool = False) -> list[dict[str, Any]]:
        """Read the folders again (``remote``: fetch remote locations again): versions gone or changed leave
        memory (calls in flight keep theirs); without the cache new versions load. Returns what changed. The
        listing is swapped in once all was read (the last one serves meanwhile); a failed read changes nothing."""
        # A remote model without a copy (trimmed, never used) is not fetched by a poll, but on its next use (as Cortex).
        skip = {n for n, s in self._sources.items() if "://" in s.location and not self._disk.holds(s.location)}
        before = self.snapshot(skip) or {}
        listing: dict[str, Any] = {}
        fresh: dict[str, Path] = {}  # the remote locations fetched again, and their (maybe new) copies

        def local(location: str) -> Path:
            if not remote or "://" not in location:
                return self._local(location)
            polled.enter_context(self._disk.using(location))  # its copies are not trimmed while the poll reads them
            path = fresh[location] = self.resolve(location)
            return path

        with contextlib.ExitStack() as polled:
            after = self.snapshot(skip, listing, local)
            if after is None:  # a folder unreadable for a moment (a remote error) changes nothing in memory
                self._disk.discard(fresh)
                return []
            with self._lock:  # the models not read keep their latest entries (a request may have fetched one)
                self._listing = {**{k: v for k, v in dict(self._listing).items() if k[1:] in skip}, **listing}
            self._disk.adopt(fresh)  # only now: a changed model's old copy is deleted
        changes = version_changes(before, after) + self._drop_changed(listing, skip)
        if self.capacity is None:
            self.load_all(skip_failures=True)
        self.events.append({"event": "refresh", "changes": changes})
        with self.changed:
            self.generation += 1
            self.changed.notify_all()
        return changes

    def _drop_changed(self, listing: dict[str, Any], skip: Collection[str]) -> list[dict[str, Any]]:
        """Versions in memory whose files are gone or changed leave it; a model not read (``skip``) keeps its."""
        with self._lock:
            loaded = {key: stamp for key, stamp in self._stamps.items() if key[0] not in skip}
        changes = []
        for key, stamp in loaded.items():
            files = listing.get("/" + key[0], {}).get(key[1])
            if files is None or stamp_of(files) != stamp:
                with self._lock:
                    gone = self._loaded.pop(key, None) is not None
                    self._stamps.pop(key, None)
                if gone:
                    self._evicted(key, "removed" if files is None else "replaced")
                    if files is not None:
                        changes.append({"model": key[0], "version": key[1], "change": "replaced"})
        return changes

    def close(self) -> None:
        """Stop watching the folders (at shutdown)."""
        if self.watcher is not None:
            self.watcher.close()
