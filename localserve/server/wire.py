"""The ASGI wire: request ids, and sending a Reply (whole or streamed); timers of the hot path."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from localserve.config import ApiConfig
from localserve.errors import Timeout
from localserve.executor import QUEUED, Executor
from localserve.logs import api_var, request_id_var
from localserve.response import Reply
from localserve.server.runtime import ApiRuntime, ClientGone

log = logging.getLogger("localserve")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_ID_PREFIX = uuid.uuid4().hex[:16]
_id_counter = itertools.count(1)


def request_id_of(scope: Scope) -> str:
    """The client's X-Request-ID, or a new one: unique per process prefix + counter (no syscall per request)."""
    for name, value in scope["headers"]:
        if name == b"x-request-id" and value:
            return str(value.decode("latin-1")[:200])
    return f"{_ID_PREFIX}{next(_id_counter):016x}"


def json_reply(status: int, value: Any) -> Reply:
    return Reply(status=status, headers=[(b"content-type", b"application/json")], body=json.dumps(value).encode())


def expire(executor: Executor, job: Any, api: ApiConfig) -> None:
    started = not executor.drop(job)
    if not job.future.done():
        what = "it was still running" if started else "it had not started and was dropped"
        job.future.set_result(
            Timeout(f"api {api.name!r} did not answer within its timeout of {api.timeout:g} s ({what}).")
        )


class WatchDisconnect:
    """Drop a queued job whose client goes away; starts listening once the job has waited WATCH_AFTER."""

    WATCH_AFTER = 0.02  # seconds

    def __init__(self, receive: Receive, executor: Executor, job: Any) -> None:
        self.receive, self.executor, self.job = receive, executor, job
        self.task: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = job.loop.call_later(self.WATCH_AFTER, self._start)

    def _start(self) -> None:
        self.timer = None
        if self.job.state == QUEUED:
            self.task = self.job.loop.create_task(self._listen())

    async def _listen(self) -> None:
        message = await self.receive()
        if message["type"] == "http.disconnect" and self.executor.drop(self.job) and not self.job.future.done():
            self.job.future.set_result(ClientGone("client disconnected before the request started"))

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.task is not None:
            self.task.cancel()


async def send_reply(send: Send, reply: Reply, request_id: str) -> None:
    headers = reply.headers
    headers.append((b"content-length", str(len(reply.body)).encode()))
    headers.append((b"x-request-id", request_id.encode("latin-1")))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


async def send_stream(send: Send, receive: Receive, reply: Reply, request_id: str, rt: ApiRuntime) -> None:
    """Send a generator's chunks as they come (each made on the API's worker thread).

    The client going away stops the generator (it is closed, so its ``finally`` runs); a
    generator that raises ends the response without its last chunk, so the client sees it cut
    short rather than complete.
    """
    assert reply.stream is not None
    iterator, executor, api = reply.stream, rt.executor, rt.api.name
    end = object()
    gone = asyncio.Event()

    async def listen() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    def step() -> Any:
        api_var.set(api)
        request_id_var.set(request_id)
        return next(iterator, end)

    listener = asyncio.get_running_loop().create_task(listen())
    reply.headers.append((b"x-request-id", request_id.encode("latin-1")))
    try:
        await send({"type": "http.response.start", "status": reply.status, "headers": reply.headers})
        while not gone.is_set():
            try:
                chunk = await asyncio.wrap_future(executor.call(step))
            except Exception:
                log.exception("request %s: the streamed response failed", request_id)
                return
            if chunk is end:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        log.info("request %s: the client went away; the stream was stopped", request_id)
    finally:
        listener.cancel()
        close = getattr(iterator, "close", None)
        if close is not None:
            executor.call(close)
