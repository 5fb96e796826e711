"""API configuration: Cortex's ``- kind: api`` list, validated into frozen dataclasses.

Example::

    config = load_config(Path("iris-classifier"))
    api = config.apis[0]          # ApiConfig(name="iris", model="iris.onnx", ...)

Every problem is a ConfigError naming the file, the API, the key, the bad value and what
was expected (with the nearest valid key for a typo).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from localserve.config.schema import (
    API_KEYS,
    BATCHING_KEYS,
    COMPUTE_KEYS,
    CONFIG_FILES,
    CPU_RE,
    DURATION_RE,
    HANDLER_RE,
    MEM_RE,
    NAME_RE,
    PREDICTOR_CLASSES,
    PREDICTOR_KEYS,
    RESERVED_NAMES,
    TRACKER_KEYS,
    ApiConfig,
    BatchingConfig,
    ComputeConfig,
    PredictorConfig,
    TrackerConfig,
)
from localserve.config.splitter import SPLITTER_KIND, SplitterConfig, TrafficSplit, check_splitters, parse_splitter
from localserve.config.validate import api_name, infer_model_format, parse_api
from localserve.config.values import describe, parse_duration, suggest
from localserve.errors import ConfigError

__all__ = [
    "API_KEYS",
    "BATCHING_KEYS",
    "COMPUTE_KEYS",
    "CONFIG_FILES",
    "CPU_RE",
    "DURATION_RE",
    "HANDLER_RE",
    "MEM_RE",
    "NAME_RE",
    "PREDICTOR_CLASSES",
    "PREDICTOR_KEYS",
    "RESERVED_NAMES",
    "TRACKER_KEYS",
    "ApiConfig",
    "BatchingConfig",
    "ComputeConfig",
    "PredictorConfig",
    "ServeConfig",
    "SplitterConfig",
    "TrackerConfig",
    "TrafficSplit",
    "find_config_file",
    "infer_model_format",
    "load_config",
    "parse_api",
    "parse_duration",
]


@dataclass(frozen=True)
class ServeConfig:
    """A project's configuration: its directory and its APIs, as read from a file or the command line."""

    project: Path
    apis: tuple[ApiConfig, ...]
    source: str  # the config file, or "command line"
    config_file: Path | None = None  # the file read, when there is one
    workdir: Path | None = None  # where user code runs: the packaged view of the project (None: the project)
    mnt_mode: str = "off"  # how /mnt/project is provided: native | mount | redirect | off (compat.mnt)
    splitters: tuple[SplitterConfig, ...] = ()  # kind: TrafficSplitter entries: routes onto the APIs above

    def api(self, name: str | None) -> ApiConfig:
        """The API called ``name``; the only API when ``name`` is None."""
        if name is None:
            if len(self.apis) == 1:
                return self.apis[0]
            names = ", ".join(a.name for a in self.apis)
            raise ConfigError(f"{self.source}: several APIs are defined ({names}); choose one with --api NAME.")
        for api in self.apis:
            if api.name == name:
                return api
        for splitter in self.splitters:
            if splitter.name == name:
                targets = ", ".join(t.name for t in splitter.targets)
                raise ConfigError(
                    f"{self.source}: {name!r} is a TrafficSplitter, which routes requests between APIs; choose one "
                    f"of its APIs ({targets}), or 'serve' it."
                )
        raise ConfigError(
            f"{self.source}: no API named {name!r}; the APIs are: {', '.join(a.name for a in self.apis)}."
            + suggest(name, [a.name for a in self.apis])
        )

    def only(self, names: tuple[str, ...] | list[str]) -> ServeConfig:
        """The same config restricted to the APIs called ``names`` (``serve --api``).

        A TrafficSplitter named brings its APIs along; one whose APIs are not all kept is left out.
        """
        chosen = {s.name: s for s in self.splitters if s.name in names}
        wanted = [n for n in names if n not in chosen]
        wanted += [t.name for s in chosen.values() for t in s.apis if t.name not in wanted]
        apis = tuple(self.api(n) for n in wanted)
        kept = {api.name for api in apis}
        splitters = tuple(s for s in self.splitters if all(t.name in kept for t in s.apis))
        return replace(self, apis=apis, splitters=splitters)


def find_config_file(project: Path) -> Path | None:
    """The project's config file (localserve.yaml, then cortex.yaml ...); None when it has none."""
    for name in CONFIG_FILES:
        candidate = project / name
        if candidate.is_file():
            return candidate
    return None


def load_config(project: Path, config_file: Path | None = None, **flags: Any) -> ServeConfig:
    """Read the project's API config, or build a one-API config from CLI flags.

    Example::

        load_config(Path("."))                                  # localserve.yaml or cortex.yaml
        load_config(Path("."), handler="main:handler")          # one ABEJA API from flags

    ``flags`` are API keys from the command line (``handler``, ``batching`` ...): with a config file they override every
    API's keys; without one they must name a handler, a model or a predictor.
    """
    flags = {k: v for k, v in flags.items() if v is not None}
    project = project.resolve()
    if config_file is None and "handler" not in flags and "model" not in flags and "predictor" not in flags:
        config_file = find_config_file(project)
    path = None
    if config_file is not None:
        path, raw = _read_file(config_file)
        source = path.name
        entries = [_with_flags(entry, flags) for entry in raw]
    elif flags:
        source = "command line"
        entries = [{"name": _default_name(project), **flags}]
    else:
        raise ConfigError(
            f"No API to serve in {project}: there is no {' / '.join(CONFIG_FILES[::2])} and no --handler; "
            "pass --handler main:handler for an ABEJA handler, or --config FILE."
        )
    apis: list[ApiConfig] = []
    splitters: list[SplitterConfig] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("kind") == SPLITTER_KIND:
            name, where = api_name(entry, source, index)
            splitters.append(parse_splitter(entry, name, where))
        else:
            apis.append(parse_api(entry, source, index))
    seen: set[str] = set()
    for name in [api.name for api in apis] + [s.name for s in splitters]:
        if name in seen:
            raise ConfigError(f"{source}: api {name!r} is defined twice; API names must be unique.")
        seen.add(name)
    check_splitters(splitters, apis, source)
    return ServeConfig(
        project=project,
        apis=tuple(apis),
        source=source,
        config_file=path if config_file is not None else None,
        splitters=tuple(splitters),
    )


def _read_file(config_file: Path) -> tuple[Path, list[Any]]:
    """The config file's path and its entries (one mapping read as a list of one), each key's line recorded."""
    import yaml

    path = config_file if config_file.is_absolute() else (Path.cwd() / config_file)
    if not path.is_file():
        raise ConfigError(f"Config file {str(config_file)!r} does not exist.")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path.name}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8."
        ) from None
    try:
        raw = yaml.load(text, Loader=_line_loader())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path.name}: not valid YAML: {exc}") from None
    source = path.name
    if raw is None:
        raise ConfigError(f"{source}: the file is empty; expected a list of '- kind: api' entries.")
    if raw == []:
        raise ConfigError(f"{source}: the list of APIs is empty; expected at least one '- name: ...' entry.")
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: expected a list of '- kind: api' entries, got {describe(raw)}.")
    return path, raw


class _LocatedDict(dict[str, Any]):
    """A YAML mapping that remembers the line of each key, so an error can name it."""

    key_lines: dict[str, int]


def _line_loader() -> Any:
    import yaml

    class LineLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            mapping = _LocatedDict(cast(dict[str, Any], super().construct_mapping(node, deep=True)))
            mapping.key_lines = {
                str(key_node.value): key_node.start_mark.line + 1 for key_node, _ in node.value if key_node.value
            }
            return mapping

    LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, LineLoader.construct_mapping)
    return LineLoader


def _with_flags(entry: Any, flags: dict[str, Any]) -> Any:
    if not isinstance(entry, dict) or not flags or entry.get("kind") == SPLITTER_KIND:
        return entry
    merged = _LocatedDict(entry, **flags)
    merged.key_lines = getattr(entry, "key_lines", {})
    return merged


def _default_name(project: Path) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", project.name.lower()).strip("-")[:63].strip("-")
    return name if NAME_RE.match(name) and name not in RESERVED_NAMES else "api"
