"""Runner: one App, started and stopped one way, whoever asks.

Example::

    runner = Runner(config, options)
    status, headers, body = runner.call(lambda app: call(app, "POST", "/iris", [], b"{}"))  # run

Four users, one owner of the App's start and stop: a replica serves it behind uvicorn until a
signal (``serve``), ``run`` loads it, sends one request and stops it (``call``), the AsyncAPI
one-shot runs one job the same way, and the peer APIs of ``run --api X`` serve it on a loopback
port from a thread (``start_in_thread``). A load failure stops the start: ``call`` raises it, a
server exits (``failure`` says why) unless ``keep_going``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import uvicorn

from localserve.config import ServeConfig
from localserve.config.options import ServeOptions
from localserve.errors import LocalServeError
from localserve.server.app import App
from localserve.server.auth import require_api_key
from localserve.server.banner import banner_lines
from localserve.server.connection.server import bound_port, uvicorn_server
from localserve.server.reload import ProjectReload

__all__ = ["Runner"]

log = logging.getLogger("localserve")
T = TypeVar("T")
THREADS_EXIT_WAIT = 1.0  # seconds the APIs' threads get to end once a server has stopped (supervisor, run, peers)


class Runner:
    """Builds the App of ``config`` with ``options``, and starts and stops it (see the module doc)."""

    def __init__(self, config: ServeConfig, options: ServeOptions, project: ProjectReload | None = None) -> None:
        self.config = config
        self.options = options
        self.failure: LocalServeError | None = None  # the load failure that stopped the start
        self.server: uvicorn.Server | None = None  # while served over HTTP
        self._thread: threading.Thread | None = None
        self.app = App(config, options, self._on_fatal, project)  # project: entered again by --reload

    def _on_fatal(self, exc: LocalServeError) -> None:
        self.failure = exc
        if self.server is not None:
            self.server.should_exit = True

    def call(self, fn: Callable[[App], Awaitable[T]]) -> T:
        """Load every API, await ``fn(app)``, stop: in a fresh event loop; a load failure is raised."""

        async def main() -> T:
            try:
                await self.app.startup(wait=True)
                if self.failure is not None:
                    raise self.failure
                return await fn(self.app)
            finally:
                await self.app.shutdown.finish()

        return asyncio.run(main())

    def http_server(
        self, *, on_loaded: Callable[[], None] | None = None, on_listening: Callable[[], None] | None = None
    ) -> uvicorn.Server:
        """The uvicorn server of the App (not started): SIGTERM/SIGINT begin the App's graceful shutdown.

        ``on_loaded``: called on the event loop once loading has ended (loaded, failed or cancelled).
        ``on_listening``: called once the server listens (``port()`` is the port bound).
        """
        app = self.app

        def started() -> None:
            if on_listening is not None:
                on_listening()
            if on_loaded is not None and app.loading is not None:
                app.loading.add_done_callback(lambda _: on_loaded())

        self.server = uvicorn_server(self.asgi(), self.options, on_signal=app.shutdown.begin, on_started=started)
        return self.server

    def asgi(self) -> Any:
        """The ASGI app as served (``localserve.testing`` calls it in-process): the App, behind ``--api-key``."""
        return require_api_key(self.app, self.options.api_key)

    def port(self) -> int | None:
        """The port the App is served on, once it listens."""
        return bound_port(self.server)

    def banner(self) -> list[str]:
        """The startup banner's lines (``server.banner``), with the ports bound."""
        grpc = self.app.grpc
        grpc_port = (grpc.port or self.options.grpc_port) if grpc is not None else None
        return banner_lines(
            self.config.source, list(self.app.apis), self.options, port=self.port(), grpc_port=grpc_port
        )

    def start_in_thread(self, wait: float) -> int:
        """Serve the App from a background thread; its port once every API has loaded (or failed to)."""
        loaded = threading.Event()
        server = self.http_server(on_loaded=loaded.set)

        def target() -> None:
            try:
                server.run()  # no signal handlers outside the main thread
            finally:
                loaded.set()  # it could not start (uvicorn exits when the port cannot be bound)

        self._thread = threading.Thread(target=target, name="localserve-peer", daemon=True)
        self._thread.start()
        loaded.wait(wait)
        port = self.port()
        if port is None:
            raise OSError(f"{self.config.source}: the server of {', '.join(self.app.apis)} could not start")
        return port

    def stop_thread(self, threads_wait: float = THREADS_EXIT_WAIT) -> list[str]:
        """Stop the server ``start_in_thread`` started, and wait for it (10 s at most), then ``threads_wait`` seconds
        at most for its APIs' threads; the names of those still running (see ``cli.exits.exit_past_threads``)."""
        if self.server is not None:
            self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        return self.app.join_threads(threads_wait)
