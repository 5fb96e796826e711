"""``predictor.models`` (onnx, tensorflow) and ``predictor.multi_model_reloading`` (python) of Cortex 0.25-0.33: one
model (``path``), a list (``paths``) or a folder of models (``dir``), and the model cache.

Cortex's rules (``pkg/types/spec/validations.go``), worded like every config error: exactly one of ``path``, ``paths``,
``dir``; ``cache_size`` and ``disk_cache_size`` together, the first not above the second, only on ``kind: RealtimeAPI``
with ``processes_per_replica: 1``.
"""

from __future__ import annotations

import re
from typing import Any

from localserve.config.schema import MODELS_KEYS, SINGLE_MODEL_NAME, ModelPath, ModelsConfig
from localserve.config.values import at_line, check_keys, describe
from localserve.errors import ConfigError

MODEL_PATH_KEYS = ("name", "path", "signature_key")
MODEL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")  # Cortex's AlphaNumericDashUnderscore


def parse_models(
    raw: Any, key: str, ptype: str, kind: str, processes: Any, where: str
) -> tuple[str | None, ModelsConfig | None]:
    """``models`` / ``multi_model_reloading`` -> (the single model's path, or the ModelsConfig of several).

    A plain ``models: {path: ...}`` of an onnx or tensorflow predictor stays one model (``model_path``);
    everything else is a ModelsConfig.
    """
    section = f"'{key}' in 'predictor'"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: {section} must be a mapping, got {describe(raw)}.")
    check_keys(raw, MODELS_KEYS, where, key)
    given = [k for k in ("path", "paths", "dir") if raw.get(k) not in (None, [])]
    if len(given) != 1:
        what = "none" if not given else " and ".join(map(repr, given))
        raise ConfigError(
            f"{at_line(raw, given[-1], where) if given else where}: {section} takes exactly one of 'path', 'paths' "
            f"or 'dir'; got {what}."
        )
    for one in ("path", "dir", "signature_key"):
        if raw.get(one) is not None and (not isinstance(raw[one], str) or not raw[one]):
            raise ConfigError(
                f"{at_line(raw, one, where)}: invalid value {raw[one]!r} for {one!r} in {key!r}; "
                "expected a non-empty string."
            )
    keyed = raw.get("signature_key") is not None or any(
        isinstance(item, dict) and item.get("signature_key") is not None for item in raw.get("paths") or []
    )
    if ptype != "tensorflow" and keyed:
        raise ConfigError(
            f"{at_line(raw, 'signature_key', where)}: 'signature_key' in {key!r} applies to tensorflow predictors "
            f"only (the models of {ptype} predictors have no signature keys)."
        )
    cache_size, disk_cache_size = _cache_sizes(raw, key, kind, processes, where)
    if ptype != "python" and given == ["path"] and cache_size is None:
        return raw["path"], None
    paths = _paths(raw["paths"], key, where) if given == ["paths"] else ()
    return None, ModelsConfig(
        paths=paths,
        dir=raw.get("dir"),
        path=raw.get("path"),
        signature_key=raw.get("signature_key"),
        cache_size=cache_size,
        disk_cache_size=disk_cache_size,
    )


def _cache_sizes(raw: dict[str, Any], key: str, kind: str, processes: Any, where: str) -> tuple[int | None, int | None]:
    sizes: dict[str, int | None] = {}
    for size in ("cache_size", "disk_cache_size"):
        value = raw.get(size)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ConfigError(
                f"{at_line(raw, size, where)}: invalid value {value!r} for {size!r} in {key!r}; "
                "expected a whole number above 0."
            )
        if value is not None and kind != "RealtimeAPI":
            raise ConfigError(
                f"{at_line(raw, size, where)}: {size!r} in {key!r} applies only to 'kind: RealtimeAPI' "
                f"(Cortex's model cache); remove it or change 'kind: {kind}'."
            )
        sizes[size] = value
    memory, disk = sizes["cache_size"], sizes["disk_cache_size"]
    if (memory is None) != (disk is None):
        missing = "disk_cache_size" if disk is None else "cache_size"
        raise ConfigError(
            f"{where}: 'cache_size' and 'disk_cache_size' in {key!r} go together (Cortex's model cache); "
            f"set {missing!r} too, or neither."
        )
    if memory is not None and disk is not None:
        if memory > disk:
            raise ConfigError(
                f"{at_line(raw, 'cache_size', where)}: 'cache_size' ({memory}) in {key!r} cannot be greater than "
                f"'disk_cache_size' ({disk}): a model in memory is also on disk."
            )
        if processes not in (None, 1):
            raise ConfigError(
                f"{where}: with the model cache on ('cache_size' in {key!r}) 'processes_per_replica' must be 1, "
                f"got {processes!r}: each process would keep its own cache (as Cortex refused too)."
            )
    return memory, disk


def _paths(raw: Any, key: str, where: str) -> tuple[ModelPath, ...]:
    if not isinstance(raw, list):
        raise ConfigError(
            f"{where}: 'paths' in {key!r} must be a list of {{name, path, signature_key}}, got {describe(raw)}."
        )
    seen: set[str] = set()
    out = []
    for index, item in enumerate(raw):
        place = f"'paths' item {index + 1} in {key!r}"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: {place} must be a mapping with 'name' and 'path', got {describe(item)}.")
        check_keys(item, MODEL_PATH_KEYS, where, "paths")
        name, path = item.get("name"), item.get("path")
        if not isinstance(name, str) or not MODEL_NAME_RE.match(name) or name == SINGLE_MODEL_NAME:
            raise ConfigError(
                f"{where}: invalid value {name!r} for 'name' of {place}; expected letters, digits, '-' and '_' "
                f"(and not {SINGLE_MODEL_NAME!r})."
            )
        if name in seen:
            raise ConfigError(f"{where}: {place} names the model {name!r} again; each model needs its own name.")
        if not isinstance(path, str) or not path:
            raise ConfigError(f"{where}: 'path' of {place} (model {name!r}) must be a non-empty string.")
        signature_key = item.get("signature_key")
        if signature_key is not None and not isinstance(signature_key, str):
            raise ConfigError(f"{where}: 'signature_key' of {place} must be a string, got {describe(signature_key)}.")
        seen.add(name)
        out.append(ModelPath(name, path, signature_key))
    return tuple(out)
