"""One adapter per handler kind, all behind the Endpoint protocol, picked by ``ApiConfig.kind``."""

from __future__ import annotations

import importlib
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from localserve.config import ApiConfig
from localserve.config.options import ApiOptions
from localserve.errors import HandlerError, LocalServeError
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.runtimes import Feed, Model
from localserve.runtimes.modelset import ModelSet
from localserve.runtimes.versions import ModelObserver

T = TypeVar("T")

ENDPOINTS = {
    "abeja": "localserve.handlers.abeja:AbejaHandler",
    "request_handler": "localserve.handlers.request_handler:RequestHandlerEndpoint",
    "predictor": "localserve.handlers.predictor:PredictorEndpoint",
}

log = logging.getLogger("localserve")


def no_stage(stage: str, seconds: float) -> None:
    """The stage observer when nothing is measured (metrics off)."""


class Endpoint(Protocol):
    """One API's user code, in stages the engine runs on the API's threads.

    ``prepare`` turns a request into the model's feed (payload decoding, ``pre_inference``,
    coercion), or answers it outright (ABEJA handlers, predictors); the engine then runs
    ``model`` (through the batcher when batching is on) and ``finish`` turns the output into
    the reply (``post_inference``). Every method raises LocalServeError subclasses.
    """

    api: ApiConfig
    model: Model | None  # the model the engine runs between prepare and finish; None when user code calls it
    models: ModelSet | None  # the models and versions a multi-model API serves (Cortex's ``models``), else None
    batches_lists: bool  # with batching on, handle_batch gets the requests as lists (Cortex predictors)
    takes_tensors: bool  # a request's JSON is the model's inputs (a model with no pre_inference)

    def load(self) -> None:
        """Import user code and load the model; runs on the API's worker thread."""

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: kind, model format, inputs and outputs."""

    def prepare(self, request: Request) -> Feed | Reply:
        """The model's feed for ``request``, or the whole answer when no model call follows."""

    def infer(self, feed: Feed) -> Any:
        """One model call, timed (no batching)."""

    def finish(self, request: Request, output: Any) -> Reply:
        """The reply for ``request`` from the model's output."""

    def handle_batch(self, requests: list[Request]) -> list[Reply | LocalServeError]:
        """Several requests in one call of user code (``batches_lists``); one result or error per request."""


@dataclass(frozen=True)
class Observers:
    """Where an endpoint reports what it measures; the defaults measure nothing (metrics off)."""

    stage: Callable[[str, float], None] = no_stage  # stage timings -> metrics
    metrics_client: Any = None  # MetricsClient for predictors
    models: ModelObserver | None = None  # the per-model figures of an API with several models


def create_endpoint(api: ApiConfig, options: ApiOptions, observers: Observers | None = None) -> Endpoint:
    """The endpoint for ``api``'s kind (ABEJA handler, request handler or predictor), not yet loaded."""
    module_name, _, class_name = ENDPOINTS[api.kind].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    endpoint: Endpoint = cls(api, options, observers or Observers())
    return endpoint


def user_error(exc: BaseException, where: str) -> LocalServeError:
    """An exception raised by user code -> a 500 naming where; the traceback is kept for the log."""
    if isinstance(exc, LocalServeError):
        return exc
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return HandlerError(f"{where} raised {type(exc).__name__}: {exc}", details=details)


# What user code may raise on an API's thread: sys.exit() and KeyboardInterrupt too, which there
# can only come from the code itself (signals reach the main thread), so they name it like any error.
USER_ESCAPES = (Exception, SystemExit, KeyboardInterrupt)


def run_stage(observe: Callable[[str, float], None], stage: str, where: str, fn: Callable[..., T], *args: Any) -> T:
    """Run one stage of user code: timed for the metrics, its exception turned into a 500 naming ``where``."""
    start = time.perf_counter()
    try:
        return fn(*args)
    except USER_ESCAPES as exc:
        error = user_error(exc, where)
    finally:
        observe(stage, time.perf_counter() - start)
    # Raised outside the except block: the user's exception (its frames hold the request) is not
    # chained to ours, whose details already carry its traceback as text.
    raise error


class _Elided:
    """What ``truncate`` shows of a container past its depth: ``[...]`` or ``{...}``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def truncate(value: Any, *, items: int = 10, chars: int = 500, depth: int = 8) -> str:
    """Cortex's debug truncation: first 10 items of a sequence or mapping, strings cut at 500 characters; containers
    shown ``depth`` levels deep, so that a value nested a thousand times (the client's JSON, under ``?debug=true``),
    or one that holds itself, is shown cut rather than failing the request."""
    import numpy as np

    def cut(v: Any, level: int) -> Any:
        if isinstance(v, np.ndarray):
            v = v.tolist() if v.ndim <= depth - level else _Elided(f"<{v.dtype} array of shape {list(v.shape)}>")
        if isinstance(v, str):
            return v if len(v) <= chars else v[:chars] + "..."
        if isinstance(v, bytes):
            return v if len(v) <= chars else v[:chars] + b"..."
        if isinstance(v, dict):
            if level >= depth:
                return _Elided("{...}")
            keys = list(v)[:items]
            out = {k: cut(v[k], level + 1) for k in keys}
            if len(v) > items:
                out["..."] = f"{len(v) - items} more"
            return out
        if isinstance(v, list | tuple):
            if level >= depth:
                return _Elided("[...]")
            head = [cut(x, level + 1) for x in v[:items]]
            return [*head, f"... {len(v) - items} more"] if len(v) > items else head
        return v

    text = repr(cut(value, 0))
    return text if len(text) <= chars * 4 else text[: chars * 4] + "..."
