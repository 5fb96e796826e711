"""The app in this process, behind an ``httpx`` transport: its own event loop on a thread, its ASGI lifespan run.

Example::

    with AppLoop(app) as loop:                      # lifespan startup ... shutdown
        with httpx.Client(transport=InProcessTransport(loop), base_url="http://testserver") as client:
            client.get("/readyz")

Each request goes through ``localserve.server.inprocess.call`` (``localserve run``'s exchange): the whole body in, the
whole response out, no socket. Requests from several threads run concurrently on the app's loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, MutableMapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from localserve.server.inprocess import call

__all__ = ["AppLoop", "InProcessTransport"]

T = TypeVar("T")
LIFESPAN_SCOPE = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}


class AppLoop:
    """An ASGI app's event loop on a thread of its own: the lifespan started on entry, ended on exit."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="localserve-testing", daemon=True)
        self._messages: asyncio.Queue[dict[str, Any]] | None = None
        self._started: asyncio.Future[None] | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._lifespan: asyncio.Task[None] | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the app's loop and wait for its result (or its exception)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def __enter__(self) -> AppLoop:
        self._thread.start()
        try:
            self.run(self._startup())
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self.run(self._shutdown())
        finally:
            self._close()

    async def _startup(self) -> None:
        loop = asyncio.get_running_loop()
        self._messages = asyncio.Queue()
        self._started, self._stopped = loop.create_future(), loop.create_future()
        self._messages.put_nowait({"type": "lifespan.startup"})
        self._lifespan = asyncio.ensure_future(self.app(dict(LIFESPAN_SCOPE), self._messages.get, self._send))
        await asyncio.wait({self._lifespan, self._started}, return_when=asyncio.FIRST_COMPLETED)
        if not self._started.done():  # the app returned, or raised, without starting
            self._lifespan.result()
            raise RuntimeError("The app ended its lifespan without starting.")
        self._started.result()

    async def _shutdown(self) -> None:
        assert self._messages is not None and self._stopped is not None and self._lifespan is not None
        self._messages.put_nowait({"type": "lifespan.shutdown"})
        await asyncio.wait({self._lifespan, self._stopped}, return_when=asyncio.FIRST_COMPLETED)
        await self._lifespan
        if self._stopped.done():
            self._stopped.result()

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        kind = message["type"]
        future = self._started if kind.startswith("lifespan.startup") else self._stopped
        assert future is not None
        if kind.endswith(".failed"):
            future.set_exception(RuntimeError(f"The app's lifespan failed: {message.get('message', '')}"))
        else:
            future.set_result(None)

    def _close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


class InProcessTransport(httpx.BaseTransport):
    """Sends each request to the app of ``loop`` in-process (``localserve.server.inprocess.call``) and returns its answer."""

    def __init__(self, loop: AppLoop) -> None:
        self.app_loop = loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        headers = [(key.decode("latin-1"), value.decode("latin-1")) for key, value in request.headers.raw]
        query = request.url.query.decode("latin-1")
        exchange = call(self.app_loop.app, request.method, request.url.path, headers, body, query)
        status, response_headers, content = self.app_loop.run(exchange)
        return httpx.Response(status, headers=response_headers, stream=httpx.ByteStream(content), request=request)
