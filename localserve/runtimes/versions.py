"""The stateless pieces of a multi-model API: a configured model, its version folders and their stamps, and
where the figures of its models go (the one state: which links out of a model were warned of)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from localserve.config.schema import SINGLE_MODEL_NAME, ModelsConfig
from localserve.errors import ModelLoadError, NotFound
from localserve.messages.version import LATEST, MAX_VERSION_DIGITS, not_a_version, whole_number

log = logging.getLogger("localserve")

_skipped: set[Path] = set()  # version folders whose name is no version, warned about once

log = logging.getLogger("localserve")


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


def configured(config: ModelsConfig) -> dict[str, Source]:
    """The models a ``path`` or ``paths`` names (a ``dir``'s are found by reading it: none here)."""
    if config.path is not None:
        return {SINGLE_MODEL_NAME: Source(SINGLE_MODEL_NAME, config.path, config.signature_key)}
    return {p.name: Source(p.name, p.path, p.signature_key or config.signature_key) for p in config.paths or ()}


def models_in(root: Path, config: ModelsConfig) -> dict[str, Source]:
    """The models at the top of a ``dir`` (read at ``root``): its folders and ``.onnx`` files."""
    if not root.is_dir():
        raise ModelLoadError(f"The models folder {config.dir!r} is not a folder.")
    return {
        p.name: Source(p.name, str(p), config.signature_key)
        for p in sorted(root.iterdir())
        if not p.name.startswith(".") and (p.is_dir() or p.suffix == ".onnx")
    }


Opener = Callable[[Path, Source], Any]
"""Opens one version of a model: its file or folder (already local) -> the loaded model."""


def versions_in(folder: Path) -> dict[int, Path]:
    """The version folders of a model (sub-folders named by whole numbers); ``{1: folder}`` when it has none.

    A folder whose name has digits that are no version (``²``, 20 digits) is skipped with a warning, once."""
    found: dict[int, Path] = {}
    if folder.is_dir():
        for path in folder.iterdir():
            if not path.is_dir() or not path.name.isdigit():
                continue
            number = whole_number(path.name)
            if number is None:
                if path not in _skipped:
                    _skipped.add(path)
                    log.warning(
                        "version folder %s skipped: a version is a whole number of at most %d ASCII digits",
                        path,
                        MAX_VERSION_DIGITS,
                    )
            elif any(path.iterdir()) and _inside(path, folder):
                found[number] = path
    return found or {1: folder}


_LEFT_OUT: set[tuple[Path, Path]] = set()  # the links out of their model already warned of (a poll reads every 10 s)


def _inside(version: Path, folder: Path) -> bool:
    """Whether a version folder lies in its model's folder; a link out of it (to anywhere on the server) is left
    out, with a warning once: the models served are the project's, and what a link reaches is not."""
    target = version.resolve()
    if target.is_relative_to(folder.resolve()):
        return True
    if (version, target) not in _LEFT_OUT:
        _LEFT_OUT.add((version, target))
        log.warning(
            "model folder %s: version %s is a link to %s, outside the model's folder; it is not served (copy it in)",
            folder.name,
            version.name,
            target,
        )
    return False


def version_number(name: str, version: str | int, versions: dict[int, Path]) -> int:
    """The version a call names (Cortex's rules: a whole number, or ``latest`` / ``highest``) among ``versions``
    of model ``name``; NotFound (404) or RequestError (400)."""
    if isinstance(version, str) and version in LATEST:
        number = max(versions)
    elif isinstance(version, int) and not isinstance(version, bool):
        number = version
    else:
        parsed = whole_number(version) if isinstance(version, str) else None
        if parsed is None:
            raise not_a_version(version)
        number = parsed
    if number not in versions:
        listed = ", ".join(str(v) for v in sorted(versions))
        raise NotFound(f"Model {name!r} has no version {number}; its versions are: {listed}.")
    return number


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
