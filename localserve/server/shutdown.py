"""The shutdown of one server process, owned here: what a stop begins, what the end runs and in which order,
and every deadline derived from ``--graceful-timeout`` (T below).

A stop is asked for by SIGTERM or SIGINT, which uvicorn's signal handling turns into ``Shutdown.begin``:

- at once: uvicorn accepts no new connection and closes the idle ones; gRPC answers new inference calls
  UNAVAILABLE and ServerReady turns false; the requests in flight and those queued go on; a replacement
  replica still loading stops loading (it has taken no connection);
- at T (the engine's timer): nothing queued starts any more, and every client still waiting gets a JSON 503
  (an AsyncAPI job's client too: the job runs again after a restart);
- at T + ``GRPC_MARGIN``: the gRPC calls still in flight are cut, their 503s (UNAVAILABLE) sent at T;
- at ceil(T) + ``UVICORN_MARGIN``: uvicorn's own cut-off, whose plain-text 500s the engine's answers at T
  forestall;
- once uvicorn is done, the app's lifespan ends in ``Shutdown.finish``: the AsyncAPI workers claim no more
  jobs and their stores close, the reloader stops watching, the gRPC server stops, the engine cancels
  loading and what still waits and exports its spans, the access log is flushed;
- at T + ``REPLICA_MARGIN`` the supervisor kills a replica that has not exited (``processes/replicas.py``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from localserve.logs import flush_access_log

if TYPE_CHECKING:  # the parts it stops; the deadlines alone are read by uvicorn's config and the supervisor
    from localserve.engine.core import Engine
    from localserve.protocols.asyncapi.routes import AsyncJobs
    from localserve.protocols.v2.grpc.server import GrpcDoor
    from localserve.server.reload import Reloader

GRPC_MARGIN = 1.0  # seconds past T for gRPC's answers sent at T to leave before its calls are cut
UVICORN_MARGIN = 2  # seconds past ceil(T) before uvicorn gives up on its connections
REPLICA_MARGIN = 5.0  # seconds past T the supervisor waits for a replica to exit before killing it


def uvicorn_cutoff(graceful_timeout: float) -> int:
    """uvicorn's ``timeout_graceful_shutdown``: later than the engine's answers at ``graceful_timeout``."""
    return math.ceil(graceful_timeout) + UVICORN_MARGIN


def replica_deadline(graceful_timeout: float) -> float:
    """Seconds the supervisor gives a replica to exit after its SIGTERM."""
    return graceful_timeout + REPLICA_MARGIN


class Shutdown:
    """The stop of one App: ``begin`` when it is asked for, ``finish`` when the lifespan ends (see the module doc)."""

    def __init__(
        self,
        graceful_timeout: float,
        engine: Engine,
        *,
        jobs: AsyncJobs | None = None,
        reloader: Reloader | None = None,
        grpc: GrpcDoor | None = None,
    ) -> None:
        self.graceful_timeout = graceful_timeout
        self.engine = engine
        self.jobs = jobs
        self.reloader = reloader
        self.grpc = grpc

    def begin(self) -> None:
        """A stop was asked for (SIGTERM/SIGINT, on the event loop): the graceful timeout starts; gRPC refuses new
        calls."""
        self.engine.begin_shutdown(self.graceful_timeout)
        if self.grpc is not None:
            self.grpc.begin_stop(self.graceful_timeout + GRPC_MARGIN)

    async def finish(self) -> None:
        """Stop the AsyncAPI workers and the reloader, the gRPC server, then the engine (loading and what still
        waits cancelled); flush the access log."""
        if self.jobs is not None:
            self.jobs.stop()
        if self.reloader is not None:
            await self.reloader.stop()
        if self.grpc is not None:
            await self.grpc.stop()  # the calls in flight had their grace since begin
        await self.engine.shutdown()
        flush_access_log()
