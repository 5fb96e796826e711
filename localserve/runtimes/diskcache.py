"""The disk side of the model cache (``disk_cache_size``): the local copies of remote models.

A remote model (``s3://``, ``https://``) is fetched once into the download cache (``sources.py``) and
its copy is used until the folders are read again. With ``disk_cache_size`` at most that many
remote models keep a copy; past it, the copy least recently used whose model has no version in
memory is deleted (``cache_size`` <= ``disk_cache_size``, so a model in memory always keeps its
copy), and is fetched again on its next use. Local models are on disk already: they count for nothing.
A remote ``dir`` is fetched whole (one copy for all its models).
"""

from __future__ import annotations

import collections
import shutil
import threading
from collections.abc import Callable
from pathlib import Path


class DiskCache:
    """Local copies of remote locations, the least recently used first."""

    def __init__(
        self, limit: int | None, resolve: Callable[[str], Path], entry: Callable[[Path], Path] | None = None
    ) -> None:
        self.limit = limit
        self.resolve = resolve
        self.entry = entry or (lambda path: path)  # what to delete for a copy: its whole entry of the download cache
        self._copies: collections.OrderedDict[str, Path] = collections.OrderedDict()
        self._forgotten: dict[str, Path] = {}  # copies set aside by ``forget``: deleted once fetched anew elsewhere
        self._lock = threading.Lock()

    def local(self, location: str) -> Path:
        """The local path of ``location``: fetched on first use (and after ``forget`` or a trim)."""
        with self._lock:
            path = self._copies.get(location)
            if path is not None:
                self._copies.move_to_end(location)
                return path
        path = self.resolve(location)  # outside the lock: a download may take minutes
        with self._lock:
            self._copies[location] = path
            old = self._forgotten.pop(location, None)
        if self.limit is not None and old is not None and self.entry(old) != self.entry(path):
            delete(self.entry(old))  # the remote model changed (a new ETag): its previous copy is never used again
        return path

    def holds(self, location: str) -> bool:
        """Whether ``location`` has a copy on disk now (fetched, not trimmed or forgotten since)."""
        with self._lock:
            return location in self._copies

    def forget(self) -> None:
        """Fetch every location again on its next use (a remote refresh: new ETags mean new copies)."""
        with self._lock:
            self._forgotten.update(self._copies)
            self._copies.clear()

    def trim(self, in_memory: set[str]) -> list[str]:
        """Delete the copies past the limit, least recently used first, sparing ``in_memory`` locations."""
        removed: list[tuple[str, Path]] = []
        with self._lock:
            if self.limit is None:
                return []
            for location in list(self._copies):
                if len(self._copies) <= self.limit:
                    break
                if location not in in_memory:
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
