"""The Open Inference Protocol's REST routes: a second front door onto the same engine as the native routes.

``POST /v2/models/{m}/infer`` is one ``Engine.submit``, as a native request is (admission, deadline, queue, threads,
batcher, records). It is decoded into the model's feed and its outputs encoded on the API's threads (its own
``Stages``), so V2 and native requests share batches. Errors are ``{"error": "..."}`` (``protocols.http.render_error``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.routing import BaseRoute, Route

from localserve import __version__
from localserve.config.options import ServeOptions
from localserve.engine.api import ApiRuntime
from localserve.engine.core import Engine
from localserve.errors import LocalServeError, NotFound
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.metrics import Metrics
from localserve.protocols.bodies import decode_content
from localserve.protocols.door import HttpWire
from localserve.protocols.http import (
    Receive,
    Scope,
    Send,
    request_id_of,
    send_reply,
)
from localserve.protocols.v2.binary import HEADER_LENGTH, parse_header_length
from localserve.protocols.v2.codec import Decoded, decode_request, encode_response
from localserve.protocols.v2.models import V2Models
from localserve.protocols.v2.multi import routed
from localserve.protocols.v2.stats import every_model_stats, model_stats
from localserve.protocols.v2.tensors import Requested
from localserve.protocols.v2.view import VERSION, V2Model

INFER_ROUTE = "/v2/models/{name}/infer"  # the same as localserve.server.pages.V2_INFER_ROUTE
JSON = b"application/json"
EXTENSIONS = ("binary_tensor_data", "model_configuration", "statistics")
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


def infer_params(path: str) -> dict[str, str] | None:
    """The path parameters of ``/v2/models/{name}[/versions/{version}]/infer``; None for any other path."""
    if not (path.startswith("/v2/models/") and path.endswith("/infer")):
        return None
    parts = path[len("/v2/models/") : -len("/infer")].split("/")
    if len(parts) == 1 and parts[0]:
        return {"name": parts[0]}
    if len(parts) == 3 and parts[0] and parts[1] == "versions" and parts[2]:
        return {"name": parts[0], "version": parts[2]}
    return None


class _Asgi:
    """A raw ASGI endpoint for a Starlette Route (an object, so Starlette does not wrap it in a Request)."""

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handler(scope, receive, send)


class V2Routes:
    """The V2 routes of one replica, onto its engine."""

    def __init__(self, engine: Engine, options: ServeOptions) -> None:
        self.engine = engine
        self.wire = HttpWire.of(options, v2=True)
        self.models = V2Models(engine.apis)

    def routes(self) -> list[BaseRoute]:
        """The Starlette routes of every /v2 path (infer also has a fast path in ``App.__call__``)."""
        model = "/v2/models/{name}"
        version = "/v2/models/{name}/versions/{version}"
        gets: list[tuple[str, Handler]] = [
            ("/v2", self.server),
            ("/v2/", self.server),
            ("/v2/models/stats", self.all_stats),  # before the model routes: "stats" is no model name
            ("/v2/models", self.index),
            (model, self.metadata),
            (version, self.metadata),
            (f"{model}/ready", self.ready),
            (f"{version}/ready", self.ready),
            (f"{model}/config", self.config),
            (f"{version}/config", self.config),
            (f"{model}/stats", self.stats),
            (f"{version}/stats", self.stats),
        ]
        routes: list[BaseRoute] = [Route(path, _Asgi(fn), methods=["GET"]) for path, fn in gets]
        routes += [Route(path, _Asgi(self.infer), methods=["POST"]) for path in (INFER_ROUTE, f"{version}/infer")]
        routes.append(Route("/v2/repository/index", _Asgi(self.index), methods=["POST"]))
        return routes

    @property
    def extensions(self) -> list[str]:
        """The protocol extensions served (statistics only while metrics are on)."""
        return [e for e in EXTENSIONS if e != "statistics" or self.engine.metrics is not None]

    # -- models -------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The APIs that are V2 models (loaded or not)."""
        return self.models.names()

    async def find(self, scope: Scope) -> tuple[ApiRuntime, V2Model]:
        """The API and its V2 model named in the path; NotFound (404) or NotReady (503) otherwise."""
        params = scope["path_params"]
        return await self.models.locate(params["name"], params.get("version"))

    # -- GET routes -----------------------------------------------------------------------------
    async def server(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2: the server metadata."""
        await _send_json(send, 200, {"name": "localserve", "version": __version__, "extensions": self.extensions})

    async def metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models/{m}[/versions/{v}]: the model metadata."""
        await self._get(scope, send, lambda rt, model: model.metadata())

    async def config(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models/{m}/config: the model configuration (what perf_analyzer reads)."""
        await self._get(scope, send, lambda rt, model: model.config())

    async def ready(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models/{m}/ready: 200 once the model is loaded, else the error (404 or 503)."""
        try:
            await self.find(scope)
        except LocalServeError as exc:
            await self.wire.send_error(send, exc, request_id_of(scope))
            return
        await _send_json(send, 200, {"name": scope["path_params"]["name"], "ready": True})

    async def stats(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models/{m}/stats: the statistics extension for one model."""
        version = scope["path_params"].get("version")
        await self._get(
            scope, send, lambda rt, model: {"model_stats": [self._stats(model.name, model.shown_version(version))]}
        )

    async def index(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models (and Triton's POST /v2/repository/index): every V2 model, each version of it, its state."""
        # Off the event loop: listing a remote model's versions may download its copy.
        await _send_json(send, 200, await asyncio.to_thread(self.models.index))

    async def all_stats(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models/stats: the statistics extension for every V2 model."""
        try:
            metrics = self._metrics()
            entries = every_model_stats(metrics, [(name, self.models.where(name)) for name in self.names()])
            await _send_json(send, 200, {"model_stats": entries})
        except LocalServeError as exc:
            await self.wire.send_error(send, exc, request_id_of(scope))

    def _stats(self, name: str, version: str) -> dict[str, Any]:
        return model_stats(self._metrics(), name, version, self.models.where(name))

    def _metrics(self) -> Metrics:
        if self.engine.metrics is None:
            raise NotFound("Statistics come from the server's metrics, which are off (--no-metrics).")
        return self.engine.metrics

    async def _get(self, scope: Scope, send: Send, answer: Callable[[ApiRuntime, V2Model], Any]) -> None:
        try:
            rt, model = await self.find(scope)
            value = answer(rt, model)
        except LocalServeError as exc:
            await self.wire.send_error(send, exc, request_id_of(scope))
            return
        await _send_json(send, 200, value)

    # -- inference --------------------------------------------------------------------------------
    async def infer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one inference request: one call into the engine, as a native request."""
        request_id = request_id_of(scope)
        rt = self.models.api_of(scope["path_params"]["name"])
        if rt is None:  # no API to count it under: its access line alone
            start = time.perf_counter()
            status = await self.wire.send_error(send, self.models.no_model(scope["path_params"]["name"]), request_id)
            self.engine.unrouted(scope["method"], scope["path"], status, time.perf_counter() - start, request_id)
            return
        await self.engine.submit(
            rt, self.wire.exchange(rt.api.name, scope, receive, send, request_id, prepare=self._prepare)
        )

    async def _prepare(self, scope: Scope, body: bytes, request_id: str) -> tuple[Request, _Call]:
        """The request and its own stages (decode the tensors, encode the outputs) from a V2 body."""
        _, model = await self.find(scope)
        length = coding = None
        for key, value in scope["headers"]:
            if key == HEADER_LENGTH:
                length = value
            elif key == b"content-encoding":
                coding = value
        if coding is not None:  # tritonclient's request_compression_algorithm: the header length is the decoded one
            body = await decode_content(body, coding, self.wire.max_body_size)
        call = _Call(model, parse_header_length(length, len(body)))
        return Request("POST", scope["headers"], body, request_id=request_id, path=scope["path"]), call


class _Call:
    """One inference request's own stages, run on the API's threads: decode the tensors, encode the outputs."""

    __slots__ = ("decoded", "header_length", "model", "ran", "rows")

    def __init__(self, model: V2Model, header_length: int | None) -> None:
        self.model = model
        self.header_length = header_length
        self.decoded: Decoded | None = None
        self.rows = 1  # its inferences, once decoded (Stages.rows)
        self.ran: tuple[str, str] | None = None  # a multi-model API's model version that runs it (Stages.ran)

    def prepare(self, request: Request) -> Any:
        model = self.model
        self.decoded = decode_request(
            request.body, self.header_length, model.inputs, model.outputs, keep_bytes=model.keep_bytes
        )
        feed, self.rows, self.ran = routed(model, self.decoded.feed)
        return feed

    def finish(self, request: Request, output: Any) -> Reply:
        decoded = self.decoded
        assert decoded is not None
        values = output if isinstance(output, dict) else dict(zip(self.model.output_order, output, strict=False))
        chosen: list[tuple[Requested, Any]] = [(wanted, values[wanted.name]) for wanted in decoded.outputs]
        body, header_length = encode_response(
            self.model.name, decoded.id, chosen, version=VERSION if self.ran is None else self.ran[1]
        )
        if header_length is None:
            return Reply(status=200, headers=[(b"content-type", JSON)], body=body)
        headers = [(b"content-type", b"application/octet-stream"), (HEADER_LENGTH, str(header_length).encode())]
        return Reply(status=200, headers=headers, body=body)


async def _send_json(send: Send, status: int, value: Any) -> None:
    await send_reply(send, Reply(status=status, headers=[(b"content-type", JSON)], body=orjson.dumps(value)), None)
