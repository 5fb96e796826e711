"""One HTTP request of an API as the engine's ``Exchange``, shared by the native routes, V2 REST, the
TrafficSplitter and AsyncAPI: ``HttpWire`` is what a door decides once (the body's limit, hidden
errors, its error bodies), ``HttpExchange`` one request on it, handed to ``Engine.submit``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from localserve.config.options import ServeOptions
from localserve.engine.ports import Stages
from localserve.errors import HandlerError, LocalServeError
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.protocols.bodies import read_body
from localserve.protocols.http import (
    HttpClient,
    Message,
    Receive,
    Scope,
    Send,
    fast_path,
    render_error,
    send_reply,
)
from localserve.tracing import Traced, carrier_of

log = logging.getLogger("localserve")


async def send_user_response(
    reply: Reply, scope: Scope, receive: Receive, send: Send, request_id: str, api: str, wire: HttpWire
) -> None:
    """Send a Starlette Response returned by user code; one that fails before its head (a FileResponse of
    a file that is not there) is answered with our JSON 500 instead, one that fails after is cut short."""
    started = False

    async def watched(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    response = reply.asgi
    try:
        response.headers["x-request-id"] = request_id
        await response(scope, receive, watched)
    except Exception as exc:
        reply.status = 500
        error = HandlerError(f"Sending the returned {type(response).__name__} failed: {type(exc).__name__}: {exc}")
        log.error("request %s to api %r failed: %s", request_id, api, error, exc_info=exc)
        if started:  # nothing more can be said on this one: the client sees it cut short
            return
        await send_reply(
            send, render_error(error, request_id, hide_errors=wire.hide_errors, v2=wire.v2, logged=True), request_id
        )


# -- one request of an API ---------------------------------------------------------------------------
Prepare = Callable[[Scope, bytes, str], Awaitable[tuple[Request, Stages | None]]]


def native_request(scope: Scope, body: bytes, request_id: str) -> Request:
    """The request of an API's own route, as its handler gets it: the scope's method, headers, query and path."""
    return Request(
        scope["method"],
        scope["headers"],
        body,
        query_string=scope["query_string"],
        request_id=request_id,
        path=scope["path"],
    )


class HttpWire:
    """What one HTTP front door decides once for all its requests: the body's limit, whether a 500's details are
    hidden (``--hide-errors``), and its error bodies (V2's ``{"error": ...}``, else with the request id)."""

    __slots__ = ("hide_errors", "max_body_size", "v2")

    def __init__(self, *, max_body_size: int, hide_errors: bool, v2: bool = False) -> None:
        self.max_body_size = max_body_size
        self.hide_errors = hide_errors
        self.v2 = v2

    def exchange(
        self,
        api: str,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str,
        *,
        prepare: Prepare | None = None,
    ) -> HttpExchange:
        """One request of API ``api`` on this wire, for ``Engine.submit``: a native request of its own route, or what
        the protocol's ``prepare`` makes of its body (its own ``Stages``)."""
        return HttpExchange(self, api, scope, receive, send, request_id, prepare)

    @classmethod
    def of(cls, options: ServeOptions, *, v2: bool = False) -> HttpWire:
        """The wire of a door of this server: its limit and ``--hide-errors`` from the settings tree."""
        return cls(max_body_size=options.max_body_size, hide_errors=options.hide_errors, v2=v2)

    def render(self, error: LocalServeError, request_id: str | None, api: str | None = None) -> Reply:
        """``error`` as this wire's answer (``render_error``)."""
        return render_error(error, request_id, api=api, hide_errors=self.hide_errors, v2=self.v2)

    async def send_error(self, send: Send, error: LocalServeError, request_id: str, api: str | None = None) -> int:
        """``error`` rendered as this wire's answer, and sent; returns the status."""
        reply = self.render(error, request_id, api)
        await send_reply(send, reply, request_id)
        return reply.status


class HttpExchange:
    """One HTTP request of an API, as the engine's ``Exchange``: its body read with the wire's limit (413), and its
    answer sent whichever way it leaves: already written by the API's thread, a Starlette Response of user code, a
    stream (sent by the engine through ``HttpClient``), or a plain Reply."""

    __slots__ = (
        "_receive",
        "_send",
        "api",
        "client",
        "method",
        "path",
        "prepare",
        "request_id",
        "scope",
        "tracked",
        "wire",
        "writer",
    )

    deadline = None

    def __init__(
        self,
        wire: HttpWire,
        api: str,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str,
        prepare: Prepare | None,
    ) -> None:
        self.wire = wire
        self.api = api
        self.scope = scope
        self._receive = receive
        self._send = send
        self.request_id = request_id
        self.prepare = prepare
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        path = fast_path(scope)
        self.writer = None if path is None else path.writer
        self.client = HttpClient(receive, send)
        self.tracked = not wire.v2  # V2 feeds the model directly: no prediction for the tracker

    async def receive(self) -> tuple[Request, Stages | None]:
        body = await read_body(self.scope, self._receive, self.wire.max_body_size)
        if self.prepare is None:
            return native_request(self.scope, body, self.request_id), None
        return await self.prepare(self.scope, body, self.request_id)

    async def send(self, reply: Reply) -> None:
        if reply.sent is not None:  # the API's thread wrote it: end the response here
            assert self.writer is not None
            self.writer.complete(reply.sent)
        elif reply.asgi is not None:  # a Starlette Response returned by user code
            await send_user_response(reply, self.scope, self._receive, self._send, self.request_id, self.api, self.wire)
        elif reply.stream is None:  # (a stream was sent by the engine, through HttpClient)
            await send_reply(self._send, reply, self.request_id, self.scope)

    def render(self, error: LocalServeError) -> Reply:
        return self.wire.render(error, self.request_id, self.api)

    def traced(self) -> Traced:
        return http_traced(self.scope, f"{self.method} {self.path}")


def http_traced(scope: Scope, name: str) -> Traced:
    """An HTTP request's trace context and semantic-convention attributes; ``name``: its span's (the route)."""
    method, path = scope["method"], scope["path"]
    attributes = {
        "http.request.method": method,
        "url.path": path,
        "url.scheme": scope.get("scheme", "http"),
        "http.route": name.partition(" ")[2],
        "network.protocol.version": scope.get("http_version", "1.1"),
    }
    client = scope.get("client")
    if client:
        attributes["client.address"] = client[0]
    params = scope.get("path_params") or {}
    if "name" in params:  # V2: the model the client named, and its version
        attributes["localserve.model"] = params["name"]
        attributes["localserve.model.version"] = params.get("version", "")
    return Traced(carrier_of(scope["headers"]), name, attributes)
