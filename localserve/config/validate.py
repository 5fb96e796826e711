"""Validation of one ``- kind: api`` mapping into an ApiConfig: its name and kind, what it serves (an ABEJA handler, a
predictor, or a model with a request handler) and the model's format; the sections are parsed in ``sections`` and
``predictor``, the later Cortex generation rewritten in ``realtime``. Every problem is a ConfigError naming the file,
the API, the key, the bad value and what was expected.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from localserve.config.predictor import parse_predictor
from localserve.config.realtime import realtime_entry, realtime_fields
from localserve.config.schema import (
    API_KEYS,
    ASYNC_KEYS,
    HANDLER_RE,
    KINDS,
    NAME_RE,
    REALTIME_KEYS,
    RESERVED_NAMES,
    ApiConfig,
    PredictorConfig,
)
from localserve.config.sections import parse_batching, parse_compute, parse_cuda_options, parse_tracker
from localserve.config.values import at_line, check_keys, describe, duration, integer, opt_mapping, opt_str, suggest
from localserve.errors import ConfigError


def parse_api(entry: Any, source: str, index: int = 0) -> ApiConfig:
    """Validate one ``- kind: api`` mapping."""
    name, where = api_name(entry, source, index)
    kind = entry.get("kind", "api")
    if kind not in KINDS:
        kinds = (*KINDS, "TrafficSplitter")  # a TrafficSplitter is parsed by config.splitter
        raise ConfigError(
            f"{where}: invalid value {kind!r} for 'kind'; expected one of {', '.join(map(repr, kinds))}."
            + suggest(str(kind), kinds)
        )
    if kind != "api":
        return _parse_realtime(entry, name, kind, where)
    _refuse_realtime_keys(entry, where)
    check_keys(entry, API_KEYS, where, None)

    handler = opt_str(entry, "handler", where)
    if handler is not None and not HANDLER_RE.match(handler):
        raise ConfigError(
            f"{where}: invalid value {handler!r} for 'handler'; it must look like \"<module>:<function>\", "
            'e.g. "main:handler".'
        )
    request_handler = opt_str(entry, "request_handler", where)
    model = opt_str(entry, "model", where)
    predictor = parse_predictor(entry.get("predictor"), where)
    model_format = opt_str(entry, "model_format", where)
    if model_format is not None and model_format not in ("onnx", "tensorflow"):
        raise ConfigError(
            f"{where}: invalid value {model_format!r} for 'model_format'; expected 'onnx' or 'tensorflow'."
        )
    _check_served(entry, handler, request_handler, model, predictor, where)
    model_format = _model_format(entry, model, predictor, model_format, where)

    tf_signature_key = opt_str(entry, "tf_signature_key", where)
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
        tracker=parse_tracker(entry.get("tracker"), where),
        compute=parse_compute(entry.get("compute"), where),
        metadata=opt_mapping(entry, "metadata", where),
        context=opt_mapping(entry, "context", where),
        batching=parse_batching(entry.get("batching"), where),
        threads_per_process=integer(entry, "threads_per_process", where, 1, minimum=1),
        max_queue=integer(entry, "max_queue", where, 100, minimum=1),
        timeout=duration(entry.get("timeout", 60.0), "timeout", where, positive=True),
        model_threads=integer(entry, "model_threads", where, None, minimum=1),
        cuda_options=parse_cuda_options(entry.get("cuda_options"), where),
    )


def infer_model_format(location: str) -> str | None:
    """The rule of Cortex 0.8-0.11 docs, *APIs* on the path (a URL's query and fragment left out): '.onnx' -> 'onnx'; a folder
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


def api_name(entry: Any, source: str, index: int) -> tuple[str, str]:
    """The API's name, and the place errors name from then on (``<file>: api '<name>'``)."""
    where = f"{source}: api #{index + 1}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with 'kind: api' and 'name', got {describe(entry)}.")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: 'name' is required and must be a string, got {describe(name)}.")
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
    return name, where


def _refuse_realtime_keys(entry: dict[str, Any], where: str) -> None:
    """Keys of the Cortex 0.25+ generation in a ``kind: api`` entry, refused with the way to write them."""
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


def _check_served(
    entry: dict[str, Any],
    handler: str | None,
    request_handler: str | None,
    model: str | None,
    predictor: PredictorConfig | None,
    where: str,
) -> None:
    """Exactly one thing to serve: an ABEJA handler, a predictor, or a model with an optional request handler."""
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
        if predictor.type in ("onnx", "tensorflow") and not (predictor.model_path or model or predictor.models):
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


def _model_format(
    entry: dict[str, Any], model: str | None, predictor: PredictorConfig | None, model_format: str | None, where: str
) -> str | None:
    """The model's format: as set, else the predictor's type, else told by the model's name (Cortex 0.8-0.11 docs, *APIs*)."""
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
                f"{at_line(entry, key, where)}: cannot tell the format of the model {location!r} from its name "
                "('.onnx' is ONNX; a folder or a '.zip' is a TensorFlow SavedModel); set 'model_format: onnx' "
                "or 'model_format: tensorflow'."
            )
    elif predictor is not None and predictor.models is not None and predictor.type in ("onnx", "tensorflow"):
        model_format = predictor.type
    elif model_format is not None:
        raise ConfigError(f"{where}: 'model_format' is set but there is no 'model'.")
    return model_format


def _parse_realtime(entry: dict[str, Any], name: str, kind: str, where: str) -> ApiConfig:
    """A ``kind: RealtimeAPI / AsyncAPI`` entry: its ``kind: api`` rewrite validated, then the fields only it has."""
    flat = realtime_entry(entry, name, kind, where)
    api = parse_api({"kind": "api", "name": name, **flat}, where.split(": api ")[0])
    return replace(api, **realtime_fields(entry, kind, where))
