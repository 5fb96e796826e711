"""The Cortex 0.25-0.33 generation of an API (``kind: RealtimeAPI`` / ``kind: AsyncAPI``): its entry
rewritten as the keys of ``kind: api``, and the fields only it has (processes, concurrency, the job store)."""

from __future__ import annotations

from typing import Any

from localserve.config.models import parse_models
from localserve.config.schema import (
    API_KEYS,
    ASYNC_KEYS,
    AUTOSCALING_KEYS,
    DEFAULT_ASYNC_RETENTION,
    MULTI,
    NETWORKING_KEYS,
    REALTIME_KEYS,
    UPDATE_STRATEGY_KEYS,
)
from localserve.config.values import at_line, check_keys, describe, integer, opt_str, parse_duration
from localserve.errors import ConfigError

API_ONLY = {
    "model": "'models: {path: ...}' in 'predictor'",
    "model_format": "'predictor: {type: onnx | tensorflow}'",
    "request_handler": "a predictor class in 'predictor: {path: ...}'",
    "tf_signature_key": "'models: {signature_key: ...}' in 'predictor'",
    "handler": "'kind: api' with 'handler'",
}
"""Keys of 'kind: api' that the later generation does not take, and what it uses instead."""


def realtime_entry(entry: dict[str, Any], name: str, kind: str, where: str) -> dict[str, Any]:
    """A ``kind: RealtimeAPI / AsyncAPI`` entry (Cortex 0.25-0.33) rewritten as the keys of ``kind: api``."""
    _check_entry_keys(entry, kind, where)
    predictor = entry.get("predictor")
    if not isinstance(predictor, dict):
        raise ConfigError(
            f"{where}: 'kind: {kind}' needs a 'predictor' mapping with 'type' and 'path', got {describe(predictor)}."
        )
    out: dict[str, Any] = {k: v for k, v in entry.items() if k in API_KEYS and k != "kind"}
    pred = dict(predictor)
    for key, target in (("server_side_batching", "batching"), ("threads_per_process", "threads_per_process")):
        if key in pred:
            value = pred.pop(key)
            if target not in entry:  # a top-level key (or its command-line flag) wins
                out[target] = value
    _flatten_models(pred, kind, where)
    pred.pop("processes_per_replica", None)  # read by realtime_fields
    signature_key = pred.pop("signature_key", None)
    if signature_key is not None:
        out["tf_signature_key"] = signature_key
    out["predictor"] = pred
    autoscaling = entry.get("autoscaling")
    if autoscaling is not None:
        _apply_autoscaling(entry, autoscaling, out, where)
    return out


def _check_entry_keys(entry: dict[str, Any], kind: str, where: str) -> None:
    """The entry's keys, and those of ``networking`` and ``update_strategy`` (the platform's, checked and unused)."""
    for key in entry:
        if key not in REALTIME_KEYS and key in API_KEYS:
            raise ConfigError(
                f"{where}: {key!r} belongs to 'kind: api' (Cortex 0.8-0.11); with 'kind: {kind}' use {API_ONLY[key]}."
            )
    check_keys(entry, REALTIME_KEYS, where, None)
    for section, keys in (("networking", NETWORKING_KEYS), ("update_strategy", UPDATE_STRATEGY_KEYS)):
        raw = entry.get(section)
        if raw is not None:
            if not isinstance(raw, dict):
                raise ConfigError(f"{where}: {section!r} must be a mapping, got {describe(raw)}.")
            check_keys(raw, keys, where, section)


def _flatten_models(pred: dict[str, Any], kind: str, where: str) -> None:
    """``models`` / ``multi_model_reloading``: one model moved into ``model_path`` (and ``signature_key``),
    several into a ModelsConfig under the private key ``MULTI`` (read by ``parse_predictor``)."""
    ptype = pred.get("type", "python")
    for key in ("models", "multi_model_reloading"):
        raw = pred.pop(key, None)
        if raw is None:
            continue
        if (key == "models") == (ptype == "python"):
            instead = "'multi_model_reloading'" if ptype == "python" else "'models'"
            raise ConfigError(
                f"{at_line(pred, 'type', where)}: {key!r} in 'predictor' does not apply to {ptype} predictors; "
                f"use {instead}."
            )
        single, many = parse_models(raw, key, ptype, kind, pred.get("processes_per_replica"), where)
        if single is not None:
            if pred.get("model_path") is not None:
                raise ConfigError(f"{where}: 'model_path' and 'models' in 'predictor' cannot both be set.")
            pred["model_path"] = single
            if raw.get("signature_key") is not None:
                pred["signature_key"] = raw["signature_key"]
        else:
            pred[MULTI] = many


def _apply_autoscaling(entry: dict[str, Any], autoscaling: Any, out: dict[str, Any], where: str) -> None:
    """``autoscaling``'s replica counts moved into ``compute``, its ``max_replica_concurrency`` into ``max_queue``."""
    if not isinstance(autoscaling, dict):
        raise ConfigError(f"{where}: 'autoscaling' must be a mapping, got {describe(autoscaling)}.")
    check_keys(autoscaling, AUTOSCALING_KEYS, where, "autoscaling")
    raw_compute = entry.get("compute")
    compute = dict(raw_compute) if isinstance(raw_compute, dict) else ({} if raw_compute is None else raw_compute)
    if isinstance(compute, dict):
        for key in ("min_replicas", "max_replicas", "init_replicas"):
            if key in autoscaling:
                if key in compute:
                    raise ConfigError(
                        f"{where}: {key!r} is set in both 'compute' and 'autoscaling'; keep it in 'autoscaling'."
                    )
                compute[key] = autoscaling[key]
        out["compute"] = compute
    if "max_replica_concurrency" in autoscaling and "max_queue" not in entry:
        out["max_queue"] = autoscaling["max_replica_concurrency"]


def realtime_fields(entry: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """The ApiConfig fields only this generation sets: processes, concurrency, the AsyncAPI store."""
    autoscaling = entry.get("autoscaling") or {}
    processes = integer(entry["predictor"], "processes_per_replica", where, 1, minimum=1)
    max_conc = integer(autoscaling, "max_replica_concurrency", where, None, minimum=1)
    target = autoscaling.get("target_replica_concurrency")
    if target is not None and (isinstance(target, bool) or not isinstance(target, int | float) or target <= 0):
        raise ConfigError(
            f"{where}: invalid value {target!r} for 'target_replica_concurrency' in 'autoscaling'; "
            "expected a number above 0."
        )
    store, retention = _parse_async(entry, kind, where)
    return {
        "api_kind": kind,
        "async_store": store,
        "async_retention": retention,
        "processes_per_replica": processes,
        "max_replica_concurrency": max_conc,
        "target_replica_concurrency": None if target is None else float(target),
    }


def _parse_async(entry: dict[str, Any], kind: str, where: str) -> tuple[str | None, float]:
    """``async_store`` and ``async_retention`` of a ``kind: AsyncAPI`` entry (refused on any other kind)."""
    if kind != "AsyncAPI":
        for key in ASYNC_KEYS:
            if key in entry:
                raise ConfigError(f"{where}: {key!r} applies only to 'kind: AsyncAPI'; remove it or change 'kind'.")
        return None, DEFAULT_ASYNC_RETENTION
    batching = entry.get("batching") or (entry.get("predictor") or {}).get("server_side_batching")
    if batching is not None:
        raise ConfigError(
            f"{where}: batching does not apply to 'kind: AsyncAPI' (each job runs predict once with its own "
            "payload); remove 'batching' / 'server_side_batching', or use 'kind: RealtimeAPI'."
        )
    store = opt_str(entry, "async_store", where)
    if store is not None and store.partition("://")[0].lower() not in ("sqlite", "redis", "rediss", "unix"):
        raise ConfigError(
            f"{where}: invalid value {store!r} for 'async_store'; expected sqlite:///ABSOLUTE/PATH or "
            "redis://HOST:PORT/DB."
        )
    retention = DEFAULT_ASYNC_RETENTION
    if entry.get("async_retention") is not None:
        raw = entry["async_retention"]
        try:
            retention = parse_duration(raw)
        except ValueError:
            retention = 0.0
        if retention <= 0:
            raise ConfigError(
                f"{at_line(entry, 'async_retention', where)}: invalid value {raw!r} for 'async_retention'; "
                "expected a duration above 0 such as 7d, 12h or 30m."
            )
    return store, retention
