"""The HTTP wire shared by every HTTP front door: the native routes (``server/``), V2 REST, AsyncAPI and the
TrafficSplitter (one request of an API on it is ``door.HttpExchange``).

A request's body is read here (``read_body``: 413 past the limit; ``decode_content`` in ``bodies.py``), every answer
leaves through ``send_reply``, and every error becomes a response in one renderer, ``render_error``. ``HttpClient`` is
the engine's ``Client`` over ASGI; ``fast_path`` reads the extension our own HTTP/1.1 connection
(``server/connection/``) puts in the scope. It sits below ``server/`` so the V2 and AsyncAPI doors use it without
importing the server.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from itertools import count
from typing import Any, Protocol, cast

from localserve.engine.ports import Headers, ReplyWriter
from localserve.errors import (
    LocalServeError,
    MethodNotAllowed,
)
from localserve.messages.error_text import error_body, error_message
from localserve.messages.response import Reply, answer_headers

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
    return new_request_id()


def new_request_id() -> str:
    """A request id of this process: its prefix and a counter."""
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

    ``{"error": ..., "request_id": ...}``, or ``{"error": ...}`` on the Open Inference Protocol's routes (as Triton and
    KServe answer); a 503 carries ``Retry-After``. Server errors (500s) are logged with user code's traceback unless
    ``logged``; with ``hide_errors`` a 500 tells the client only to look in the log.
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
