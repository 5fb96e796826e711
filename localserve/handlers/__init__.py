"""One adapter per handler kind, all behind the Endpoint protocol, picked by ``ApiConfig.kind``."""

from __future__ import annotations

import importlib
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from localserve.config import ApiConfig
from localserve.errors import HandlerError, LocalServeError
from localserve.request import Request
from localserve.response import Reply
from localserve.runtimes import LoadOptions

ENDPOINTS = {
    "abeja": "localserve.handlers.abeja:AbejaHandler",
    "request_handler": "localserve.handlers.request_handler:RequestHandlerEndpoint",
    "predictor": "localserve.handlers.predictor:PredictorEndpoint",
}

log = logging.getLogger("localserve")


def _no_stage(stage: str, seconds: float) -> None:
    pass


@dataclass
class EndpointOptions:
    """What the server hands every endpoint besides its ApiConfig."""

    project: Path
    load: LoadOptions = field(default_factory=LoadOptions)
    observe: Callable[[str, float], None] = _no_stage  # stage timings -> metrics
    metrics_client: Any = None  # MetricsClient for predictors


class Endpoint(Protocol):
    api: ApiConfig

    def load(self) -> None:
        """Import user code and load the model; runs on the API's worker thread."""

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: kind, model format, inputs and outputs."""

    def handle(self, request: Request) -> Reply:
        """One request; runs on a worker thread. Raises LocalServeError subclasses."""

    def handle_batch(self, requests: list[Request]) -> list[Reply | LocalServeError]:
        """Several requests merged (dynamic batching); one result or error per request."""


def create_endpoint(api: ApiConfig, options: EndpointOptions) -> Endpoint:
    module_name, _, class_name = ENDPOINTS[api.kind].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    endpoint: Endpoint = cls(api, options)
    return endpoint


def user_error(exc: BaseException, where: str) -> HandlerError:
    """An exception raised by user code -> a 500 naming where; the traceback is kept for the log."""
    if isinstance(exc, LocalServeError):
        return exc  # type: ignore[return-value]
    error = HandlerError(f"{where} raised {type(exc).__name__}: {exc}")
    error.details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return error


def truncate(value: Any, *, items: int = 10, chars: int = 500) -> str:
    """Cortex's debug truncation: first 10 items of a sequence or mapping, strings cut at 500 characters."""
    import numpy as np

    def cut(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            v = v.tolist()
        if isinstance(v, str):
            return v if len(v) <= chars else v[:chars] + "..."
        if isinstance(v, bytes):
            return v if len(v) <= chars else v[:chars] + b"..."
        if isinstance(v, dict):
            keys = list(v)[:items]
            out = {k: cut(v[k]) for k in keys}
            if len(v) > items:
                out["..."] = f"{len(v) - items} more"
            return out
        if isinstance(v, list | tuple):
            head = [cut(x) for x in v[:items]]
            return [*head, f"... {len(v) - items} more"] if len(v) > items else head
        return v

    text = repr(cut(value))
    return text if len(text) <= chars * 4 else text[: chars * 4] + "..."
