"""``localserve run --api X``: the other APIs of the config, started only when X's code calls them.

``run`` loads only the API it sends the request to, so a broken API elsewhere in the config
cannot stop it. When that API's code calls ``http://api-<other>:8888/...``, the resolver
(``compat.hosts``) asks here for ``<other>``'s port: the first time, a loopback server for that
one API starts on a free port in a background thread and the call waits until it has loaded
(or failed to load, in which case it answers 503 with the reason).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from localserve.config import ServeConfig

if TYPE_CHECKING:
    from localserve.server import ServeOptions

log = logging.getLogger("localserve")
LOAD_WAIT_SECONDS = 600.0


class Peers:
    """Loopback servers for the APIs of ``config`` other than the one ``run`` calls, started on first use."""

    def __init__(self, config: ServeConfig, options: ServeOptions) -> None:
        self.config = config
        self.options = options  # run's; each peer serves with keep_going and no metrics
        self.names = {api.name for api in config.apis}
        self._lock = threading.Lock()
        self._ports: dict[str, int] = {}
        self._servers: list[tuple[Any, threading.Thread]] = []

    def port_of(self, name: str) -> int | None:
        """The loopback port of the API ``name`` (its server started on first use); None for a name that is no API."""
        if name not in self.names:
            return None
        with self._lock:
            if name not in self._ports:
                self._ports[name] = self._start(name)
            return self._ports[name]

    def _start(self, name: str) -> int:
        from dataclasses import replace

        import uvicorn

        from localserve.server import create_app

        app = create_app(self.config.only([name]), replace(self.options, keep_going=True, metrics=False))
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
        )
        loaded = threading.Event()
        port: list[int] = []

        async def main() -> None:
            config = server.config
            if not config.loaded:
                config.load()
            server.lifespan = config.lifespan_class(config)
            await server.startup()
            port.append(server.servers[0].sockets[0].getsockname()[1])
            if app.loading is not None:
                await asyncio.wait([app.loading])
            loaded.set()
            await server.main_loop()
            await server.shutdown()

        def target() -> None:
            try:
                asyncio.run(main())
            finally:
                loaded.set()

        log.info("api %r is called by the api being run: starting it on a loopback port", name)
        thread = threading.Thread(target=target, name=f"localserve-peer-{name}", daemon=True)
        thread.start()
        loaded.wait(LOAD_WAIT_SECONDS)
        self._servers.append((server, thread))
        if not port:
            raise OSError(f"api {name!r} could not be started for the call to api-{name}")
        return port[0]

    def close(self) -> None:
        """Stop the servers started for the peers."""
        for server, thread in self._servers:
            server.should_exit = True
            thread.join(10)
