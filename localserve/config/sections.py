"""The small sections of an API: ``tracker``, ``compute``, ``batching`` and ``cuda_options``, each
validated into its dataclass (or the option strings onnxruntime takes)."""

from __future__ import annotations

from typing import Any

from localserve.config.schema import (
    BATCHING_KEYS,
    COMPUTE_KEYS,
    CPU_RE,
    CUDA_OPTION_KEYS,
    MEM_RE,
    TRACKER_KEYS,
    BatchingConfig,
    ComputeConfig,
    TrackerConfig,
)
from localserve.config.values import at_line, check_keys, describe, duration, integer
from localserve.errors import ConfigError


def parse_tracker(raw: Any, where: str) -> TrackerConfig | None:
    """The ``tracker`` section: what to track (``key``) and how (``model_type``); None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'tracker' must be a mapping with 'key' and 'model_type', got {describe(raw)}.")
    check_keys(raw, TRACKER_KEYS, where, "tracker")
    model_type = raw.get("model_type")
    if model_type not in ("classification", "regression"):
        raise ConfigError(
            f"{where}: invalid value {model_type!r} for 'model_type' in 'tracker'; "
            "expected 'classification' or 'regression'."
        )
    key = raw.get("key")
    if key is not None and not isinstance(key, str):
        raise ConfigError(f"{where}: 'key' in 'tracker' must be a string, got {describe(key)}.")
    return TrackerConfig(model_type=model_type, key=key)


def parse_compute(raw: Any, where: str) -> ComputeConfig:
    """The ``compute`` section: replicas, CPU, GPU and memory, with the defaults when absent."""
    if raw is None:
        return ComputeConfig()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'compute' must be a mapping, got {describe(raw)}.")
    check_keys(raw, COMPUTE_KEYS, where, "compute")
    ctx = f"{where}: compute"
    min_r = integer(raw, "min_replicas", ctx, 1, minimum=1)
    max_r = integer(raw, "max_replicas", ctx, max(100, min_r), minimum=1)
    init_r = integer(raw, "init_replicas", ctx, None, minimum=1)
    if max_r < min_r:
        raise ConfigError(f"{where}: 'max_replicas' in 'compute' ({max_r}) is below 'min_replicas' ({min_r}).")
    if init_r is not None and not min_r <= init_r <= max_r:
        raise ConfigError(
            f"{where}: invalid value {init_r} for 'init_replicas' in 'compute'; expected between "
            f"min_replicas ({min_r}) and max_replicas ({max_r})."
        )
    target = integer(raw, "target_cpu_utilization", ctx, 80, minimum=1)
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
    gpu = integer(raw, "gpu", ctx, 0, minimum=0)
    inf = integer(raw, "inf", ctx, 0, minimum=0)
    if inf:
        raise ConfigError(
            f"{at_line(raw, 'inf', where)}: 'inf: {inf}' in 'compute' asks for AWS Inferentia chips, which no local "
            "machine has; remove 'inf' (the model runs on CPU, or on a GPU with 'gpu: 1')."
        )
    mem_raw = raw.get("mem")
    mem = None if mem_raw is None else str(mem_raw)
    if mem is not None and (isinstance(mem_raw, bool) or not MEM_RE.match(mem)):
        raise ConfigError(
            f"{where}: invalid value {mem_raw!r} for 'mem' in 'compute'; expected a quantity like '2Gi' or '512Mi'."
        )
    return ComputeConfig(min_r, max_r, init_r, target, cpu, gpu, mem, "target_cpu_utilization" in raw)


def parse_batching(raw: Any, where: str) -> BatchingConfig | None:
    """The ``batching`` section: the batch size, interval and bucket sizes; None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{where}: 'batching' must be a mapping with 'max_batch_size' and 'batch_interval', got {describe(raw)}."
        )
    check_keys(raw, BATCHING_KEYS, where, "batching")
    if "max_batch_size" not in raw:
        raise ConfigError(f"{where}: 'max_batch_size' in 'batching' is required.")
    size = integer(raw, "max_batch_size", f"{where}: batching", 1, minimum=1)
    interval = duration(raw.get("batch_interval", 0.005), "batch_interval", where, "batching")
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


def parse_cuda_options(raw: Any, where: str) -> dict[str, str]:
    """The ``cuda_options`` section as the option strings onnxruntime takes."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'cuda_options' must be a mapping of onnxruntime CUDA provider options.")
    check_keys(raw, CUDA_OPTION_KEYS, where, "cuda_options")
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
