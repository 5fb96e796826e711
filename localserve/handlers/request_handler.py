"""Cortex request handlers: ``pre_inference`` -> model -> ``post_inference`` (both optional).

Two forms, told apart by their parameter count: ``pre_inference(sample, metadata)`` with the model's signature as
``metadata`` (Cortex 0.8-0.9 docs, *Request handlers*), and ``pre_inference(sample, signature, metadata)`` with the API
config's ``metadata`` (Cortex 0.10-0.11 docs). Without a request handler the API serves the raw model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from localserve.config import ApiConfig
from localserve.config.options import ApiOptions
from localserve.errors import HandlerError, HandlerLoadError, LocalServeError
from localserve.handlers import Observers, run_stage, truncate
from localserve.handlers.loader import load_file, positional_count
from localserve.messages.payload import about_payload, decode_json_sample
from localserve.messages.request import Request
from localserve.messages.response import Reply, cortex_reply
from localserve.runtimes import Feed, Model, load_model
from localserve.runtimes.sources import redact, resolve_model

log = logging.getLogger("localserve")


def load_api_model(api: ApiConfig, options: ApiOptions) -> Model:
    """Fetch the API's model (local, .zip, s3://, https://) and open it with its runtime."""
    location = api.model_location
    assert location is not None and api.model_format is not None
    path = resolve_model(location, options.project, cache_root=options.cache_dir, s3_endpoint=options.s3_endpoint)
    start = time.perf_counter()
    model = load_model(api.model_format, path, options)
    log.info(
        "api %r: %s model %s loaded in %.3f s on %s",
        api.name,
        api.model_format,
        redact(location),
        time.perf_counter() - start,
        model.device,
    )
    return model


def inspect_hooks(module: Any, path: str) -> tuple[tuple[Callable[..., Any] | None, bool], ...]:
    """``pre_inference`` and ``post_inference`` of the request handler ``module`` (file ``path``), each as
    (function or None, takes the 3-argument form); HandlerLoadError for what ``serve`` refuses (and ``check``)."""
    return _hook(module, "pre_inference", path), _hook(module, "post_inference", path)


def _hook(module: Any, name: str, path: str) -> tuple[Callable[..., Any] | None, bool]:
    """(function, takes the 3-argument form) for pre_inference / post_inference."""
    func = getattr(module, name, None)
    if func is None:
        return None, False
    if not callable(func):
        raise HandlerLoadError(f"{path}: {name} is a {type(func).__name__}, not a function.")
    count, varargs = positional_count(func)
    if count not in (2, 3) and not varargs:
        first = "sample" if name == "pre_inference" else "prediction"
        raise HandlerLoadError(
            f"{path}: {name} must take ({first}, metadata) or ({first}, signature, metadata); it takes {count} "
            "parameter(s)."
        )
    return func, count == 3 or (varargs and count < 2)


class RequestHandlerEndpoint:
    """A model with optional ``pre_inference`` / ``post_inference`` around it (Cortex 0.8-0.11 docs, *Request handlers*)."""

    batches_lists = False
    models = None

    def __init__(self, api: ApiConfig, options: ApiOptions, observers: Observers) -> None:
        self.api = api
        self.options = options
        self.observers = observers
        self.model: Model | None = None
        self.pre: Callable[..., Any] | None = None
        self.post: Callable[..., Any] | None = None
        self.pre_three = self.post_three = False

    @property
    def takes_tensors(self) -> bool:
        """Without ``pre_inference``, a request's JSON is the model's inputs."""
        return self.pre is None

    def load(self) -> None:
        """Import ``pre_inference`` / ``post_inference`` and load the model."""
        if self.api.request_handler:
            module = load_file(
                self.api.request_handler, self.options.project, api=self.api.name, what="request_handler"
            )
            (self.pre, self.pre_three), (self.post, self.post_three) = inspect_hooks(module, self.api.request_handler)
        self.model = load_api_model(self.api, self.options)
        require = getattr(self.model, "require_signature", None)
        if require is not None:  # the model runs on every request: it needs its one signature
            require()

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: the request handler's file and the model's signature."""
        assert self.model is not None
        return {
            "name": self.api.name,
            "kind": "request_handler",
            "request_handler": self.api.request_handler,
            "model_format": self.api.model_format,
            **self.model.describe(),
        }

    # -- stages ---------------------------------------------------------------------------------
    def prepare(self, request: Request) -> Feed:
        """Decode the payload, run ``pre_inference`` and coerce its return to the model's feed."""
        assert self.model is not None
        sample = decode_json_sample(request.content_type, request.body, self.api.name)
        if request.debug:
            log.info("debug: raw sample: %s", truncate(sample))
        value = sample
        if self.pre is not None:
            args = (sample, self.model.input_signature) + ((self.api.metadata,) if self.pre_three else ())
            try:
                value = run_stage(self.observers.stage, "pre_inference", "pre_inference", self.pre, *args)
            except HandlerError as exc:  # the user's own error: say what the sample was, not only what failed
                message = about_payload(exc.message, "pre_inference", request.content_type, sample, "sample")
                raise HandlerError(message, details=exc.details) from None
            if value is None:  # the handler's fault (the stub of Cortex 0.8-0.9's docs has no return), not the client's
                raise HandlerError(
                    f"pre_inference in {self.api.request_handler} returned None; it must return the model's input: "
                    "a dict of input name to value, or the value of the model's only input."
                )
            if request.debug:
                log.info("debug: after pre_inference: %s", truncate(value))
        return self.model.coerce(value)

    def infer(self, feed: Feed) -> Any:
        """Run the model once on ``feed``, timed as the ``inference`` stage."""
        assert self.model is not None
        start = time.perf_counter()
        try:
            return self.model.run(feed)
        finally:
            self.observers.stage("inference", time.perf_counter() - start)

    def finish(self, request: Request, output: Any) -> Reply:
        """Run ``post_inference`` on the model's output and make the reply."""
        assert self.model is not None
        if request.debug:
            log.info("debug: model output: %s", truncate(output))
        value = output
        if self.post is not None:
            args = (output, self.model.output_signature) + ((self.api.metadata,) if self.post_three else ())
            value = run_stage(self.observers.stage, "post_inference", "post_inference", self.post, *args)
            if request.debug:
                log.info("debug: after post_inference: %s", truncate(value))
        return cortex_reply(value, request.header(b"accept"))

    def handle_batch(self, requests: list[Request]) -> list[Reply | LocalServeError]:
        """Not used: the engine's batcher batches the model calls of request handlers."""
        raise NotImplementedError("request handlers are batched by the engine's batcher")
