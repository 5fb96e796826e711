"""The disk side of the model cache (``disk_cache_size``): the local copies of remote models.

A remote model (``s3://``, ``https://``; a ``dir`` whole) is fetched once into the download cache (``sources.py``) and
its copy used until a poll fetches it again: a changed model's new copy replaces the old only once the whole poll
succeeded (``adopt``), and a failed poll deletes what it fetched (``discard``). Past ``disk_cache_size`` copies, the
least recently used whose model has no version in memory and is not in use (``using``) is deleted, and fetched again on
its next use (``cache_size`` <= ``disk_cache_size``, so a model in memory keeps its copy). Local models count for
nothing.
"""

from __future__ import annotations

import collections
import contextlib
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from localserve.errors import WouldFetch


class DiskCache:
    """Local copies of remote locations, the least recently used first."""

    def __init__(
        self, limit: int | None, resolve: Callable[[str], Path], entry: Callable[[Path], Path] | None = None
    ) -> None:
        self.limit = limit
        self.resolve = resolve
        self.entry = entry or (lambda path: path)  # what to delete for a copy: its whole entry of the download cache
        self._copies: collections.OrderedDict[str, Path] = collections.OrderedDict()
        self._busy: collections.Counter[str] = collections.Counter()  # locations being picked and loaded: never trimmed
        self._lock = threading.Lock()

    def local(self, location: str, *, fetch: bool = True) -> Path:
        """The local path of ``location``: fetched on first use (and after a trim); WouldFetch without ``fetch``."""
        with self._lock:
            path = self._copies.get(location)
            if path is not None:
                self._copies.move_to_end(location)
                return path
        if not fetch:
            raise WouldFetch(location)
        path = self.resolve(location)  # outside the lock: a download may take minutes
        with self._lock:
            self._copies[location] = path
        return path

    def holds(self, location: str) -> bool:
        """Whether ``location`` has a copy on disk now (fetched, not trimmed since)."""
        with self._lock:
            return location in self._copies

    @contextlib.contextmanager
    def using(self, location: str) -> Iterator[None]:
        """While a model is picked and loaded (between its fetch and the end of its load) its copy is not trimmed."""
        with self._lock:
            self._busy[location] += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= collections.Counter({location: 1})  # a count that reaches 0 goes

    def adopt(self, fresh: dict[str, Path]) -> None:
        """A remote poll succeeded: its copies (``fresh``, fetched again) replace the old ones, deleted when they
        changed (a new ETag); a copy trimmed meanwhile comes back (its model is listed from it)."""
        with self._lock:
            old = {location: self._copies.get(location) for location in fresh}
            for location, path in fresh.items():
                self._copies[location] = path  # an existing copy keeps its place: a poll is no use
        if self.limit is not None:
            for location, previous in old.items():
                if previous is not None and self.entry(previous) != self.entry(fresh[location]):
                    delete(self.entry(previous))

    def discard(self, fresh: dict[str, Path]) -> None:
        """A remote poll failed: its copies that are no copy held (a changed model's new one) are deleted."""
        with self._lock:
            held = {self.entry(path) for path in self._copies.values()}
        if self.limit is not None:
            for path in fresh.values():
                if self.entry(path) not in held:
                    delete(self.entry(path))

    def trim(self, in_memory: set[str]) -> list[str]:
        """Delete the copies past the limit, least recently used first, sparing ``in_memory`` locations and those
        being loaded (``using``)."""
        removed: list[tuple[str, Path]] = []
        with self._lock:
            if self.limit is None:
                return []
            for location in list(self._copies):
                if len(self._copies) <= self.limit:
                    break
                if location not in in_memory and location not in self._busy:
                    removed.append((location, self._copies.pop(location)))
        for _, path in removed:
            delete(self.entry(path))
        return [location for location, _ in removed]


def delete(path: Path) -> None:
    """Delete a copy (a file or a folder); one already gone is no error."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
