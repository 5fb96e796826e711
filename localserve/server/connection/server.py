"""uvicorn's ``Server`` as localserve runs it: our HTTP/1.1 protocol, a signal that begins the App's graceful
shutdown, a hook once it listens, and the port it bound.

The ``Server`` subclass here, like the protocol beside it, relies on uvicorn's internals
(``handle_exit``, ``_captured_signals``, ``startup``, ``servers``): tests/server/test_uvicorn_contract.py
names each.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import uvicorn

from localserve.config.options import ServeOptions
from localserve.server.connection.protocol import protocol_class
from localserve.server.shutdown import uvicorn_cutoff


def uvicorn_server(
    asgi: Any, options: ServeOptions, *, on_signal: Callable[[], None], on_started: Callable[[], None] | None = None
) -> uvicorn.Server:
    """A uvicorn server of ``asgi`` (not started): SIGTERM/SIGINT call ``on_signal``; ``on_started`` once it listens."""

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # uvicorn re-raises the signal after its graceful shutdown; a clean stop exits 0.
            self._captured_signals.clear()
            on_signal()

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if on_started is not None:
                on_started()

    return Server(
        uvicorn.Config(
            asgi,
            host=options.host,
            port=options.port,
            uds=options.uds,
            ssl_keyfile=options.ssl_keyfile,
            ssl_certfile=options.ssl_certfile,
            log_config=None,  # ours, with --log-config applied over it (logs.configure_logging)
            access_log=False,
            lifespan="on",
            http=protocol_class(options.limits),
            # No WebSocket route anywhere: the websockets library is not imported (it slows every start), and an
            # upgrade request is answered as plain HTTP (LimitedHttpProtocol._unsupported_upgrade_warning).
            ws="none",
            # The app answers what still waits at graceful_timeout (JSON 503s); uvicorn's own cut-off,
            # later, would answer plain-text 500s and leave queued work to run.
            timeout_graceful_shutdown=uvicorn_cutoff(options.graceful_timeout),
            server_header=False,
            proxy_headers=False,  # the App's Starlette routes apply them; the prediction routes never read them
        )
    )


def bound_port(server: uvicorn.Server | None) -> int | None:
    """The port ``server`` listens on, once it does (None on a Unix socket)."""
    servers = getattr(server, "servers", None) or []
    if not servers or servers[0].sockets[0].family == socket.AF_UNIX:
        return None
    return int(servers[0].sockets[0].getsockname()[1])
