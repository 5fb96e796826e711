"""The versions of a model set that did not load, each refused again without a load until its files change."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from localserve.errors import LocalServeError, ModelLoadError
from localserve.messages.error_text import without_paths
from localserve.runtimes.versions import stamp_of

log = logging.getLogger("localserve")

Key = tuple[str, int]  # (model name, version)
T = TypeVar("T")


class FailedLoads:
    """Versions whose load failed, with the stamp of their files then: loading a corrupt file again on every
    request would parse it each time; the 503 a client gets names no server path (the log has them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: dict[Key, tuple[float, ModelLoadError]] = {}

    def __contains__(self, key: Key) -> bool:
        with self._lock:
            return key in self._failed

    def load(self, key: Key, files: Path, load: Callable[[], T]) -> T:
        """``load()`` of version ``key`` (its ``files``), or the 503 of its failure: the one it failed with before
        while its files are the same, else the one it fails with now (a client may retry once it is replaced)."""
        stamp = stamp_of(files)
        self.check(key, stamp)
        try:
            model = load()
        except (LocalServeError, OSError) as exc:
            raise self.record(key, stamp, exc, files) from None
        self.forget(key)
        return model

    def check(self, key: Key, stamp: float) -> None:
        """Raise the error of the failed load of ``key`` when its files are still those (``stamp``)."""
        with self._lock:
            known = self._failed.get(key)
        if known is not None and known[0] == stamp:
            raise known[1]

    def record(self, key: Key, stamp: float, exc: LocalServeError | OSError, files: Path) -> ModelLoadError:
        """The 503 for a load of ``key`` that failed with ``exc``, kept for its files' ``stamp``, and logged."""
        log.warning("model %r version %d does not load: %s", key[0], key[1], exc)
        where = files.parent if files.is_file() else files
        error = ModelLoadError(
            f"Model {key[0]!r} version {key[1]} cannot be loaded: {without_paths(str(exc), where)}", status_code=503
        )
        with self._lock:
            self._failed[key] = (stamp, error)
        return error

    def forget(self, key: Key) -> None:
        """``key`` loaded."""
        with self._lock:
            self._failed.pop(key, None)

    def of(self, name: str) -> dict[int, str]:
        """The versions of model ``name`` that did not load (as their files were then), each with why."""
        with self._lock:
            return {number: str(error) for (model, number), (_, error) in self._failed.items() if model == name}
