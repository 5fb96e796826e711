"""The event loop's side of one API: admission, the body, the deadline, the client leaving, the answer.

Everything that can happen to a request between its first byte and its last is decided here:

- admission: 503 + Retry-After at once when the queue is full (before the body is read);
- the deadline: 504 at ``timeout``; work that has not started is dropped and never runs;
- the client leaving while its request waits: the request is never started;
- shutdown: once the graceful timeout has run out nothing queued starts, and every client still
  waiting gets a JSON 503 (``cancel_waiting``).

Only requests that really wait pay for a task listening for their client: it is made once a
request has waited ``WATCH_AFTER`` seconds, and most requests are answered before that. One
timer per API (``_sweep``), not one per request, watches deadlines and waiting clients.

Where the server allows it (``THREAD_REPLY`` in the scope: our HTTP protocol), the API's thread
that finishes a request writes the answer itself and the loop only ends the response; the
deadline and shutdown answer a request only if they take ``Job.claim`` before that thread does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from localserve.engine.job import QUEUED, Job
from localserve.engine.pipeline import Pipeline
from localserve.errors import (
    ClientGone,
    HandlerError,
    LocalServeError,
    NotReady,
    Overloaded,
    RequestError,
    ShuttingDown,
    Timeout,
)
from localserve.request import Request
from localserve.response import Reply, answer_headers, error_body, error_message

log = logging.getLogger("localserve")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MiB = 1024 * 1024
REPLY_NOW = "localserve.reply_now"  # set by server/protocol.py: a whole response in one write
THREAD_REPLY = "localserve.thread_reply"  # set by server/protocol.py: the API's thread writes the answer
WATCH_AFTER = 0.02  # seconds a request waits before a task listens for its client leaving
JSON_HEADERS = ((b"content-type", b"application/json"),)


class Lifecycle:
    """Serves the requests of one API, from admission to the last byte of the answer."""

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        max_body_size: int,
        status: Callable[[], tuple[str, str | None]],
        hide_errors: bool = False,
    ) -> None:
        self.pipeline = pipeline
        self.hide_errors = hide_errors
        self.name = pipeline.name
        self.timeout = pipeline.api.timeout
        self.max_body_size = max_body_size
        self.status = status  # ("ready" | "loading" | "failed", error)
        self.waiting: dict[Job, None] = {}  # requests waiting for their answer, in admission order
        self.watch_after = min(WATCH_AFTER, self.timeout)
        self.tick = max(0.001, min(WATCH_AFTER, self.timeout / 2))  # how often _sweep looks at them
        self._sweeping: asyncio.AbstractEventLoop | None = None  # the loop whose timer runs _sweep, if any

    async def serve(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> tuple[int, Any]:
        """Answer one request; returns (status, the value user code returned) for the records. Never raises."""
        try:
            try:
                reply = await self._answer(scope, receive, send, request_id)
            except LocalServeError as exc:
                reply = error_reply(exc, request_id, self.name, hide_errors=self.hide_errors)
            if reply.sent is not None:  # the API's thread wrote it: end the response here
                scope[THREAD_REPLY].complete(reply.sent)
            elif reply.asgi is not None:  # a Starlette Response returned by user code
                await self._send_asgi(reply, scope, receive, send, request_id)
            elif reply.stream is None:
                await send_reply(send, reply, request_id, scope)
            return reply.status, reply.value
        except ClientGone:
            return 499, None

    async def _send_asgi(self, reply: Reply, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        """Send a Starlette Response returned by user code; one that fails before its head (a FileResponse of
        a file that is not there) is answered with our JSON 500 instead, one that fails after is cut short."""
        started = False

        async def watched(message: Any) -> None:
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
            log.error("request %s to api %r failed: %s", request_id, self.name, error, exc_info=exc)
            if started:  # nothing more can be said on this one: the client sees it cut short
                return
            await send_reply(send, error_reply(error, request_id, self.name, hide_errors=self.hide_errors), request_id)

    async def _answer(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> Reply:
        pipeline = self.pipeline
        state, error = self.status()
        if state != "ready":
            raise NotReady(self.name, error)
        if pipeline.full():  # answer before reading a large body for nothing
            raise Overloaded(self.name, pipeline.max_queue)
        pipeline.reading += 1
        try:
            body = await read_body(scope, receive, self.max_body_size)
        finally:
            pipeline.reading -= 1
        request = Request(
            scope["method"],
            scope["headers"],
            body,
            query_string=scope["query_string"],
            request_id=request_id,
            path=scope["path"],
        )
        del body
        return await self.run(request, receive, send, writer=scope.get(THREAD_REPLY))

    async def run(
        self,
        request: Request,
        receive: Receive,
        send: Send,
        finish: Any = None,
        prepare: Any = None,
        writer: Any = None,
    ) -> Reply:
        """Queue ``request`` on the API's threads and wait for its Reply (raised errors are the answer).

        ``finish`` and ``prepare`` replace the endpoint's stages for this request (see ``Job``).
        With a ``writer`` (the scope's ``THREAD_REPLY``) the thread that finishes the request
        writes the answer itself; the Reply then says so (``sent``) and the caller ends it.
        """
        loop = asyncio.get_running_loop()
        job = Job(request, loop, finish, prepare)
        job.send, job.receive, job.writer = send, receive, writer
        self.pipeline.submit(job)
        del request
        waiting = self.waiting
        waiting[job] = None
        if self._sweeping is not loop:  # no sweep yet, or one on a loop that is gone
            loop.call_at(job.started + self.tick, self._sweep)
            self._sweeping = loop
        try:
            reply: Reply = await job.future
            if reply.stream is not None and (ended := await self._follow_stream(job, receive)) is not None:
                reply.status = ended  # sent as 200, recorded as what happened: cut short (500) or left (499)
        finally:
            del waiting[job]
            if job.listener is not None:
                job.listener.cancel()
            if not job.future.done():  # cancelled: work nobody waits for is never started
                self.pipeline.drop(job)
            # A raised error's traceback holds this frame: without this, frame -> job -> future ->
            # error -> traceback -> frame would keep the request alive until a cyclic collection.
            job = None  # type: ignore[assignment]
        return reply

    def _sweep(self) -> None:
        """Every ``tick`` while requests wait: deadlines, and a listener for a client that waited a while.

        One timer for the API instead of one per request. ``waiting`` is in admission order, so
        the sweep stops at the first request younger than ``WATCH_AFTER``: under load it visits
        only the requests that really wait. A deadline is seen at most one tick late.
        """
        waiting = self.waiting
        loop = asyncio.get_running_loop()
        if loop is not self._sweeping:  # a sweep of a loop that is no longer this API's
            return
        if not waiting:
            self._sweeping = None
            return
        now = loop.time()
        watch_from = now - self.watch_after
        deadline_from = now - self.timeout
        for job in waiting:  # nothing here removes a job: answered requests leave from run()'s finally
            if job.started > watch_from:
                break
            if job.future.done() or job.loop is not loop:
                continue
            if job.started <= deadline_from:
                if not job.claim():  # an API thread is writing its answer; its Reply follows
                    continue
                started = not self.pipeline.drop(job)
                job.future.set_exception(Timeout(self.name, self.timeout, started))
            elif job.state == QUEUED and job.listener is None and job.receive is not None:
                job.listener = loop.create_task(self._listen(job, job.receive))
        loop.call_at(now + self.tick, self._sweep)

    async def _listen(self, job: Job, receive: Receive) -> None:
        message = await receive()
        if message["type"] == "http.disconnect" and self.pipeline.drop(job) and not job.future.done():
            job.future.set_exception(ClientGone())

    async def _follow_stream(self, job: Job, receive: Receive) -> int | None:
        """Wait while the API's thread sends the stream; tell it when the client goes away. None when the
        stream ended whole, else the status to record."""
        assert job.stream_done is not None and job.gone is not None
        gone = job.gone

        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        listener = asyncio.get_running_loop().create_task(listen())
        try:
            return await asyncio.wrap_future(job.stream_done)
        finally:
            listener.cancel()
            gone.set()

    def cancel_waiting(self) -> int:
        """Shutdown: nothing queued starts any more; every waiting client is answered 503. Returns how many."""
        count = 0
        for job in list(self.waiting):
            if job.gone is not None:
                job.gone.set()
            started = not self.pipeline.drop(job)
            if not job.future.done() and job.claim():
                job.future.set_exception(ShuttingDown(started))
                count += 1
        return count


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body, or RequestError 413 past ``limit`` bytes (before reading it when announced)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise RequestError(f"Invalid Content-Length header {value.decode('latin-1')!r}.") from None
            if length > limit:
                raise too_large(length, limit)
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body"):
        if message["type"] == "http.disconnect":
            raise ClientGone("while sending its request")
        if len(body) > limit:  # no Content-Length (chunked): counted as it comes
            raise too_large(len(body), limit, at_least=True)
        return body
    chunks = [body]
    size = len(body)
    while message.get("more_body"):
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone("while sending its request")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(size, limit, at_least=True)
        chunks.append(chunk)
    return b"".join(chunks)


# Content-Encoding -> zlib's wbits: gzip, or zlib's format for deflate (what tritonclient sends).
_CODINGS = {b"gzip": 16 + zlib.MAX_WBITS, b"x-gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}


def decode_content(body: bytes, coding: bytes, limit: int) -> bytes:
    """A body sent with ``Content-Encoding: coding`` (gzip or deflate), decompressed to at most ``limit`` bytes.

    Triton's HTTP endpoint takes both (``tritonclient``'s ``request_compression_algorithm``); any
    other coding is a 415, a body that decompresses past ``limit`` a 413 (a small bomb cannot
    expand in memory: at most ``limit`` + 1 bytes are made).
    """
    name = coding.strip().lower()
    if name in (b"", b"identity"):
        return body
    wbits = _CODINGS.get(name)
    shown = name.decode("latin-1")
    if wbits is None:
        raise RequestError(
            f"Content-Encoding {shown!r} is not supported here; send the body with gzip, deflate or no encoding.",
            status_code=415,
        )
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise RequestError(f"The body is not valid {shown} data (Content-Encoding: {shown}): {exc}.") from None
    if len(out) > limit:
        log.warning("rejected a %s request body: it decompresses past the limit of %s bytes", shown, limit)
        raise RequestError(
            f"The request body decompresses to more than {limit} bytes (--max-body-size); {len(body)} bytes were "
            f"sent with Content-Encoding {shown}.",
            status_code=413,
        )
    if not inflater.eof:
        raise RequestError(f"The {shown} body ends before its compressed stream does (Content-Encoding: {shown}).")
    return out


def too_large(size: int, limit: int, *, at_least: bool = False) -> RequestError:
    """The 413 for a body of ``size`` bytes over ``limit`` (``at_least``: the size is a lower bound)."""
    shown = f"{limit / MiB:g} MiB" if limit >= MiB else f"{limit} bytes"
    got = f"at least {size}" if at_least else str(size)
    log.warning("rejected a request body of %s bytes: over the limit of %s", got, shown)
    return RequestError(
        f"The request body is too large: {got} bytes; the limit is {shown} ({limit} bytes, --max-body-size).",
        status_code=413,
    )


def error_reply(exc: LocalServeError, request_id: str, api: str | None = None, *, hide_errors: bool = False) -> Reply:
    """The JSON answer for an error; server errors (not 503/504) are logged with user code's traceback.

    With ``hide_errors`` (``--hide-errors``) a 500 tells the client only to look in the log.
    """
    if exc.status_code >= 500 and exc.status_code not in (503, 504):
        # The text, not the exception: a kept log record must not keep the request's frames alive.
        if exc.details:
            log.error("request %s to api %r failed: %s\n%s", request_id, api, str(exc), exc.details)
        else:
            log.error("request %s to api %r failed: %s", request_id, api, str(exc))
    headers = list(JSON_HEADERS)
    if exc.status_code == 503:
        headers.append((b"retry-after", b"1"))
    return Reply(status=exc.status_code, headers=headers, body=error_body(error_message(exc, hide_errors), request_id))


def json_reply(status: int, value: Any) -> Reply:
    """A Reply with ``value`` as its JSON body."""
    return Reply(status=status, headers=list(JSON_HEADERS), body=json.dumps(value).encode())


async def send_reply(send: Send, reply: Reply, request_id: str, scope: Scope | None = None) -> None:
    """Send ``reply`` as one ASGI response, with content-length and x-request-id.

    With the ``scope`` of our own HTTP protocol the response is written at once, without ASGI's
    two sends (``LimitedHttpProtocol.reply_now``); any other server gets the two sends.
    """
    headers = answer_headers(reply, request_id)
    if scope is not None:
        reply_now = scope.get(REPLY_NOW)
        if reply_now is not None and reply_now(reply.status, headers, reply.body):
            return
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


async def answer_other_method(send: Send, method: str, path: str, allow: bytes, request_id: str) -> int:
    """Answer a method a route does not serve: ``OPTIONS`` with 204 and ``Allow``, any other with a JSON 405
    and ``Allow``; returns the status."""
    if method == "OPTIONS":
        await send_reply(send, Reply(status=204, headers=[(b"allow", allow)]), request_id)
        return 204
    message = f"Method {method} is not allowed on {path}; it takes {allow.decode()}."
    headers = [(b"content-type", b"application/json"), (b"allow", allow)]
    await send_reply(send, Reply(status=405, headers=headers, body=error_body(message, request_id)), request_id)
    return 405
