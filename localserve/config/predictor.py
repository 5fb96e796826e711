"""The ``predictor`` section of a ``kind: api`` entry (the predictor classes of Cortex 0.25-0.33 docs, *Predictors*) validated into a
PredictorConfig; the keys only Cortex 0.25+ puts there are refused with the ``kind: api`` spelling."""

from __future__ import annotations

from typing import Any

from localserve.config.schema import LOG_LEVELS, MULTI, PREDICTOR_CLASSES, PREDICTOR_KEYS, ModelsConfig, PredictorConfig
from localserve.config.values import check_keys, describe, opt_str, suggest
from localserve.errors import ConfigError

REALTIME_ONLY = {
    "models": "'model_path'",
    "multi_model_reloading": "'kind: RealtimeAPI'",
    "server_side_batching": "'batching'",
    "signature_key": "'tf_signature_key'",
    "processes_per_replica": "'compute: {init_replicas: N}'",
    "threads_per_process": "'threads_per_process' at the top level",
}
"""Keys of the predictor that only the kind: RealtimeAPI form rewrites, and what 'kind: api' uses instead."""


def parse_predictor(raw: Any, where: str) -> PredictorConfig | None:
    """The ``predictor`` section (a mapping, or a python predictor's file name); None when absent."""
    if raw is None:
        return None
    if isinstance(raw, str):  # "predictor: predictor.py" — a python predictor
        raw = {"type": "python", "path": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'predictor' must be a mapping with 'type' and 'path', got {describe(raw)}.")
    models = raw.get(MULTI)  # several models, parsed by realtime_entry (kind: RealtimeAPI / AsyncAPI only)
    check_keys({k: v for k, v in raw.items() if k != MULTI}, PREDICTOR_KEYS, where, "predictor")
    ptype = raw.get("type", "python")
    if ptype not in PREDICTOR_CLASSES:
        raise ConfigError(
            f"{where}: invalid value {ptype!r} for 'type' in 'predictor'; expected one of 'python', 'onnx', 'tensorflow'."
            + suggest(str(ptype), list(PREDICTOR_CLASSES))
        )
    path = raw.get("path")
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where}: 'path' in 'predictor' is required (the file holding {PREDICTOR_CLASSES[ptype]}).")
    model_path = raw.get("model_path")
    if model_path is not None and not isinstance(model_path, str):
        raise ConfigError(f"{where}: 'model_path' in 'predictor' must be a string, got {describe(model_path)}.")
    config = raw.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: 'config' in 'predictor' must be a mapping, got {describe(config)}.")
    _refuse_realtime_keys(raw, where)
    python_path = opt_str(raw, "python_path", where)
    env = _env(raw, where)
    log_level = _log_level(raw, where)
    image = raw.get("image") or raw.get("tensorflow_serving_image")
    return PredictorConfig(
        type=ptype,
        path=path,
        model_path=model_path,
        config=config,
        python_path=python_path,
        env=env,
        log_level=log_level,
        image=image if isinstance(image, str) else None,
        models=models if isinstance(models, ModelsConfig) else None,
    )


def _refuse_realtime_keys(raw: dict[str, Any], where: str) -> None:
    for key, instead in REALTIME_ONLY.items():
        if key in raw:
            raise ConfigError(
                f"{where}: {key!r} in 'predictor' belongs to 'kind: RealtimeAPI' or 'kind: AsyncAPI' (Cortex 0.25+); "
                "with 'kind: api' use " + instead + "."
            )


def _env(raw: dict[str, Any], where: str) -> dict[str, str]:
    env = raw.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise ConfigError(f"{where}: 'env' in 'predictor' must be a mapping of names to values, got {describe(env)}.")
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _log_level(raw: dict[str, Any], where: str) -> str | None:
    log_level: str | None = raw.get("log_level")
    if log_level is not None and log_level not in LOG_LEVELS:
        raise ConfigError(
            f"{where}: invalid value {log_level!r} for 'log_level' in 'predictor'; expected one of "
            f"{', '.join(map(repr, LOG_LEVELS))}."
        )
    return log_level
