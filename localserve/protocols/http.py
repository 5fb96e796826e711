"""The HTTP wire shared by every HTTP front door: the native routes (``server/``), V2 REST and AsyncAPI.

One request's body is read here (413 past the limit, ``read_body``; ``decode_content`` for a
compressed one: ``bodies.py``), every answer leaves through ``send_reply``, and every error becomes a response
in ONE renderer, ``render_error`` (statuses and extra headers come from the error classes; 503s
carry ``Retry-After``). ``HttpClient`` is the engine's ``Client`` over ASGI, and ``fast_path``
reads the typed extension our own HTTP/1.1 connection (``server/connection/``) puts in the scope.

It sits in ``protocols/``, not ``server/``, because the layer contract puts ``protocols`` below
``server``: the V2 and AsyncAPI front doors use it without importing the server.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from itertools import count
from typing import Any, Protocol, cast

from localserve.engine.api import ApiRuntime
from localserve.engine.core import Engine
from localserve.engine.job import Stages
from localserve.engine.ports import Headers, ReplyWriter
from localserve.errors import (
    ClientGone,
    HandlerError,
    LocalServeError,
    MethodNotAllowed,
)
from localserve.messages.error_text import error_body, error_message
from localserve.messages.request import Request
from localserve.messages.response import Reply, answer_headers
from localserve.protocols.bodies import read_body

log = logging.getLogger("localserve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON_HEADERS = ((b"content-type", b"application/json"),)
FAST_PATH = "localserve.fast_path"  # the ASGI scope extension (scope["extensions"]) of server/connection/protocol.py


# -- request ids ----------------------------------------------------------------------------------
_ID_PREFIX = uuid.uuid4().hex[:16]
_id_counter = count(1)
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0A-\x1F\x7F]")  # what HTTP/1.1 refuses in a header value


def request_id_of(scope: Scope) -> str:
    """The client's X-Request-ID, or a new one: unique per process prefix + counter (no syscall per request).

    A client's id holding control characters is replaced: it could not be sent back as a header.
    """
    for name, value in scope["headers"]:
        if name == b"x-request-id" and value and not _BAD_VALUE.search(value):  # it is sent back as a header
            return str(value.decode("latin-1")[:200])
    return f"{_ID_PREFIX}{next(_id_counter):016x}"


# -- the connection's fast path ---------------------------------------------------------------------
class FastPath(Protocol):
    """What our HTTP/1.1 connection offers one request (``server/connection/`` implements it)."""

    def reply_now(self, status: int, headers: Headers, body: bytes) -> bool:
        """Write a whole response at once from the loop; False when it cannot go this way (send through ASGI)."""

    @property
    def writer(self) -> ReplyWriter | None:
        """The API's thread's writer of this request's answer, where the socket allows it."""


def fast_path(scope: Scope) -> FastPath | None:
    """The scope's fast path, when the request came through our own HTTP/1.1 connection (else None)."""
    extensions = scope.get("extensions")
    if extensions is None:
        return None
    return cast("FastPath | None", extensions.get(FAST_PATH))


class HttpClient:
    """The engine's ``Client`` over ASGI: the disconnect message, and a stream's messages."""

    __slots__ = ("receive", "send")

    def __init__(self, receive: Receive, send: Send) -> None:
        self.receive = receive
        self.send = send

    async def left(self) -> None:
        """Return once ASGI says the client disconnected."""
        while (await self.receive())["type"] != "http.disconnect":
            pass

    async def stream_start(self, status: int, headers: Headers) -> None:
        """The head of a streamed answer."""
        await self.send({"type": "http.response.start", "status": status, "headers": headers})

    async def stream_chunk(self, data: bytes, more: bool) -> None:
        """One piece of a streamed answer."""
        await self.send({"type": "http.response.body", "body": data, "more_body": more})


# -- answers ----------------------------------------------------------------------------------------
def render_error(
    exc: LocalServeError,
    request_id: str | None,
    *,
    api: str | None = None,
    hide_errors: bool = False,
    v2: bool = False,
    logged: bool = False,
) -> Reply:
    """THE renderer of an error as an HTTP answer: its status, its headers, a JSON body.

    The body is ``{"error": ..., "request_id": ...}``, or ``{"error": ...}`` on the Open Inference
    Protocol's routes (``v2``, as Triton and KServe answer). A 503 carries ``Retry-After``. Server
    errors (500s, not 503/504) are logged with user code's traceback (unless ``logged`` already); with ``hide_errors``
    (``--hide-errors``) a 500 tells the client only to look in the log.
    """
    status = exc.status_code
    if status >= 500 and status not in (503, 504) and not logged:
        # The text, not the exception: a kept log record must not keep the request's frames alive.
        to = "" if api is None else f" to api {api!r}"  # a request that reached no API (an unknown route) has none
        if exc.details:
            log.error("request %s%s failed: %s\n%s", request_id, to, str(exc), exc.details)
        else:
            log.error("request %s%s failed: %s", request_id, to, str(exc))
    headers = [*JSON_HEADERS, *exc.headers]
    if status == 503:
        headers.append((b"retry-after", b"1"))
    message = error_message(exc, hide_errors)
    body = json.dumps({"error": message}).encode() if v2 or request_id is None else error_body(message, request_id)
    return Reply(status=status, headers=headers, body=body)


def json_reply(status: int, value: Any) -> Reply:
    """A Reply with ``value`` as its JSON body."""
    return Reply(status=status, headers=list(JSON_HEADERS), body=json.dumps(value).encode())


async def send_reply(send: Send, reply: Reply, request_id: str | None, scope: Scope | None = None) -> None:
    """Send ``reply`` as one response, with content-length and (given an id) x-request-id.

    With the ``scope`` of our own HTTP connection the response is written at once, without ASGI's
    two sends (``FastPath.reply_now``); any other server gets the two sends.
    """
    headers = answer_headers(reply, request_id)
    if (
        scope is not None
        and (path := fast_path(scope)) is not None
        and path.reply_now(reply.status, headers, reply.body)
    ):
        return
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


async def send_error(send: Send, exc: LocalServeError, request_id: str | None, *, v2: bool = False) -> int:
    """Render ``exc`` (``render_error``) and send it; returns the status."""
    reply = render_error(exc, request_id, v2=v2)
    await send_reply(send, reply, request_id)
    return reply.status


async def answer_other_method(send: Send, method: str, path: str, allow: bytes, request_id: str) -> int:
    """Answer a method a route does not serve: ``OPTIONS`` with 204 and ``Allow``, any other with a JSON 405
    and ``Allow``; returns the status."""
    if method == "OPTIONS":
        await send_reply(send, Reply(status=204, headers=[(b"allow", allow)]), request_id)
        return 204
    return await send_error(send, MethodNotAllowed(method, path, allow.decode("latin-1")), request_id)


async def send_user_response(
    reply: Reply, scope: Scope, receive: Receive, send: Send, request_id: str, api: str, *, hide_errors: bool
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
        await send_reply(send, render_error(error, request_id, hide_errors=hide_errors, logged=True), request_id)


# -- one request of an API ---------------------------------------------------------------------------
async def counted(
    engine: Engine, rt: ApiRuntime, scope: Scope, request_id: str, answer: Awaitable[tuple[int, Any]]
) -> None:
    """Await ``answer`` (a front door's whole answer: its status and the value for the tracker) as one request of
    ``rt``'s API, counted once by the engine (in flight meanwhile; then metrics, tracker, access log)."""
    start = time.perf_counter()
    engine.began(rt)
    status, value = 500, None
    try:
        status, value = await answer
    finally:
        engine.ended(rt, scope["method"], scope["path"], status, time.perf_counter() - start, request_id, value)


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


class HttpDoor:
    """The steps every HTTP front door takes with one request of an API, in one place.

    Admission (``Lifecycle.admit``: 503 before the body is read), the body (413 past
    ``max_body_size``), the request (a native ``Request``, or what the protocol's ``prepare`` makes
    of the body: its own ``Stages``), ``Lifecycle.run`` with this connection as its ``Client`` and,
    where it can, its ``ReplyWriter``; then the answer, whichever way it leaves: already written by
    the API's thread, a Starlette Response of user code, a stream (sent by the engine), or a plain
    Reply. Every error is rendered by ``render_error``.
    """

    __slots__ = ("hide_errors", "max_body_size")

    def __init__(self, *, max_body_size: int, hide_errors: bool) -> None:
        self.max_body_size = max_body_size
        self.hide_errors = hide_errors

    async def serve(
        self,
        rt: ApiRuntime,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str,
        *,
        prepare: Prepare | None = None,
        v2: bool = False,
    ) -> tuple[int, Any]:
        """Answer one request of ``rt``'s API; (status, the value user code returned) for the records. Never raises
        but for the client leaving (then 499)."""
        path = fast_path(scope)
        writer = None if path is None else path.writer
        lifecycle = rt.lifecycle
        try:
            try:
                with lifecycle.admit():
                    body = await read_body(scope, receive, self.max_body_size)
                if prepare is None:
                    request, stages = native_request(scope, body, request_id), None
                else:
                    request, stages = await prepare(scope, body, request_id)
                del body
                # The runtime serving now (serve --reload may have swapped in another while the body came): it
                # answers, and its threads run the reply's post_predict (after_reply below).
                lifecycle = rt.lifecycle
                reply = await lifecycle.run(request, HttpClient(receive, send), stages=stages, writer=writer)
            except LocalServeError as exc:
                reply = render_error(exc, request_id, api=rt.api.name, hide_errors=self.hide_errors, v2=v2)
            try:
                if reply.sent is not None:  # the API's thread wrote it: end the response here
                    assert writer is not None
                    writer.complete(reply.sent)
                elif reply.asgi is not None:  # a Starlette Response returned by user code
                    await send_user_response(
                        reply, scope, receive, send, request_id, rt.api.name, hide_errors=self.hide_errors
                    )
                elif reply.stream is None:  # (a stream was sent by the engine, through HttpClient)
                    await send_reply(send, reply, request_id, scope)
            finally:  # post_predict: once the answer is out (or its client gone), on the API's threads
                lifecycle.after_reply(reply, request_id)
            return reply.status, reply.value
        except ClientGone:
            return 499, None
