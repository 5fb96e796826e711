"""The config file reference: every key of every section, from ``localserve.config``'s schema.

The key lists are the ones the validator checks (``check_keys``); a key added there without a line in
``KEYS`` below fails the build, so the page always lists exactly what a config may say. Defaults come
from the frozen dataclasses the keys become, where a field has the key's name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from localserve.config import schema
from localserve.config.models import MODEL_PATH_KEYS
from localserve.config.splitter import SPLIT_KEYS, SPLITTER_KEYS

OLD, NEW, OURS = "Cortex 0.8–0.11", "Cortex 0.25–0.33", "localserve"

# section -> key -> (type, default or "", where the key comes from, what it does)
KEYS: dict[str, dict[str, tuple[str, str, str, str]]] = {
    "api": {
        "kind": ("string", "`api`", OLD, "`api` (this table), `RealtimeAPI`, `AsyncAPI` or `TrafficSplitter`."),
        "name": (
            "string",
            "",
            OLD,
            "The API's name: its route `/<name>` and its host `api-<name>`. Lower-case letters, digits and `-`; not a name localserve's own routes use (`docs`, `metrics`, ...).",
        ),
        "model": (
            "string",
            "",
            OLD,
            "A `.onnx` file, a SavedModel folder or `.zip`, `s3://bucket/key` or `https://...` (`#sha256=<hex>` checks it).",
        ),
        "model_format": (
            "`onnx` \\| `tensorflow`",
            "from the path",
            OLD,
            "`.onnx` is onnx; `.zip`, a folder or a trailing `/` is tensorflow; any other suffix needs this key.",
        ),
        "request_handler": (
            "path",
            "",
            OLD,
            "A file with `pre_inference` and/or `post_inference`, relative to the project.",
        ),
        "handler": ("`module:function`", "", OURS, "An ABEJA handler as one API of the config."),
        "predictor": ("mapping", "", NEW, "A predictor class (see `predictor` below) inside a `kind: api` entry."),
        "tf_signature_key": (
            "string",
            "",
            OLD,
            "The SavedModel signature to run (required when the model has several and none is `serving_default` or `predict`).",
        ),
        "tracker": ("mapping", "", OLD, "What to count in each 2xx answer (see `tracker`)."),
        "compute": ("mapping", "", OLD, "Replicas, CPU, GPU and memory (see `compute`)."),
        "metadata": (
            "mapping",
            "`{}`",
            OLD,
            "Handed to `pre_inference(sample, signature, metadata)` and `post_inference` as the third argument.",
        ),
        "context": ("mapping", "`{}`", OURS, "An ABEJA handler's `context` (`--context` for a handler given by flag)."),
        "batching": (
            "mapping",
            "",
            OURS,
            "Server-side batching (see `batching`); Cortex 0.25–0.33 calls it `server_side_batching`.",
        ),
        "threads_per_process": (
            "integer, 1–1,024",
            "",
            NEW,
            "Worker threads of the API per replica: 1 runs user code one request at a time.",
        ),
        "max_queue": ("integer ≥ 1", "", OURS, "Requests queued per replica before a 503 with `Retry-After`."),
        "timeout": ("duration", "", OURS, "Seconds (or `500ms`, `2m`) before a 504; work not started is dropped."),
        "model_threads": ("integer, 1–1,024", "cores / replicas", OURS, "Intra-op threads of the model's runtime."),
        "cuda_options": ("mapping", "`{}`", OURS, "onnxruntime CUDA provider options (see `cuda_options`)."),
    },
    "realtime": {
        "predictor": ("mapping", "", NEW, "The predictor: its type, file, config and models (see `predictor`)."),
        "autoscaling": ("mapping", "", NEW, "Replicas and concurrency (see `autoscaling`)."),
        "networking": ("mapping", "", NEW, "`endpoint`, `api_gateway`: accepted, used by the exported manifests only."),
        "update_strategy": ("mapping", "", NEW, "`max_surge`, `max_unavailable`: accepted, without local effect."),
        "async_store": (
            "URL",
            "SQLite in the cache folder",
            OURS,
            "`kind: AsyncAPI`: where jobs live, `sqlite:///PATH` or `redis://HOST:PORT/DB` (`--async-store` wins).",
        ),
        "async_retention": ("duration", "`7d`", OURS, "`kind: AsyncAPI`: how long a finished job's result is kept."),
    },
    "predictor": {
        "type": (
            "`python` \\| `onnx` \\| `tensorflow`",
            "",
            NEW,
            "The class the file defines: `PythonPredictor`, `ONNXPredictor` or `TensorFlowPredictor`.",
        ),
        "path": ("path", "", NEW, "The predictor's file, relative to the project."),
        "model_path": (
            "string",
            "",
            NEW,
            "The model of an onnx or tensorflow predictor (Cortex 0.18–0.24; later `models: {path}`).",
        ),
        "config": ("mapping", "`{}`", NEW, "Passed to `__init__(self, config, ...)`."),
        "models": (
            "mapping",
            "",
            NEW,
            "One model (`path`) or several (`paths`, `dir`) with their cache (see `models`).",
        ),
        "multi_model_reloading": (
            "mapping",
            "",
            NEW,
            "A python predictor's models, loaded by its `load_model` (the keys of `models`).",
        ),
        "signature_key": ("string", "", NEW, "The default SavedModel signature (`tf_signature_key`)."),
        "server_side_batching": (
            "mapping",
            "",
            NEW,
            "`max_batch_size`, `batch_interval`: `predict` receives lists (see `batching`).",
        ),
        "processes_per_replica": ("integer ≥ 1", "`1`", NEW, "Processes per replica: `serve` runs replicas × this."),
        "threads_per_process": (
            "integer, 1–1,024",
            "`1`",
            NEW,
            "Worker threads per process (the API's `threads_per_process`).",
        ),
        "python_path": ("path", "", NEW, "A project folder put on `sys.path` before the predictor loads."),
        "env": ("mapping", "`{}`", NEW, "Environment variables of the API's process."),
        "log_level": (
            "`debug` \\| `info` \\| `warning` \\| `error`",
            "`info`",
            NEW,
            "The level of the user logger (the lowest across APIs).",
        ),
        "image": (
            "string",
            "",
            NEW,
            "The platform's image: logged, not pulled; the current environment runs the code.",
        ),
        "tensorflow_serving_image": ("string", "", NEW, "Logged, not pulled."),
        "shm_size": ("quantity", "", NEW, "Accepted, without local effect."),
    },
    "models": {
        "path": ("string", "", NEW, "One model (a file, a folder of version folders, `s3://`, `https://`)."),
        "paths": ("list of `{name, path, signature_key}`", "", NEW, "Several models, each by name."),
        "dir": (
            "string",
            "",
            NEW,
            "A folder whose every top-level folder is a model, its whole-number folders the versions.",
        ),
        "signature_key": ("string", "", NEW, "The SavedModel signature of every model that names none."),
        "cache_size": (
            "integer ≥ 1",
            "every model in memory",
            NEW,
            "Models kept in memory; the least recently used leaves (needs `disk_cache_size`).",
        ),
        "disk_cache_size": ("integer ≥ 1", "every copy kept", NEW, "Remote models' downloaded copies kept on disk."),
    },
    "paths": {
        "name": ("string", "", NEW, "The model's name (`model_name` in `onnx_client.predict`)."),
        "path": ("string", "", NEW, "Where the model is."),
        "signature_key": ("string", "", NEW, "This model's SavedModel signature."),
    },
    "batching": {
        "max_batch_size": ("integer, 1–4,096", "", NEW, "The largest batch a model call runs."),
        "batch_interval": (
            "duration",
            "",
            NEW,
            "The longest a batch waits to fill, only while more requests are on their way (`5ms`).",
        ),
        "batch_sizes": (
            "list of integers",
            "powers of two up to `max_batch_size`, and it",
            OURS,
            "The sizes a model sees; a batch is padded to the next one.",
        ),
    },
    "compute": {
        "min_replicas": ("integer, 1–1,000", "", OLD, "Replicas at least (the HPA's minimum once exported)."),
        "max_replicas": ("integer, 1–1,000", "", OLD, "Replicas at most."),
        "init_replicas": ("integer", "`min_replicas`", OLD, "Replicas at start: the processes of `serve`."),
        "target_cpu_utilization": ("percentage, 1–100", "", OLD, "The HPA's CPU target once exported."),
        "cpu": ("cores (`1`, `0.5`, `200m`)", "", OLD, "The CPU request of each pod once exported."),
        "gpu": (
            "integer ≥ 0",
            "",
            OLD,
            "GPUs per replica: ONNX on the CUDA provider, TensorFlow on the GPU; none usable stops the start unless `--allow-cpu-fallback`.",
        ),
        "mem": ("quantity (`2Gi`)", "", OLD, "The memory request and limit of each pod once exported."),
        "inf": ("integer", "`0`", OLD, "AWS Inferentia chips: refused above 0 (no local machine has one)."),
    },
    "autoscaling": {
        "min_replicas": ("integer, 1–1,000", "`1`", NEW, "As `compute.min_replicas`."),
        "max_replicas": ("integer, 1–1,000", "`100`", NEW, "As `compute.max_replicas`."),
        "init_replicas": ("integer", "`min_replicas`", NEW, "As `compute.init_replicas`."),
        "target_replica_concurrency": (
            "number",
            "`processes_per_replica` × `threads_per_process`",
            NEW,
            "Requests in flight per replica that exported scalers aim at (KEDA, a GPU API's HPA).",
        ),
        "max_replica_concurrency": ("integer", "", NEW, "Becomes `max_queue` unless that is set."),
        "window": ("duration", "", NEW, "Accepted, without local effect."),
        "downscale_stabilization_period": ("duration", "", NEW, "Accepted, without local effect."),
        "upscale_stabilization_period": ("duration", "", NEW, "Accepted, without local effect."),
        "max_downscale_factor": ("number", "", NEW, "Accepted, without local effect."),
        "max_upscale_factor": ("number", "", NEW, "Accepted, without local effect."),
        "downscale_tolerance": ("number", "", NEW, "Accepted, without local effect."),
        "upscale_tolerance": ("number", "", NEW, "Accepted, without local effect."),
    },
    "tracker": {
        "key": ("string", "", OLD, "The key of the JSON answer to track (without it, the whole answer)."),
        "model_type": (
            "`classification` \\| `regression`",
            "",
            OLD,
            "Count each class, or keep min, max, mean and a histogram of numbers.",
        ),
    },
    "cuda_options": {
        key: ("string", "onnxruntime's", OURS, f"onnxruntime's CUDA provider option `{key}`.")
        for key in schema.CUDA_OPTION_KEYS
    },
    "networking": {
        "endpoint": ("string", "", NEW, "The exported route; locally every API answers at its name."),
        "api_gateway": ("`public` \\| `none`", "", NEW, "Accepted, without local effect."),
    },
    "update_strategy": {
        "max_surge": ("quantity", "", NEW, "Accepted, without local effect."),
        "max_unavailable": ("quantity", "", NEW, "Accepted, without local effect."),
    },
    "splitter": {
        "kind": ("string", "", NEW, "`TrafficSplitter`."),
        "name": ("string", "", NEW, "The splitter's route `/<name>`, unique among APIs and splitters."),
        "apis": ("list of `{name, weight, shadow}`", "", NEW, "The APIs it sends requests to (see `apis`)."),
        "networking": ("mapping", "", NEW, "`endpoint`, `api_gateway`: used by the exported VirtualService only."),
    },
    "apis": {
        "name": ("string", "", NEW, "An API of the same config, of kind `api` or `RealtimeAPI`."),
        "weight": (
            "integer, 0–100",
            "",
            NEW,
            "Percent of the requests; the weights of the APIs that are not the shadow add up to 100. A shadow's weight is the share of requests copied to it.",
        ),
        "shadow": (
            "boolean",
            "`false`",
            NEW,
            "Gets a copy of `weight` percent of the requests; its answer is dropped. At most one.",
        ),
    },
}

SECTIONS: list[tuple[str, str, tuple[str, ...], type | None, str]] = [
    (
        "api",
        "`- kind: api` (an API entry)",
        schema.API_KEYS,
        schema.ApiConfig,
        "Cortex 0.8–0.11's form, and localserve's (an ABEJA handler is one such entry).",
    ),
    (
        "realtime",
        "`- kind: RealtimeAPI` / `- kind: AsyncAPI`",
        schema.REALTIME_KEYS,
        schema.ApiConfig,
        "Cortex 0.25–0.33's form. It takes the keys of `kind: api` shared below, and these; keys of one form in an entry of the other are errors that say where the key belongs.",
    ),
    ("predictor", "`predictor`", schema.PREDICTOR_KEYS, schema.PredictorConfig, ""),
    (
        "models",
        "`predictor.models` / `predictor.multi_model_reloading`",
        schema.MODELS_KEYS,
        schema.ModelsConfig,
        "Exactly one of `path`, `paths`, `dir`. Caching needs both `cache_size` and `disk_cache_size`, and `processes_per_replica: 1`.",
    ),
    ("paths", "`predictor.models.paths[]`", MODEL_PATH_KEYS, schema.ModelPath, ""),
    (
        "batching",
        "`batching` / `predictor.server_side_batching`",
        schema.BATCHING_KEYS,
        schema.BatchingConfig,
        "Not on an ABEJA handler or an AsyncAPI. For a python predictor `max_batch_size` must equal `threads_per_process`.",
    ),
    ("compute", "`compute`", schema.COMPUTE_KEYS, schema.ComputeConfig, ""),
    ("autoscaling", "`autoscaling`", schema.AUTOSCALING_KEYS, None, ""),
    (
        "tracker",
        "`tracker`",
        schema.TRACKER_KEYS,
        schema.TrackerConfig,
        "After `post_inference`, 2xx answers only; a value of the wrong type is a warning, never a failed request.",
    ),
    (
        "cuda_options",
        "`cuda_options`",
        schema.CUDA_OPTION_KEYS,
        None,
        "Values are strings, passed to onnxruntime's CUDA execution provider as given.",
    ),
    ("networking", "`networking`", schema.NETWORKING_KEYS, None, ""),
    ("update_strategy", "`update_strategy`", schema.UPDATE_STRATEGY_KEYS, None, ""),
    ("splitter", "`- kind: TrafficSplitter`", SPLITTER_KEYS, None, ""),
    ("apis", "`apis[]` of a TrafficSplitter", SPLIT_KEYS, None, ""),
]

INTRO = """# Config file

A project's config is `localserve.yaml` (or `.yml`), else `cortex.yaml` (or `.yml`): a list of entries,
each an API or a TrafficSplitter. Both Cortex generations are understood, mixed in one file. Every key is
validated at start (and by `localserve check`); a mistake names the file, the line, the API, the key, the
bad value and what is expected, with the nearest valid key for a typo:

```text
cortex.yaml: api 'iris': unknown key 'max_batchsize' in 'batching'. Did you mean 'max_batch_size'?
```

Generated from the schema the validator uses. *From*: the platform generation a key comes from
(Cortex 0.8–0.11, the `kind: api` form; Cortex 0.25–0.33, `RealtimeAPI` / `AsyncAPI`), or localserve's own.
A top-level key (or its CLI flag) wins over the `predictor` key it maps from. Durations are a number of
seconds or a number with `us`, `ms`, `s`, `m`, `h` or `d`.
"""


def _default(cls: type | None, key: str, written: str) -> str:
    if written or cls is None:
        return written
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name == key and f.default is not dataclasses.MISSING and f.default is not None:
            value: Any = f.default
            return f"`{str(value).lower() if isinstance(value, bool) else value}`"
    return ""


def render() -> str:
    """The page; raises when the schema has a key this module does not describe (or the reverse)."""
    out = [INTRO]
    for section, title, keys, cls, note in SECTIONS:
        docs = KEYS[section]
        listed = [k for k in keys if section != "realtime" or k not in schema.API_KEYS]
        missing = [k for k in listed if k not in docs]
        if missing:
            raise RuntimeError(f"docs/_generate/config_page.py: keys of {title} without a description: {missing}")
        out += [f"## {title}", "", note, "", "| key | type | default | from | what it does |", "|---|---|---|---|---|"]
        for key in listed:
            kind, default, origin, text = docs[key]
            out.append(f"| `{key}` | {kind} | {_default(cls, key, default)} | {origin} | {text} |")
        if section == "realtime":
            shared = ", ".join(f"`{k}`" for k in keys if k in schema.API_KEYS)
            out += ["", f"Shared with `kind: api`: {shared}."]
        out.append("")
    return "\n".join(out)
