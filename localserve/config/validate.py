"""Validation of one ``- kind: api`` mapping, section by section, into an ApiConfig.

Every problem is a ConfigError naming the file, the API, the key, the bad value and what
was expected (with the nearest valid key for a typo).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from localserve.config.schema import (
    _DURATION_UNITS,
    API_KEYS,
    ASYNC_KEYS,
    AUTOSCALING_KEYS,
    BATCHING_KEYS,
    COMPUTE_KEYS,
    CPU_RE,
    CUDA_OPTION_KEYS,
    DEFAULT_ASYNC_RETENTION,
    DURATION_RE,
    HANDLER_RE,
    KINDS,
    LOG_LEVELS,
    MEM_RE,
    MODELS_KEYS,
    NAME_RE,
    NETWORKING_KEYS,
    PREDICTOR_CLASSES,
    PREDICTOR_KEYS,
    REALTIME_KEYS,
    RESERVED_NAMES,
    TRACKER_KEYS,
    UPDATE_STRATEGY_KEYS,
    ApiConfig,
    BatchingConfig,
    ComputeConfig,
    PredictorConfig,
    TrackerConfig,
)
from localserve.errors import ConfigError


def parse_api(entry: Any, source: str, index: int = 0) -> ApiConfig:
    """Validate one ``- kind: api`` mapping."""
    where = f"{source}: api #{index + 1}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with 'kind: api' and 'name', got {_describe(entry)}.")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: 'name' is required and must be a string, got {_describe(name)}.")
    where = f"{source}: api {name!r}"
    if not NAME_RE.match(name):
        raise ConfigError(
            f"{where}: invalid name {name!r}; expected lower-case letters, digits and '-' "
            "(starting and ending with a letter or digit, at most 63 characters)."
        )
    if name in RESERVED_NAMES:
        raise ConfigError(
            f"{where}: the name {name!r} is reserved by localserve (its own route /{name}); choose another."
        )
    kind = entry.get("kind", "api")
    if kind not in KINDS:
        raise ConfigError(
            f"{where}: invalid value {kind!r} for 'kind'; expected one of {', '.join(map(repr, KINDS))}."
            + _suggest(str(kind), KINDS)
        )
    if kind != "api":
        return _parse_realtime(entry, name, kind, where)
    for key in entry:
        if key not in API_KEYS and key in REALTIME_KEYS:
            hint = (
                "write 'kind: AsyncAPI'"
                if key in ASYNC_KEYS
                else "use 'compute' for replicas, or write 'kind: RealtimeAPI'"
                if key == "autoscaling"
                else "write 'kind: RealtimeAPI'"
            )
            raise ConfigError(
                f"{where}: {key!r} belongs to the Cortex 0.25+ generation of the config (kind: RealtimeAPI or "
                f"AsyncAPI); with 'kind: api' {hint}."
            )
    _check_keys(entry, API_KEYS, where, None)

    handler = _opt_str(entry, "handler", where)
    if handler is not None and not HANDLER_RE.match(handler):
        raise ConfigError(
            f"{where}: invalid value {handler!r} for 'handler'; it must look like \"<module>:<function>\", "
            'e.g. "main:handler".'
        )
    request_handler = _opt_str(entry, "request_handler", where)
    model = _opt_str(entry, "model", where)
    predictor = _parse_predictor(entry.get("predictor"), where)
    model_format = _opt_str(entry, "model_format", where)
    if model_format is not None and model_format not in ("onnx", "tensorflow"):
        raise ConfigError(
            f"{where}: invalid value {model_format!r} for 'model_format'; expected 'onnx' or 'tensorflow'."
        )

    chosen = [k for k, v in (("handler", handler), ("predictor", predictor)) if v is not None]
    if model is not None or request_handler is not None:
        chosen.append("model")
    if len(chosen) > 1 and not (chosen == ["predictor", "model"] and request_handler is None):
        raise ConfigError(
            f"{where}: {' and '.join(repr(c) for c in chosen)} cannot be combined; an API is either an ABEJA "
            "'handler', a 'predictor', or a 'model' with an optional 'request_handler'."
        )
    if not chosen:
        raise ConfigError(
            f"{where}: nothing to serve; set 'handler', 'predictor', or 'model' (with 'request_handler')."
        )
    if request_handler is not None and model is None:
        raise ConfigError(
            f"{where}: 'request_handler' needs a 'model' to run between pre_inference and post_inference."
        )
    if predictor is not None:
        if predictor.type in ("onnx", "tensorflow") and not (predictor.model_path or model):
            raise ConfigError(
                f"{where}: a predictor of type {predictor.type!r} needs a model; set 'model_path' in 'predictor'."
            )
        if predictor.type == "python" and predictor.model_path:
            raise ConfigError(f"{where}: 'model_path' in 'predictor' is only for the 'onnx' and 'tensorflow' types.")
    if handler is not None and entry.get("batching") is not None:
        raise ConfigError(
            f"{where}: 'batching' does not apply to an ABEJA 'handler' (each call answers one request); "
            "remove it, or serve the model through a 'request_handler' or a 'predictor'."
        )
    location = predictor.model_path if predictor is not None and predictor.model_path else model
    if location is not None:
        inferred = infer_model_format(location)
        if predictor is not None and predictor.type in ("onnx", "tensorflow"):
            inferred = predictor.type
        if model_format is None:
            model_format = inferred
        if model_format is None:
            key = "model" if model is not None else "predictor"
            raise ConfigError(
                f"{_at(entry, key, where)}: cannot tell the format of the model {location!r} from its name "
                "('.onnx' is ONNX; a folder or a '.zip' is a TensorFlow SavedModel); set 'model_format: onnx' "
                "or 'model_format: tensorflow'."
            )
    elif model_format is not None:
        raise ConfigError(f"{where}: 'model_format' is set but there is no 'model'.")

    tf_signature_key = _opt_str(entry, "tf_signature_key", where)
    if tf_signature_key is not None and model_format != "tensorflow":
        raise ConfigError(f"{where}: 'tf_signature_key' only applies to TensorFlow models (model_format: tensorflow).")

    return ApiConfig(
        name=name,
        model=model,
        model_format=model_format,
        request_handler=request_handler,
        handler=handler,
        predictor=predictor,
        tf_signature_key=tf_signature_key,
        tracker=_parse_tracker(entry.get("tracker"), where),
        compute=_parse_compute(entry.get("compute"), where),
        metadata=_opt_mapping(entry, "metadata", where),
        context=_opt_mapping(entry, "context", where),
        batching=_parse_batching(entry.get("batching"), where),
        threads_per_process=_int(entry, "threads_per_process", where, 1, minimum=1),
        max_queue=_int(entry, "max_queue", where, 100, minimum=1),
        timeout=_duration(entry.get("timeout", 60.0), "timeout", where, positive=True),
        model_threads=_int(entry, "model_threads", where, None, minimum=1),
        cuda_options=_parse_cuda_options(entry.get("cuda_options"), where),
    )


def infer_model_format(location: str) -> str | None:
    """Seed 003's rule on the path (a URL's query and fragment left out): '.onnx' -> 'onnx'; a folder
    (a trailing '/', or a last segment without a suffix) or '.zip' -> 'tensorflow'; anything else None."""
    from urllib.parse import urlsplit

    path = urlsplit(location).path if "://" in location else location
    if path.endswith("/"):
        return "tensorflow"
    last = path.rsplit("/", 1)[-1].lower()
    if last.endswith(".onnx"):
        return "onnx"
    if last.endswith(".zip") or "." not in last.lstrip("."):
        return "tensorflow"
    return None


def _realtime_entry(entry: dict[str, Any], name: str, kind: str, where: str) -> dict[str, Any]:
    """A ``kind: RealtimeAPI / AsyncAPI`` entry (Cortex 0.25-0.33) rewritten as the keys of ``kind: api``."""
    for key in entry:
        if key not in REALTIME_KEYS and key in API_KEYS:
            hint = {
                "model": "'models: {path: ...}' in 'predictor'",
                "model_format": "'predictor: {type: onnx | tensorflow}'",
                "request_handler": "a predictor class in 'predictor: {path: ...}'",
                "tf_signature_key": "'models: {signature_key: ...}' in 'predictor'",
                "handler": "'kind: api' with 'handler'",
            }[key]
            raise ConfigError(
                f"{where}: {key!r} belongs to 'kind: api' (Cortex 0.8-0.11); with 'kind: {kind}' use {hint}."
            )
    _check_keys(entry, REALTIME_KEYS, where, None)
    for section, keys in (("networking", NETWORKING_KEYS), ("update_strategy", UPDATE_STRATEGY_KEYS)):
        raw = entry.get(section)
        if raw is not None:
            if not isinstance(raw, dict):
                raise ConfigError(f"{where}: {section!r} must be a mapping, got {_describe(raw)}.")
            _check_keys(raw, keys, where, section)
    predictor = entry.get("predictor")
    if not isinstance(predictor, dict):
        raise ConfigError(
            f"{where}: 'kind: {kind}' needs a 'predictor' mapping with 'type' and 'path', got {_describe(predictor)}."
        )
    out: dict[str, Any] = {k: v for k, v in entry.items() if k in API_KEYS and k != "kind"}
    pred = dict(predictor)
    for key, target in (("server_side_batching", "batching"), ("threads_per_process", "threads_per_process")):
        if key in pred:
            value = pred.pop(key)
            if target not in entry:  # a top-level key (or its command-line flag) wins
                out[target] = value
    pred.pop("processes_per_replica", None)  # read by _parse_realtime
    models = pred.pop("models", None)
    if models is not None:
        if not isinstance(models, dict):
            raise ConfigError(f"{where}: 'models' in 'predictor' must be a mapping, got {_describe(models)}.")
        _check_keys(models, MODELS_KEYS, where, "models")
        for many in ("paths", "dir"):
            if models.get(many) is not None:
                raise ConfigError(
                    f"{_at(models, many, where)}: 'models: {{{many}: ...}}' serves several models from one API "
                    "(Cortex's multi-model caching), which localserve does not do; give each model its own API "
                    "with 'models: {path: ...}'."
                )
        if models.get("path") is not None:
            if pred.get("model_path") is not None:
                raise ConfigError(f"{where}: 'model_path' and 'models' in 'predictor' cannot both be set.")
            pred["model_path"] = models["path"]
        if models.get("signature_key") is not None:
            pred["signature_key"] = models["signature_key"]
    signature_key = pred.pop("signature_key", None)
    if signature_key is not None:
        out["tf_signature_key"] = signature_key
    out["predictor"] = pred
    autoscaling = entry.get("autoscaling")
    if autoscaling is not None:
        if not isinstance(autoscaling, dict):
            raise ConfigError(f"{where}: 'autoscaling' must be a mapping, got {_describe(autoscaling)}.")
        _check_keys(autoscaling, AUTOSCALING_KEYS, where, "autoscaling")
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
    return out


def _parse_realtime(entry: dict[str, Any], name: str, kind: str, where: str) -> ApiConfig:
    flat = _realtime_entry(entry, name, kind, where)
    api = parse_api({"kind": "api", "name": name, **flat}, where.split(": api ")[0])
    autoscaling = entry.get("autoscaling") or {}
    processes = _int(entry["predictor"], "processes_per_replica", where, 1, minimum=1)
    max_conc = _int(autoscaling, "max_replica_concurrency", where, None, minimum=1)
    target = autoscaling.get("target_replica_concurrency")
    if target is not None and (isinstance(target, bool) or not isinstance(target, int | float) or target <= 0):
        raise ConfigError(
            f"{where}: invalid value {target!r} for 'target_replica_concurrency' in 'autoscaling'; "
            "expected a number above 0."
        )
    store, retention = _parse_async(entry, kind, where)
    return replace(
        api,
        api_kind=kind,
        async_store=store,
        async_retention=retention,
        processes_per_replica=processes,
        max_replica_concurrency=max_conc,
        target_replica_concurrency=None if target is None else float(target),
    )


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
    store = _opt_str(entry, "async_store", where)
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
                f"{_at(entry, 'async_retention', where)}: invalid value {raw!r} for 'async_retention'; "
                "expected a duration above 0 such as 7d, 12h or 30m."
            )
    return store, retention


def _at(raw: Any, key: str, where: str) -> str:
    """``where`` with the line of ``key`` in the YAML file, when the loader recorded it."""
    lines = getattr(raw, "key_lines", None)
    if lines and key in lines:
        source, _, rest = where.partition(": ")
        return f"{source}, line {lines[key]}: {rest}"
    return where


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like ``5ms``, ``0.5s``, ``2m``; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(value)
        return float(value)
    if isinstance(value, str):
        match = DURATION_RE.match(value.strip())
        if match:
            return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    raise ValueError(value)


def _parse_predictor(raw: Any, where: str) -> PredictorConfig | None:
    if raw is None:
        return None
    if isinstance(raw, str):  # "predictor: predictor.py" — a python predictor
        raw = {"type": "python", "path": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'predictor' must be a mapping with 'type' and 'path', got {_describe(raw)}.")
    _check_keys(raw, PREDICTOR_KEYS, where, "predictor")
    ptype = raw.get("type", "python")
    if ptype not in PREDICTOR_CLASSES:
        raise ConfigError(
            f"{where}: invalid value {ptype!r} for 'type' in 'predictor'; expected one of 'python', 'onnx', 'tensorflow'."
            + _suggest(str(ptype), list(PREDICTOR_CLASSES))
        )
    path = raw.get("path")
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where}: 'path' in 'predictor' is required (the file holding {PREDICTOR_CLASSES[ptype]}).")
    model_path = raw.get("model_path")
    if model_path is not None and not isinstance(model_path, str):
        raise ConfigError(f"{where}: 'model_path' in 'predictor' must be a string, got {_describe(model_path)}.")
    config = raw.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: 'config' in 'predictor' must be a mapping, got {_describe(config)}.")
    for key in ("models", "server_side_batching", "signature_key", "processes_per_replica", "threads_per_process"):
        if key in raw:  # only the kind: RealtimeAPI form rewrites these
            raise ConfigError(
                f"{where}: {key!r} in 'predictor' belongs to 'kind: RealtimeAPI' or 'kind: AsyncAPI' (Cortex 0.25+); "
                "with 'kind: api' use "
                + {
                    "models": "'model_path'",
                    "server_side_batching": "'batching'",
                    "signature_key": "'tf_signature_key'",
                    "processes_per_replica": "'compute: {init_replicas: N}'",
                    "threads_per_process": "'threads_per_process' at the top level",
                }[key]
                + "."
            )
    python_path = _opt_str(raw, "python_path", where)
    env = raw.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise ConfigError(f"{where}: 'env' in 'predictor' must be a mapping of names to values, got {_describe(env)}.")
    log_level = raw.get("log_level")
    if log_level is not None and log_level not in LOG_LEVELS:
        raise ConfigError(
            f"{where}: invalid value {log_level!r} for 'log_level' in 'predictor'; expected one of "
            f"{', '.join(map(repr, LOG_LEVELS))}."
        )
    image = raw.get("image") or raw.get("tensorflow_serving_image")
    return PredictorConfig(
        type=ptype,
        path=path,
        model_path=model_path,
        config=config,
        python_path=python_path,
        env={k: "" if v is None else str(v) for k, v in env.items()},
        log_level=log_level,
        image=image if isinstance(image, str) else None,
    )


def _parse_tracker(raw: Any, where: str) -> TrackerConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'tracker' must be a mapping with 'key' and 'model_type', got {_describe(raw)}.")
    _check_keys(raw, TRACKER_KEYS, where, "tracker")
    model_type = raw.get("model_type")
    if model_type not in ("classification", "regression"):
        raise ConfigError(
            f"{where}: invalid value {model_type!r} for 'model_type' in 'tracker'; "
            "expected 'classification' or 'regression'."
        )
    key = raw.get("key")
    if key is not None and not isinstance(key, str):
        raise ConfigError(f"{where}: 'key' in 'tracker' must be a string, got {_describe(key)}.")
    return TrackerConfig(model_type=model_type, key=key)


def _parse_compute(raw: Any, where: str) -> ComputeConfig:
    if raw is None:
        return ComputeConfig()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'compute' must be a mapping, got {_describe(raw)}.")
    _check_keys(raw, COMPUTE_KEYS, where, "compute")
    ctx = f"{where}: compute"
    min_r = _int(raw, "min_replicas", ctx, 1, minimum=1)
    max_r = _int(raw, "max_replicas", ctx, max(100, min_r), minimum=1)
    init_r = _int(raw, "init_replicas", ctx, None, minimum=1)
    if max_r < min_r:
        raise ConfigError(f"{where}: 'max_replicas' in 'compute' ({max_r}) is below 'min_replicas' ({min_r}).")
    if init_r is not None and not min_r <= init_r <= max_r:
        raise ConfigError(
            f"{where}: invalid value {init_r} for 'init_replicas' in 'compute'; expected between "
            f"min_replicas ({min_r}) and max_replicas ({max_r})."
        )
    target = _int(raw, "target_cpu_utilization", ctx, 80, minimum=1)
    if target > 100:
        raise ConfigError(
            f"{where}: invalid value {target} for 'target_cpu_utilization' in 'compute'; expected a percentage 1-100."
        )
    cpu_raw = raw.get("cpu", "200m")
    cpu = str(cpu_raw)
    if isinstance(cpu_raw, bool) or not CPU_RE.match(cpu) or float(cpu.rstrip("m")) <= 0:
        raise ConfigError(
            f"{where}: invalid value {cpu_raw!r} for 'cpu' in 'compute'; expected a number of cores like 1, 0.5 or '200m'."
        )
    gpu = _int(raw, "gpu", ctx, 0, minimum=0)
    inf = _int(raw, "inf", ctx, 0, minimum=0)
    if inf:
        raise ConfigError(
            f"{_at(raw, 'inf', where)}: 'inf: {inf}' in 'compute' asks for AWS Inferentia chips, which no local "
            "machine has; remove 'inf' (the model runs on CPU, or on a GPU with 'gpu: 1')."
        )
    mem_raw = raw.get("mem")
    mem = None if mem_raw is None else str(mem_raw)
    if mem is not None and (isinstance(mem_raw, bool) or not MEM_RE.match(mem)):
        raise ConfigError(
            f"{where}: invalid value {mem_raw!r} for 'mem' in 'compute'; expected a quantity like '2Gi' or '512Mi'."
        )
    return ComputeConfig(min_r, max_r, init_r, target, cpu, gpu, mem)


def _parse_batching(raw: Any, where: str) -> BatchingConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{where}: 'batching' must be a mapping with 'max_batch_size' and 'batch_interval', got {_describe(raw)}."
        )
    _check_keys(raw, BATCHING_KEYS, where, "batching")
    if "max_batch_size" not in raw:
        raise ConfigError(f"{where}: 'max_batch_size' in 'batching' is required.")
    size = _int(raw, "max_batch_size", f"{where}: batching", 1, minimum=1)
    interval = _duration(raw.get("batch_interval", 0.005), "batch_interval", where, "batching")
    sizes = raw.get("batch_sizes")
    if sizes is not None:
        if (
            not isinstance(sizes, list)
            or not sizes
            or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= size for n in sizes)
        ):
            raise ConfigError(
                f"{where}: invalid value {sizes!r} for 'batch_sizes' in 'batching'; expected a list of whole numbers "
                f"from 1 to max_batch_size ({size}), e.g. [1, 4, {size}]."
            )
        if size not in sizes:
            raise ConfigError(
                f"{where}: 'batch_sizes' in 'batching' must include max_batch_size ({size}); got {sizes!r}."
            )
    return BatchingConfig(max_batch_size=size, batch_interval=interval, batch_sizes=tuple(sizes) if sizes else None)


def _parse_cuda_options(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'cuda_options' must be a mapping of onnxruntime CUDA provider options.")
    _check_keys(raw, CUDA_OPTION_KEYS, where, "cuda_options")
    return {str(key): _cuda_option(str(key), value, where) for key, value in raw.items()}


CUDA_CHOICES = {
    "cudnn_conv_algo_search": ("EXHAUSTIVE", "HEURISTIC", "DEFAULT"),
    "arena_extend_strategy": ("kNextPowerOfTwo", "kSameAsRequested"),
}
"""Options whose values onnxruntime takes from a list, spelled as it wants them (it is case-sensitive)."""


def _cuda_option(key: str, value: Any, where: str) -> str:
    """One CUDA provider option as the string onnxruntime takes; a value it would refuse is a ConfigError.

    onnxruntime refuses a bad value only when the session is made, and then falls back to the CPU
    on its own (its ``enable_fallback``), so a typo would look like a missing GPU.
    """
    place = f"{where}: 'cuda_options.{key}'"
    if key in CUDA_CHOICES:
        choices = CUDA_CHOICES[key]
        found = next((c for c in choices if str(value).lower() == c.lower()), None)
        if found is None:
            raise ConfigError(f"{place} must be one of {', '.join(choices)}; got {value!r}.")
        return found
    if key == "gpu_mem_limit":
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{place} must be a number of bytes above 0 (e.g. 8589934592 for 8 GiB); got {value!r}.")
        return str(value)
    switch = SWITCH.get(value.lower() if isinstance(value, str) else value) if isinstance(value, (str, int)) else None
    if switch is None:  # the others are switches: cudnn_conv_use_max_workspace, use_tf32, prefer_nhwc, ...
        raise ConfigError(f"{place} is a switch: true or false (1 or 0); got {value!r}.")
    if key == "enable_cuda_graph" and switch == "1":
        raise ConfigError(
            f"{place}: CUDA graphs are not supported: onnxruntime replays them only on inputs bound to fixed "
            "GPU buffers (IOBinding), and localserve feeds each request's arrays. Leave it out."
        )
    return switch


SWITCH = {True: "1", False: "0", "1": "1", "0": "0", "true": "1", "false": "0"}  # 1 and 0 are True and False


def _check_keys(raw: Mapping[str, Any], valid: tuple[str, ...], where: str, section: str | None) -> None:
    for key in raw:
        if key not in valid:
            place = f" in {section!r}" if section else ""
            raise ConfigError(f"{where}: unknown key {key!r}{place}." + _suggest(str(key), valid))


def _suggest(word: str, options: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _opt_str(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}; expected a non-empty string.")
    return value


def _opt_mapping(raw: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}; expected a mapping.")
    return value


def _int(raw: Mapping[str, Any], key: str, where: str, default: Any, *, minimum: int) -> Any:
    value = raw.get(key, default)
    if value is None:
        return None
    maximum = MAXIMUMS.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (maximum and value > maximum):
        section = ""
        if ": " in where and where.rsplit(": ", 1)[1] in ("compute", "batching"):
            where, section = where.rsplit(": ", 1)
            section = f" in {section!r}"
        expected = f"an integer from {minimum} to {maximum:,}" if maximum else f"an integer >= {minimum}"
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}{section}; expected {expected}.")
    return value


MAXIMUMS = {
    # Threads and processes are made at start: 10^20 of them would exhaust the machine before a word.
    "threads_per_process": 1024,
    "model_threads": 1024,
    "min_replicas": 1000,
    "max_replicas": 1000,
    "init_replicas": 1000,
    # Every bucket size up to it is warmed with a batch of zeros at load.
    "max_batch_size": 4096,
}
"""The largest value each integer key takes."""


def _duration(value: Any, key: str, where: str, section: str | None = None, *, positive: bool = False) -> float:
    place = f" in {section!r}" if section else ""
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise ConfigError(
            f"{where}: invalid value {value!r} for {key!r}{place}; expected a duration like 5ms, 0.5s or 60 (seconds)."
        ) from None
    if not math.isfinite(seconds):  # .nan would mean "no deadline" silently, .inf never ends
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}{place}; expected a finite duration.")
    if positive and seconds <= 0:
        raise ConfigError(
            f"{where}: invalid value {value!r} for {key!r}{place}; expected a duration above 0, like 0.5s or 60 "
            "(seconds)."
        )
    return seconds


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}" if not isinstance(value, list | dict) else type(value).__name__
