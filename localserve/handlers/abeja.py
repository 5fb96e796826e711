"""ABEJA Platform handlers: ``handler(request, context)`` returning ``{status_code, content_type, content, metadata}``.

ABEJA handlers are never batched: each call gets one request and answers it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from localserve.config import ApiConfig
from localserve.config.options import ApiOptions
from localserve.errors import HandlerLoadError, LocalServeError
from localserve.handlers import Observers, run_stage, truncate
from localserve.handlers.loader import load_attr, positional_count
from localserve.messages.request import Request
from localserve.messages.response import Reply, abeja_reply
from localserve.runtimes import Feed, Model

log = logging.getLogger("localserve")


def inspect_handler(func: Any, handler: str) -> Callable[[Request, dict[str, Any]], Any]:
    """``func``, the object that ``handler`` ("main:handler") names, if ``serve`` can call it as
    ``handler(request, context)``; else HandlerLoadError (``localserve check`` runs this too)."""
    if not callable(func):
        raise HandlerLoadError(f'Handler "{handler}" is a {type(func).__name__}, not a function.')
    count, varargs = positional_count(func)
    if count != 2 and not (varargs and count < 2):
        raise HandlerLoadError(f'Handler "{handler}" must accept 2 parameters (request, context); it accepts {count}.')
    return func  # type: ignore[no-any-return]


class AbejaHandler:
    """``handler(request, context)``: the whole answer in one stage of user code."""

    batches_lists = False
    takes_tensors = False
    model: Model | None = None
    models = None

    def __init__(self, api: ApiConfig, options: ApiOptions, observers: Observers) -> None:
        self.api = api
        self.options = options
        self.observers = observers
        self.func: Callable[[Request, dict[str, Any]], Any] | None = None

    def load(self) -> None:
        """Import the handler function and check that it takes (request, context)."""
        assert self.api.handler is not None
        self.func = inspect_handler(load_attr(self.api.handler, self.options.project), self.api.handler)

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: the handler's name."""
        return {"name": self.api.name, "kind": "abeja", "handler": self.api.handler, "model_format": None}

    def prepare(self, request: Request) -> Reply:
        """Call the handler with the request and the context; the whole answer."""
        assert self.func is not None
        if request.debug:
            log.info(
                "debug: request %s %s, %d bytes, headers %s",
                request.method,
                request.content_type,
                len(request.body),
                [h["key"] for h in request.headers],
            )
        if request.is_multipart:
            _ = request.contents  # a malformed body is a 400 before user code runs
        where = f'Handler "{self.api.handler}"'
        result = run_stage(self.observers.stage, "handler", where, self.func, request, dict(self.api.context))
        reply = abeja_reply(result)
        if request.debug:
            log.info("debug: response %d %s", reply.status, truncate(reply.value))
        return reply

    def infer(self, feed: Feed) -> Any:
        """Not used: an ABEJA handler has no model call of the engine's."""
        raise NotImplementedError("ABEJA handlers have no model call of the engine's")

    def finish(self, request: Request, output: Any) -> Reply:
        """Not used: an ABEJA handler answers in ``prepare``."""
        raise NotImplementedError("ABEJA handlers answer in prepare")

    def handle_batch(self, requests: list[Request]) -> list[Reply | LocalServeError]:
        """Not used: ABEJA handlers are never batched."""
        raise NotImplementedError("ABEJA handlers are never batched")
