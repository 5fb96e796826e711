"""The stateless pieces of a multi-model API: a configured model, its version folders and their stamps, and
where the figures of its models go."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


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


def stamp_of(files: Path) -> float:
    """The latest modification time of a version's files (a changed file is a changed model); -1 when gone."""
    try:
        if files.is_file():
            return float(files.stat().st_mtime_ns)
        return float(max([files.stat().st_mtime_ns, *(p.stat().st_mtime_ns for p in files.rglob("*"))]))
    except OSError:
        return -1.0


def version_changes(before: dict[str, set[int]], after: dict[str, set[int]]) -> list[dict[str, Any]]:
    """The versions ``added`` and ``removed`` between two readings of the folders (``{model: versions}``)."""
    added = [(name, v, "added") for name in after for v in after[name] - before.get(name, set())]
    removed = [(name, v, "removed") for name in before for v in before[name] - after.get(name, set())]
    return [{"model": name, "version": v, "change": change} for name, v, change in added + removed]
