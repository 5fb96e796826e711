"""The Open Inference Protocol's routes: a second front door onto the same engine as the native routes.

``POST /v2/models/{m}/infer`` goes through the API's own ``Lifecycle`` (admission, deadline, client
leaving, shutdown) and ``Pipeline`` (its queue, its threads, its batcher): the request is decoded
into the model's feed on the API's threads (``Job.prepare``), so V2 and native requests share
batches, and the outputs are encoded there too (``Job.finish``). Errors are ``{"error": "..."}``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.routing import BaseRoute, Route

from localserve import __version__
from localserve.engine import error_reply, read_body
from localserve.engine.lifecycle import THREAD_REPLY, Receive, Scope, Send, decode_content
from localserve.errors import ClientGone, LocalServeError, NotFound, NotReady, Overloaded
from localserve.logs import access_log
from localserve.protocols.v2.codec import (
    HEADER_LENGTH,
    Decoded,
    Requested,
    decode_request,
    encode_response,
    parse_header_length,
)
from localserve.protocols.v2.models import VERSION, V2Model, not_a_model, v2_model
from localserve.protocols.v2.stats import model_stats
from localserve.request import Request
from localserve.response import Reply, error_message

DECODE_ON_LOOP = 256 * 1024  # compressed bodies larger than this are decompressed off the event loop

if TYPE_CHECKING:
    from localserve.server.api import ApiRuntime
    from localserve.server.app import App

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
    """The V2 routes of one replica's ``App``."""

    def __init__(self, app: App) -> None:
        from localserve.server.wire import request_id_of  # here: localserve.server imports this module

        self.app = app
        self.request_id_of = request_id_of
        self._models: dict[str, V2Model] = {}

    def routes(self) -> list[BaseRoute]:
        """The Starlette routes of every /v2 path (infer also has a fast path in ``App.__call__``)."""
        model = "/v2/models/{name}"
        version = "/v2/models/{name}/versions/{version}"
        gets: list[tuple[str, Handler]] = [
            ("/v2", self.server),
            ("/v2/", self.server),
            ("/v2/models/stats", self.all_stats),  # before the model routes: "stats" is no model name
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
        return routes

    @property
    def extensions(self) -> list[str]:
        """The protocol extensions served (statistics only while metrics are on)."""
        return [e for e in EXTENSIONS if e != "statistics" or self.app.metrics is not None]

    # -- models -------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The APIs that are V2 models (loaded or not)."""
        return [name for name, rt in self.app.apis.items() if not_a_model(rt) is None]

    def find(self, scope: Scope) -> tuple[ApiRuntime, V2Model]:
        """The API and its V2 model named in the path; NotFound (404) or NotReady (503) otherwise."""
        params = scope["path_params"]
        name = params["name"]
        rt = self.app.apis.get(name)
        if rt is None:
            listed = ", ".join(map(repr, self.names())) or "none"
            raise NotFound(f"No model {name!r}; the models served over the Open Inference Protocol are: {listed}.")
        why = not_a_model(rt)
        if why is not None:
            raise NotFound(why)
        version = params.get("version")
        if version is not None and version != VERSION:
            raise NotFound(f"Model {name!r} has no version {version!r}; localserve serves version {VERSION} only.")
        model = self._models.get(name)
        if model is None:
            model = v2_model(rt)
            if model is None:
                raise NotReady(name, rt.error)
            self._models[name] = model
        return rt, model

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
            self.find(scope)
        except LocalServeError as exc:
            await _send_error(send, exc, self.request_id_of(scope))
            return
        await _send_json(send, 200, {"name": scope["path_params"]["name"], "ready": True})

    async def stats(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models/{m}/stats: the statistics extension for one model."""
        await self._get(scope, send, lambda rt, model: {"model_stats": [self._stats(model.name)]})

    async def all_stats(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /v2/models/stats: the statistics extension for every V2 model."""
        try:
            await _send_json(send, 200, {"model_stats": [self._stats(name) for name in self.names()]})
        except LocalServeError as exc:
            await _send_error(send, exc, self.request_id_of(scope))

    def _stats(self, name: str) -> dict[str, Any]:
        if self.app.metrics is None:
            raise NotFound("Statistics come from the server's metrics, which are off (--no-metrics).")
        return model_stats(self.app.metrics, name, VERSION)

    async def _get(self, scope: Scope, send: Send, answer: Callable[[ApiRuntime, V2Model], Any]) -> None:
        try:
            rt, model = self.find(scope)
            value = answer(rt, model)
        except LocalServeError as exc:
            await _send_error(send, exc, self.request_id_of(scope))
            return
        await _send_json(send, 200, value)

    # -- inference --------------------------------------------------------------------------------
    async def infer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one inference request; it is counted in the API's metrics like a native request."""
        start = time.perf_counter()
        app = self.app
        request_id = self.request_id_of(scope)
        rt = app.apis.get(scope["path_params"]["name"])
        if rt is None:
            status = await self._answer(None, scope, receive, send, request_id)
            if app.access_log:
                access_log(scope["method"], scope["path"], None, status, time.perf_counter() - start, request_id)
            return
        app.request_began(rt)
        status = 500
        try:
            status = await self._answer(rt, scope, receive, send, request_id)
        finally:
            app.request_ended(rt, scope, status, time.perf_counter() - start, request_id)

    async def _answer(self, rt: ApiRuntime | None, scope: Scope, receive: Receive, send: Send, request_id: str) -> int:
        try:
            try:
                reply = await self._run(scope, receive, send, request_id)
            except LocalServeError as exc:
                hide = self.app.options.hide_errors
                reply = error_reply(exc, request_id, None if rt is None else rt.api.name, hide_errors=hide)
                reply.body = orjson.dumps({"error": error_message(exc, hide)})
            if reply.sent is not None:  # the API's thread wrote it (THREAD_REPLY): end the response here
                scope[THREAD_REPLY].complete(reply.sent)
            else:
                await _send_reply(send, reply, request_id)
            return reply.status
        except ClientGone:
            return 499

    async def _run(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> Reply:
        rt, model = self.find(scope)
        lifecycle = rt.lifecycle
        pipeline = rt.pipeline
        state, error = lifecycle.status()
        if state != "ready":
            raise NotReady(rt.api.name, error)
        if pipeline.full():  # answer before reading a large body for nothing
            raise Overloaded(rt.api.name, pipeline.max_queue)
        pipeline.reading += 1
        try:
            body = await read_body(scope, receive, lifecycle.max_body_size)
        finally:
            pipeline.reading -= 1
        length = coding = None
        for key, value in scope["headers"]:
            if key == HEADER_LENGTH:
                length = value
            elif key == b"content-encoding":
                coding = value
        if coding is not None:  # tritonclient's request_compression_algorithm: the header length is the decoded one
            if len(body) > DECODE_ON_LOOP:
                body = await asyncio.to_thread(decode_content, body, coding, lifecycle.max_body_size)
            else:
                body = decode_content(body, coding, lifecycle.max_body_size)
        call = _Call(model, parse_header_length(length, len(body)))
        request = Request("POST", scope["headers"], body, request_id=request_id, path=scope["path"])
        del body
        writer = scope.get(THREAD_REPLY)
        return await lifecycle.run(request, receive, send, finish=call.finish, prepare=call.prepare, writer=writer)


class _Call:
    """One inference request's own stages, run on the API's threads: decode the tensors, encode the outputs."""

    __slots__ = ("decoded", "header_length", "model")

    def __init__(self, model: V2Model, header_length: int | None) -> None:
        self.model = model
        self.header_length = header_length
        self.decoded: Decoded | None = None

    def prepare(self, request: Request) -> dict[str, Any]:
        model = self.model
        self.decoded = decode_request(
            request.body, self.header_length, model.inputs, model.outputs, keep_bytes=model.keep_bytes
        )
        return self.decoded.feed

    def finish(self, request: Request, output: Any) -> Reply:
        decoded = self.decoded
        assert decoded is not None
        values = output if isinstance(output, dict) else dict(zip(self.model.output_order, output, strict=False))
        chosen: list[tuple[Requested, Any]] = [(wanted, values[wanted.name]) for wanted in decoded.outputs]
        body, header_length = encode_response(self.model.name, decoded.id, chosen)
        if header_length is None:
            return Reply(status=200, headers=[(b"content-type", JSON)], body=body)
        headers = [(b"content-type", b"application/octet-stream"), (HEADER_LENGTH, str(header_length).encode())]
        return Reply(status=200, headers=headers, body=body)


async def _send_json(send: Send, status: int, value: Any) -> None:
    await _send_reply(send, Reply(status=status, headers=[(b"content-type", JSON)], body=orjson.dumps(value)), None)


async def _send_error(send: Send, exc: LocalServeError, request_id: str) -> None:
    headers = [(b"content-type", JSON)]
    if exc.status_code == 503:
        headers.append((b"retry-after", b"1"))
    await _send_reply(
        send, Reply(status=exc.status_code, headers=headers, body=orjson.dumps({"error": str(exc)})), request_id
    )


async def _send_reply(send: Send, reply: Reply, request_id: str | None) -> None:
    headers = [*reply.headers, (b"content-length", str(len(reply.body)).encode())]
    if request_id is not None:
        headers.append((b"x-request-id", request_id.encode("latin-1")))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})
