"""The gRPC server of one replica: ``grpc.aio`` on the event loop that runs the HTTP server, started and
stopped with the app (``server/app.py`` makes one when ``ServeOptions.grpc_port`` is set).

With replicas, each replica binds the same port with ``SO_REUSEPORT`` (the kernel spreads the
connections, as the shared socket does for HTTP); a lone process binds it alone, so a port taken by
another server is an error rather than a silent share.

A stop asked for (``begin_stop``, at SIGTERM) answers new inference calls UNAVAILABLE at once, with
the words of a 503 over REST (``ShuttingDown``), and ServerReady turns false; the calls in flight
get the graceful timeout, after which the engine answers what still waits (503, UNAVAILABLE). The
server itself stops with the app (``stop``), giving the calls still in flight what is left of that
timeout and a second more, so those answers go out. (``grpc.aio``'s own stop would refuse new calls
too, but a call racing it on an open connection is CANCELLED, which clients do not retry.)
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from localserve.config.options import ServeOptions
from localserve.engine.core import Engine
from localserve.errors import StartError
from localserve.protocols.v2.grpc.call import SERVICE
from localserve.protocols.v2.grpc.guard import Guard
from localserve.protocols.v2.grpc.servicer import Servicer
from localserve.protocols.v2.grpc.status import GrpcWire

log = logging.getLogger("localserve")


class GrpcDoor:
    """``inference.GRPCInferenceService`` on ``options.host:options.grpc_port``, onto ``engine``."""

    def __init__(self, engine: Engine, options: ServeOptions) -> None:
        assert options.grpc_port is not None
        wire = GrpcWire(hide_errors=options.hide_errors)  # one for every call, as HttpWire for HTTP
        self.servicer = Servicer(engine, wire)
        self.guard = Guard(options, wire, engine.extras)
        self.options = options
        host = f"[{options.host}]" if ":" in options.host else options.host
        self.address = f"{host}:{options.grpc_port}"
        self.port: int | None = None  # the port bound (grpc_port, or the one chosen for 0)
        self.server: grpc.aio.Server | None = None
        self._grace_until: float | None = None  # the loop's time until which calls in flight may finish

    async def start(self) -> None:
        """Bind and start serving; StartError when the port cannot be bound."""
        options = self.options
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", options.max_body_size),  # larger: RESOURCE_EXHAUSTED, unread
                ("grpc.max_send_message_length", -1),
                ("grpc.max_concurrent_streams", options.grpc_max_streams),  # calls at once on one connection
                # A connection that has not sent HTTP/2's preface and settings is closed after --header-timeout,
                # one with no call open after --grpc-idle-timeout (a GOAWAY: clients reconnect when they call).
                ("grpc.server_handshake_timeout_ms", _ms(options.limits.header_timeout)),
                ("grpc.max_connection_idle_ms", _ms(options.grpc_idle_timeout)),
                # Windows grow only for a message being read (guard.py reads one per connection at a time), not
                # by grpc's bandwidth probing, which opens every stream's window, read or not, by megabytes.
                ("grpc.http2.bdp_probe", 0),
                ("grpc.so_reuseport", 1 if options.replicas > 1 else 0),
            ],
        )
        server.add_generic_rpc_handlers((self.guard.guarded(SERVICE, self.servicer.methods()),))
        try:
            port = server.add_insecure_port(self.address)
        except RuntimeError as exc:
            raise StartError(f"Cannot serve gRPC on {self.address} (--grpc-port): {exc}.") from None
        await server.start()
        self.server, self.port = server, port
        shown = self.address.rsplit(":", 1)[0]
        log.info("serving %s (the Open Inference Protocol over gRPC) at %s:%d", SERVICE, shown, port)

    def begin_stop(self, grace: float) -> None:
        """A stop was asked for: new inference calls are UNAVAILABLE; those in flight get ``grace`` seconds."""
        self.servicer.stopping = True
        if self._grace_until is None:
            self._grace_until = asyncio.get_running_loop().time() + grace

    async def stop(self) -> None:
        """Stop serving: at once, or once the calls in flight end within what is left of their grace."""
        server, self.server = self.server, None
        if server is None:
            return
        self.servicer.stopping = True
        grace = None if self._grace_until is None else max(0.0, self._grace_until - asyncio.get_running_loop().time())
        await server.stop(grace)


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))
